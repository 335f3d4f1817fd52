"""Lint and types are checked, not hoped for: ruff over the code, its tests and benchmarks,
and mypy over samsa/, with the settings of pyproject.toml. (The layers are test_layers.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing() -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "samsa", "tests", "bench", "scripts"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy_finds_nothing() -> None:
    # (its cache, in .mypy_cache, makes a second run take seconds)
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Success: no issues found" in run.stdout, run.stdout
