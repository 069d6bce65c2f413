"""``python -m harness``: the same command as the ``harness`` console script, for environments without it on PATH."""

import sys

from harness.cli import main

if __name__ == "__main__":
    sys.exit(main())
