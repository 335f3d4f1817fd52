"""`samsa ingest file` as a real process: lines, rotation, truncation, restarts, partial lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.helpers import spawn
from tests.pipeline.ingest_helpers import Reader, create_topic


class Tailer:
    """Starts and stops `samsa ingest file` processes for one test."""

    def __init__(self, bootstrap: str, topic: str, registry: Path) -> None:
        self.bootstrap, self.topic, self.registry = bootstrap, topic, registry
        self.proc: subprocess.Popen[str] | None = None

    def start(self, *paths: Path, extra: tuple[str, ...] = ()) -> None:
        self.proc = spawn("ingest", "file", *map(str, paths), "--bootstrap-server", self.bootstrap,
                          "--topic", self.topic, "--registry", str(self.registry), "--poll-interval-ms", "50",
                          "--close-inactive-ms", "300", *extra)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str, str]:
        assert self.proc is not None
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=30)
        rc, self.proc = self.proc.returncode, None
        return rc, out, err

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def tailer(broker: Any, topic_name: str, tmp_path: Path) -> Iterator[Tailer]:
    create_topic(broker.bootstrap, topic_name, 1)  # one partition: one order to check
    t = Tailer(broker.bootstrap, topic_name, tmp_path / "registry.json")
    yield t
    t.close()


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def test_lines_rotation_and_truncation(tailer: Tailer, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    append(log, "first\nsecond\n")
    tailer.start(log)
    with Reader(tailer.bootstrap, tailer.topic) as reader:
        reader.count(2)
        assert reader.values == [b"first", b"second"]
        assert {r[2] for r in reader.records} == {str(log).encode()}

        # Rotation by rename: the writer still appends to the renamed file, then reopens the path.
        with open(log, "a", encoding="utf-8") as old:
            os.rename(log, tmp_path / "app.log.1")
            old.write("third (before reopen)\n")
        append(log, "fourth (new file)\n")
        reader.until(lambda r: b"fourth (new file)" in r.values and b"third (before reopen)" in r.values)

        # copytruncate: copy away, truncate in place, the writer goes on at the start.
        append(log, "fifth\n")
        reader.count(5)
        os.truncate(log, 0)
        append(log, "sixth (after truncation)\n")
        reader.count(6)
        rc, out, err = tailer.stop()
        assert rc == 0, err
        assert "file: 6 lines published" in out
        assert sorted(v or b"" for v in reader.values) == sorted([
            b"first", b"second", b"third (before reopen)", b"fourth (new file)", b"fifth", b"sixth (after truncation)"
        ])
        assert reader.values[-2:] == [b"fifth", b"sixth (after truncation)"]
        assert reader.high_watermarks() == 6
    assert "was rotated" in err and "was truncated" in err


def test_a_clean_restart_resumes_without_duplicates_or_loss(tailer: Tailer, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    append(log, "".join(f"line {i}\n" for i in range(50)))
    tailer.start(log)
    with Reader(tailer.bootstrap, tailer.topic) as reader:
        reader.count(50)
        rc, _, err = tailer.stop()
        assert rc == 0, err
        registry = json.loads(tailer.registry.read_text())
        assert [(f["path"], f["offset"]) for f in registry["files"]] == [(str(log), log.stat().st_size)]

        append(log, "".join(f"line {i}\n" for i in range(50, 80)))  # written while stopped
        tailer.start(log)
        append(log, "".join(f"line {i}\n" for i in range(80, 100)))
        reader.count(100)
        rc, _, err = tailer.stop()
        assert rc == 0, err
        assert reader.high_watermarks() == 100
        assert reader.values == [f"line {i}".encode() for i in range(100)]


def test_after_a_crash_nothing_is_lost(tailer: Tailer, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    append(log, "".join(f"line {i}\n" for i in range(40)))
    tailer.start(log)
    with Reader(tailer.bootstrap, tailer.topic) as reader:
        reader.count(40)
        rc, _, _ = tailer.stop(signal.SIGKILL)
        assert rc == -signal.SIGKILL
        append(log, "".join(f"line {i}\n" for i in range(40, 60)))
        tailer.start(log)
        expected = [f"line {i}".encode() for i in range(60)]
        reader.until(lambda r: set(r.values) >= set(expected), what="all 60 lines")
        rc, _, err = tailer.stop()
        assert rc == 0, err
    # At-least-once: some lines may come twice, in order from the registry's last offset.
    assert list(dict.fromkeys(reader.values)) == expected


def test_a_partial_line_is_sent_only_once_completed(tailer: Tailer, tmp_path: Path) -> None:
    log, marker = tmp_path / "app.log", tmp_path / "marker.log"
    append(log, "whole\n")
    tailer.start(log, marker)  # read in this order every poll
    with Reader(tailer.bootstrap, tailer.topic) as reader:
        reader.count(1)
        append(log, "half a li")
        append(marker, "m1\n")
        # When m1 (written after the partial line, read after it) arrives, the partial line was
        # read in the same poll or before — and must not have been sent.
        reader.until(lambda r: b"m1" in r.values)
        assert reader.values == [b"whole", b"m1"]
        append(log, "ne, now whole\n")
        reader.count(3)
        assert reader.values == [b"whole", b"m1", b"half a line, now whole"]
        rc, _, err = tailer.stop()
        assert rc == 0, err
