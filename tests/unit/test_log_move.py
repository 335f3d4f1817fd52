"""storage/log_move.py: a log copied into another log dir batch for batch, committed and retired,
and what LogManager.startup makes of every state a crash can leave (the broker-level moves,
kill -9 included: tests/broker/test_alter_replica_log_dirs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.storage import Log, LogManager, StorageError, log_move
from samsa.storage.txn_index import AbortedTxn
from tests.unit.test_storage_log import FakeClock, append, make_batch
from tests.unit.test_storage_recovery import CFG


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def source_log(path: Path, clock: FakeClock, n: int = 30) -> Log:
    """n batches of 3 records in leader epochs 1 then 2, over several segments, one abort indexed."""
    lg = Log.open(path, CFG, clock=clock)
    for i in range(n):
        append(lg, make_batch(3, ts=1000 + i, value_size=40), leader_epoch=1 if i < n // 2 else 2)
    lg.add_aborted_txn(AbortedTxn(7, 30, 44, 45))
    return lg


def copy_all(src: Log, future: Log, chunk: int = 700) -> None:
    while future.log_end_offset < src.log_end_offset:
        sl = src.read(max(future.log_end_offset, src.log_start_offset), chunk)
        assert sl is not None
        log_move.copy_slice(future, sl, os.dup(sl.fd), src.aborted_txns_from(future.log_end_offset))


def batches(lg: Log) -> list[bytes]:
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 1)  # (one whole batch)
        assert sl is not None
        data = lg.read_bytes(sl)
        out.append(data)
        offset = int.from_bytes(data[:8], "big") + int.from_bytes(data[23:27], "big") + 1
    return out


def test_a_copy_holds_the_same_batches_epochs_and_aborts_and_replaces_the_log(tmp_path: Path,
                                                                               clock: FakeClock) -> None:
    src = source_log(tmp_path / "a" / "t-0", clock)
    src.delete_records_before(31)  # (the log start offset inside a batch, in a later segment)
    (tmp_path / "b").mkdir()
    start = src.read(src.log_start_offset, 1)
    assert start is not None and start.first_batch_offset == 30
    future = log_move.create_future(tmp_path / "b", "t", 0, CFG, start_offset=30, source=src.dir, clock=clock)
    assert log_move.parse_future_dir(future.dir.name) == ("t", 0) and future.log_end_offset == 30
    copy_all(src, future)
    assert future.log_end_offset == src.log_end_offset == 90

    copy = log_move.commit(future, src.dir, clock=clock)
    assert copy.dir == tmp_path / "b" / "t-0" and log_move.is_marked(copy.dir)
    assert not future.dir.exists()
    assert batches(copy) == batches(src) and len(batches(src)) == 20  # (from the batch holding 31)
    assert copy.log_end_offset == 90 and copy.recovery_point == 90
    assert [e.epoch for e in copy.leader_epochs.entries()] == [1, 2]
    assert copy.leader_epochs.entries()[1] == src.leader_epochs.entries()[1]
    assert copy.collect_aborted_transactions(30, 90) == src.collect_aborted_transactions(30, 90) == [(7, 30)]

    # the swap's part in storage: the log start offset and epochs follow the source
    copy.leader_epochs.copy_from(src.leader_epochs)
    copy.delete_records_before(src.log_start_offset)
    assert copy.log_start_offset == 31 and copy.leader_epochs.entries() == src.leader_epochs.entries()
    assert batches(copy) == batches(src)

    doomed = log_move.retire(src.dir, copy.dir)
    assert doomed.name.startswith("t-0.") and doomed.name.endswith("-delete") and not src.dir.exists()
    assert not log_move.is_marked(copy.dir)
    log_move.remove(doomed)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == []


def test_commit_refuses_a_taken_name(tmp_path: Path, clock: FakeClock) -> None:
    src = source_log(tmp_path / "a" / "t-0", clock, n=2)
    (tmp_path / "b" / "t-0").mkdir(parents=True)
    future = log_move.create_future(tmp_path / "b", "t", 0, CFG, start_offset=0, source=src.dir, clock=clock)
    copy_all(src, future)
    with pytest.raises(StorageError):
        log_move.commit(future, src.dir, clock=clock)


def test_a_committed_copy_that_will_not_serve_is_a_future_again(tmp_path: Path, clock: FakeClock) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    src = source_log(a / "t-0", clock, n=4)
    b.mkdir()
    future = log_move.create_future(b, "t", 0, CFG, start_offset=0, source=src.dir, clock=clock)
    copy_all(src, future)
    copy = log_move.commit(future, src.dir, clock=clock)
    copy.close()
    log_move.uncommit(copy.dir)  # (a shutdown between the commit and the swap)
    (name,) = [p.name for p in b.iterdir() if p.name.startswith("t-0")]
    assert log_move.parse_future_dir(name) == ("t", 0)
    src.close()
    m = LogManager([a, b], CFG, clock)
    m.startup()
    lg = m.get_log(("t", 0))
    assert lg is not None and lg.dir == a / "t-0" and m.interrupted_moves == {("t", 0): b}
    assert [p.name for p in b.iterdir() if p.name.startswith("t-0")] == []


def test_the_source_reports_its_truncations(tmp_path: Path, clock: FakeClock) -> None:
    src = source_log(tmp_path / "a" / "t-0", clock, n=5)
    seen: list[tuple[int, bool]] = []
    src.on_truncate = lambda offset, fully: seen.append((offset, fully))
    src.truncate_to(7)  # (the batch holding 7 goes whole: 6..8)
    src.truncate_to(100)  # (nothing to cut: not reported)
    src.truncate_fully_and_start_at(50)
    assert seen == [(6, False), (50, True)]


@pytest.mark.parametrize("current_n,copy_n,kept", [
    (10, 10, "copy"),  # a tie: the same batches, and the move is done
    (12, 10, "current"),  # the current took appends after the commit, before the swap
    (10, 12, "copy"),  # the copy took appends after the swap
])
def test_startup_keeps_the_longer_log_of_a_move_stopped_after_its_commit(tmp_path: Path, clock: FakeClock,
                                                                         current_n: int, copy_n: int,
                                                                         kept: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    current = source_log(a / "t-0", clock, n=current_n)
    current.close()
    copy = source_log(b / "t-0", clock, n=copy_n)
    copy.close()
    (b / "t-0" / log_move.MOVE_MARKER).write_text(f"source={a}\n")
    m = LogManager([a, b], CFG, clock)
    m.startup()
    lg = m.get_log(("t", 0))
    assert lg is not None
    want = b if kept == "copy" else a
    gone = a if kept == "copy" else b
    assert lg.dir == want / "t-0" and lg.log_end_offset == 3 * max(current_n, copy_n)
    assert not log_move.is_marked(lg.dir)
    assert [p.name for p in gone.iterdir() if p.name.startswith("t-0")] == []
    assert m.interrupted_moves == ({} if kept == "copy" else {("t", 0): b})


def test_startup_removes_an_uncommitted_copy_and_notes_the_move(tmp_path: Path, clock: FakeClock) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    source_log(a / "t-0", clock, n=4).close()
    b.mkdir()
    future = log_move.create_future(b, "t", 0, CFG, start_offset=0, source=a / "t-0", clock=clock)
    future.close()
    m = LogManager([a, b], CFG, clock)
    m.startup()
    lg = m.get_log(("t", 0))
    assert lg is not None and lg.dir == a / "t-0" and lg.log_end_offset == 12
    assert [p.name for p in b.iterdir() if p.name.startswith("t-0")] == []
    assert m.interrupted_moves == {("t", 0): b}


def test_startup_unmarks_a_finished_move_and_refuses_other_duplicates(tmp_path: Path, clock: FakeClock) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    source_log(b / "t-0", clock, n=2).close()
    (b / "t-0" / log_move.MOVE_MARKER).write_text(f"source={a}\n")
    m = LogManager([a, b], CFG, clock)
    m.startup()
    lg = m.get_log(("t", 0))
    assert lg is not None and lg.dir == b / "t-0" and not log_move.is_marked(lg.dir)
    m.shutdown()
    source_log(a / "t-0", clock, n=2).close()
    for marked in ((), (a, b)):  # neither is a move's copy, or both say they are
        for d in marked:
            (d / "t-0" / log_move.MOVE_MARKER).write_text("source=x\n")
        with pytest.raises(StorageError, match="duplicate log directories"):
            LogManager([a, b], CFG, clock).startup()


def test_parse_future_dir() -> None:
    assert log_move.parse_future_dir("my.topic-name-3." + "a" * 32 + "-future") == ("my.topic-name", 3)
    name = log_move.future_dir_name("t", 12)
    assert log_move.parse_future_dir(name) == ("t", 12)
    for bad in ("t-0", "t-0.abc-future", "t-0." + "a" * 32 + "-delete", "t." + "a" * 32 + "-future"):
        assert log_move.parse_future_dir(bad) is None
