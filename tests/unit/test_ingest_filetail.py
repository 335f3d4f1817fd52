"""The file tailer, one poll at a time against real files and a producer whose acks the test drives."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.pipeline.ingest.filetail import AckTracker, FileTailer, load_registry
from tests.pipeline.ingest_fakes import FakeSender


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "acks,committed",
    [([], 0), ([0], 10), ([1], 0), ([1, 0], 20), ([0, 2], 10), ([2, 1, 0], 30), ([0, 1, 2], 30)],
)
def test_ack_tracker_commits_only_an_acknowledged_prefix(acks: list[int], committed: int) -> None:
    t = AckTracker(0)
    entries = [t.sent(end) for end in (10, 20, 30)]
    for i in acks:
        t.acked(entries[i])
    assert t.committed == committed
    assert t.outstanding == 3 - sum(1 for i in range(3) if t.committed >= (i + 1) * 10)


OPEN: list[FileTailer] = []


@pytest.fixture(autouse=True)
def close_tailers() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


class Tail:
    """A FileTailer over tmp files with a fake producer and clock."""

    def __init__(self, tmp: Path, *names: str, auto_ack: bool = True, **kw: object) -> None:
        self.tmp = tmp
        self.paths = [tmp / n for n in (names or ("app.log",))]
        self.registry = tmp / "registry.json"
        self.sender = FakeSender(auto_ack=auto_ack)
        self.clock = Clock()
        self.kw = kw
        self.tailer = self.start()

    def start(self) -> FileTailer:
        if hasattr(self, "tailer"):
            self.tailer.close()
        self.tailer = FileTailer(
            self.sender, [str(p) for p in self.paths], topic="logs", registry_path=str(self.registry),
            clock=self.clock, **self.kw,  # type: ignore[arg-type]
        )
        OPEN.append(self.tailer)
        return self.tailer

    def poll(self) -> list[bytes]:
        before = len(self.sender.sent)
        self.tailer.poll_once()
        self.sender.poll()
        return self.sender.values[before:]

    def stop(self) -> None:
        self.sender.flush(1.0)
        self.tailer.save_registry()
        self.tailer.close()

    def offsets(self) -> dict[str, int]:
        return {k[0]: e.offset for k, e in load_registry(str(self.registry)).items()}


def write(path: Path, text: str | bytes, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(text.encode() if isinstance(text, str) else text)


def test_lines_become_records_keyed_by_path(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "one\ntwo\r\n\nthree\n")
    t = Tail(tmp_path)
    assert t.poll() == [b"one", b"two", b"", b"three"]
    assert {key for _, _, key in t.sender.sent} == {str(log).encode()}
    assert all(t.sender.resend_flags)
    write(log, "four\n")
    assert t.poll() == [b"four"]
    assert t.poll() == []


def test_no_key_when_asked(tmp_path: Path) -> None:
    write(tmp_path / "app.log", "x\n")
    t = Tail(tmp_path, key_by_path=False)
    t.poll()
    assert t.sender.sent == [("logs", b"x", None)]


def test_a_partial_last_line_is_held_until_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "done\npart")
    t = Tail(tmp_path)
    assert t.poll() == [b"done"]
    write(log, "ial")
    assert t.poll() == []
    t.stop()
    assert t.offsets() == {str(log): 5}  # the partial line is not committed
    t.start()
    write(log, " line\nnext\n")
    assert t.poll() == [b"partial line", b"next"]


def test_rotation_by_rename_finishes_the_old_file_then_reads_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "a1\n")
    t = Tail(tmp_path, close_inactive_s=5.0)
    assert t.poll() == [b"a1"]
    with open(log, "ab", buffering=0) as old:  # the writer still holds the old file
        old.write(b"a2\n")
        os.rename(log, tmp_path / "app.log.1")
        old.write(b"a3\n")
        write(log, "b1\n")
        assert t.poll() == [b"a2", b"a3", b"b1"]
        old.write(b"a4 late\npartial")  # it has not reopened yet
        write(log, "b2\n")
    assert t.poll() == [b"b2", b"a4 late"]
    t.tailer.save_registry()
    assert len(load_registry(str(t.registry))) == 2  # old and new file, both still open
    t.clock.now += 5.0
    assert t.poll() == [b"partial"]  # inactive: closed, its unterminated line sent as is
    t.poll()
    t.tailer.save_registry()
    assert list(t.offsets().values()) == [6]  # only the new file is left


def test_a_deleted_and_recreated_file_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "old\n")
    t = Tail(tmp_path)
    assert t.poll() == [b"old"]
    log.unlink()
    assert t.poll() == []
    write(log, "new\n")
    assert t.poll() == [b"new"]


def test_truncation_reads_the_file_again_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "line one\nline two\n")
    t = Tail(tmp_path)
    assert t.poll() == [b"line one", b"line two"]
    os.truncate(log, 0)  # copytruncate
    write(log, "fresh\n")
    assert t.poll() == [b"fresh"]
    t.stop()
    assert t.offsets() == {str(log): 6}


def test_truncation_is_seen_even_when_the_file_regrew_past_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "short\n")
    t = Tail(tmp_path)
    assert t.poll() == [b"short"]
    write(log, "a longer line, after truncation\n", mode="wb")  # truncated and rewritten between polls
    assert t.poll() == [b"a longer line, after truncation"]


def test_the_registry_advances_only_over_acknowledged_lines(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "aa\nbb\ncc\n")
    t = Tail(tmp_path, auto_ack=False)
    t.poll()
    t.sender.ack(1)  # out of order: nothing committed yet
    t.tailer.save_registry()
    assert t.offsets() == {str(log): 0}
    t.sender.ack(0)
    t.tailer.save_registry()
    assert t.offsets() == {str(log): 6}  # aa and bb
    # A crash now: the restarted tailer sends cc again (at-least-once), nothing is lost.
    t2 = Tail(tmp_path)
    assert t2.poll() == [b"cc"]


def test_a_clean_restart_sends_exactly_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "".join(f"line {i}\n" for i in range(100)))
    t = Tail(tmp_path)
    first = t.poll()
    t.stop()
    write(log, "line 100\n")
    t.start()
    assert first + t.poll() == [f"line {i}".encode() for i in range(101)]
    doc = json.loads(t.registry.read_text())
    assert doc["version"] == 1 and doc["files"][0]["path"] == str(log) and doc["files"][0]["ino"] == log.stat().st_ino


def test_from_end_skips_what_is_there_at_start_only(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "before\n")
    t = Tail(tmp_path, from_end=True)
    assert t.poll() == []
    write(log, "after\n")
    assert t.poll() == [b"after"]
    os.rename(log, tmp_path / "app.log.1")
    write(log, "rotated in\n")
    assert t.poll() == [b"rotated in"]  # a new file is read from its start


def test_a_new_file_on_a_reused_inode_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "first file, long enough\n")
    t = Tail(tmp_path)
    t.poll()
    t.stop()
    # Same path and inode, other content: overwrite in place while the tailer is down.
    write(log, "SECOND file, other bytes\nmore\n", mode="r+b")
    t.start()
    assert t.poll() == [b"SECOND file, other bytes", b"more"]


def test_a_file_shorter_than_its_registry_offset_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "a long first line\n")
    t = Tail(tmp_path)
    t.poll()
    t.stop()
    write(log, "a\n", mode="wb")  # truncated and rewritten while the tailer was down
    t.start()
    assert t.poll() == [b"a"]


def test_a_missing_file_is_waited_for(tmp_path: Path) -> None:
    t = Tail(tmp_path, "later.log")
    assert t.poll() == []
    write(tmp_path / "later.log", "here\n")
    assert t.poll() == [b"here"]


def test_long_lines_are_sent_in_pieces(tmp_path: Path) -> None:
    write(tmp_path / "app.log", "x" * 25 + "\n" + "y" * 12)
    t = Tail(tmp_path, max_line_bytes=10)
    assert t.poll() == [b"x" * 10, b"x" * 10, b"x" * 5, b"y" * 10]
    write(tmp_path / "app.log", "\n")
    assert t.poll() == [b"yy"]


def test_other_files_registry_entries_are_kept(tmp_path: Path) -> None:
    write(tmp_path / "a.log", "a\n")
    write(tmp_path / "b.log", "b\n")
    Tail(tmp_path, "a.log", "b.log").stop()
    only_a = Tail(tmp_path, "a.log")
    only_a.poll()
    only_a.stop()
    assert set(only_a.offsets()) == {str(tmp_path / "a.log"), str(tmp_path / "b.log")}


def test_reading_pauses_while_too_many_lines_are_unacknowledged(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    write(log, "a\nb\nc\n")
    t = Tail(tmp_path, auto_ack=False, max_outstanding=2)
    assert t.poll() == [b"a", b"b", b"c"]
    write(log, "d\n")
    assert t.poll() == []
    t.sender.ack_all()
    assert t.poll() == [b"d"]


def test_a_corrupt_registry_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "registry.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot read registry"):
        Tail(tmp_path)
