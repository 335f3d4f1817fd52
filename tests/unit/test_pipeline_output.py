"""`samsa.pipeline.job._output_to`: what a process started meanwhile prints (Spark's JVM and the
Python workers it forks) goes to the log file, and this process's output comes back after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from samsa.pipeline.job import _output_to

CHILD = "import sys; print('child-out', flush=True); print('child-err', file=sys.stderr, flush=True)"


def test_a_child_started_meanwhile_prints_into_the_file(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "spark.log"
    log.write_text("earlier\n")
    with _output_to(log):
        subprocess.run([sys.executable, "-c", CHILD], check=True)
    subprocess.run([sys.executable, "-c", "print('after', flush=True)"], check=True)
    lines = log.read_text().splitlines()
    assert lines[0] == "earlier" and sorted(lines[1:]) == ["child-err", "child-out"]  # appended
    captured = capfd.readouterr()
    assert "after" in captured.out and "child" not in captured.out + captured.err
