"""Run `python -m samsa TOOL ...` as a real subprocess and check the shape of its output."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence


def samsa(*args: str, input: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samsa", *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "samsa", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> str:
    """Assert success; returns stdout."""
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def one_line_error(proc: subprocess.CompletedProcess[str] | tuple[int, str], codes: Sequence[int] = (1,)) -> str:
    """Assert a failure reported as exactly one stderr line without a traceback; returns that line."""
    rc, err = (proc.returncode, proc.stderr) if isinstance(proc, subprocess.CompletedProcess) else proc
    assert rc in codes, f"exit {rc}, expected one of {codes}; stderr:\n{err}"
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got:\n{err}"
    return lines[0]
