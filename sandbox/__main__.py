"""``python -m sandbox``: the same report as ``harness sandbox``."""

from sandbox.cli import main

raise SystemExit(main())
