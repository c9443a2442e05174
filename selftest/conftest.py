"""Fixtures shared by the self-tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference engine's tokenizer.json, exported the way a user would."""
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    subprocess.run([sys.executable, "-m", "engine_acceptance.reference_engine", "--export-tokenizer", str(path)],
                   check=True, timeout=60)
    return path
