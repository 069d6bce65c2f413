"""A missing backend venv fails the integration tests with the command that creates it (never a skip)."""

from __future__ import annotations

import os

import pytest
from tel_backends import ROOT, SETUP, backend_python


def test_missing_backend_venv_fails_with_setup_command():
    with pytest.raises(pytest.fail.Exception) as e:
        backend_python("no-such-backend")
    assert f"{SETUP} no-such-backend" in str(e.value) and ".venv-no-such-backend" in str(e.value)


def test_setup_script_pins_the_backend_versions():
    script = ROOT / SETUP
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert "mlflow==3.17.2" in text and "arize-phoenix==20.26.1" in text
