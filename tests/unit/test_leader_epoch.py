"""samsa.storage.leader_epoch: the leader epoch cache alone, then as the Log keeps it."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from samsa.protocol.batch import BatchHeader, parse_header
from samsa.protocol.records import build_batch
from samsa.storage import Log, LogConfig
from samsa.storage import leader_epoch as leader_epoch_module
from samsa.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, EpochEntry, read_leader_epochs, write_leader_epochs
from samsa.storage.leader_epoch import LeaderEpochCache
from tests.unit.test_storage_log import SMALL, FakeClock, append, make_batch

E = EpochEntry
BASE = [E(1, 0), E(3, 10), E(6, 25)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[list[EpochEntry]]:
    """Every checkpoint write the cache makes (still written to disk)."""
    seen: list[list[EpochEntry]] = []
    real = leader_epoch_module.write_leader_epochs

    def spy(path: Path, entries: Sequence[EpochEntry], *, sync: bool = True) -> None:
        seen.append(list(entries))
        real(path, entries, sync=sync)

    monkeypatch.setattr(leader_epoch_module, "write_leader_epochs", spy)
    return seen


def cache_with(path: Path, entries: Sequence[EpochEntry]) -> LeaderEpochCache:
    cache = LeaderEpochCache(path / LEADER_EPOCH_CHECKPOINT)
    for epoch, start in entries:
        cache.assign(epoch, start)
    assert cache.entries() == list(entries)
    return cache


# ----------------------------------------------------------------------------- the cache


@pytest.mark.parametrize(("before", "epoch", "start", "changed", "after"), [
    ([], 2, 10, True, [E(2, 10)]),
    ([], 0, 0, True, [E(0, 0)]),
    ([E(2, 10)], 2, 10, False, [E(2, 10)]),  # already known
    ([E(2, 10)], 2, 15, False, [E(2, 10)]),  # an epoch's start offset never moves up
    ([E(2, 10)], 2, 5, True, [E(2, 5)]),  # ... but down
    ([E(2, 10)], 3, 15, True, [E(2, 10), E(3, 15)]),  # the usual new epoch
    ([E(2, 10)], 3, 10, True, [E(3, 10)]),  # epoch 2 wrote nothing
    ([E(2, 10)], 3, 8, True, [E(3, 8)]),  # start offsets must increase
    ([E(2, 10), E(4, 20)], 3, 25, True, [E(2, 10), E(3, 25)]),  # epochs must increase
    ([E(2, 10), E(4, 20), E(5, 30)], 6, 15, True, [E(2, 10), E(6, 15)]),
    ([E(1, 0), E(3, 10)], 3, 5, True, [E(1, 0), E(3, 5)]),
    ([E(1, 0), E(3, 10)], 0, 20, True, [E(0, 20)]),
])
def test_assign(tmp_path: Path, writes: list[list[EpochEntry]], before: list[EpochEntry], epoch: int, start: int,
                changed: bool, after: list[EpochEntry]) -> None:
    cache = cache_with(tmp_path, before)
    writes.clear()
    assert cache.assign(epoch, start) is changed
    assert cache.entries() == after
    assert writes == ([after] if changed else [])
    assert read_leader_epochs(cache.path) == after
    assert cache.latest_entry() == after[-1] and cache.latest_epoch() == after[-1].epoch


@pytest.mark.parametrize(("epoch", "start"), [(-1, 0), (0, -1)])
def test_assign_rejects_negative_values(tmp_path: Path, epoch: int, start: int) -> None:
    cache = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    with pytest.raises(ValueError):
        cache.assign(epoch, start)
    assert cache.entries() == [] and not cache.path.exists()


def test_empty_cache(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    assert cache.entries() == [] and cache.latest_entry() is None and cache.latest_epoch() is None
    assert cache.needs_rebuild  # no file yet
    assert cache.end_offset_for(0, 100) == (-1, -1)


@pytest.mark.parametrize(("requested", "expected"), [
    (-1, (-1, -1)),  # UNDEFINED_EPOCH
    (0, (-1, -1)),  # below the first epoch
    (1, (1, 10)),
    (2, (1, 10)),  # no epoch 2: the largest below it, ending where epoch 3 starts
    (3, (3, 25)),
    (5, (3, 25)),
    (6, (6, 40)),  # the latest epoch runs to the log end offset
    (7, (-1, -1)),  # above every known epoch
])
def test_end_offset_for(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    assert cache_with(tmp_path, BASE).end_offset_for(requested, 40) == expected


@pytest.mark.parametrize(("end_offset", "after"), [
    (40, BASE),
    (26, BASE),
    (25, BASE[:2]),  # an epoch starting at the new end has no data left
    (11, BASE[:2]),
    (10, BASE[:1]),
    (1, BASE[:1]),
    (0, []),
    (-1, BASE),
])
def test_truncate_from_end(tmp_path: Path, writes: list[list[EpochEntry]], end_offset: int,
                           after: list[EpochEntry]) -> None:
    cache = cache_with(tmp_path, BASE)
    writes.clear()
    assert cache.truncate_from_end(end_offset) is (after != BASE)
    assert cache.entries() == after
    assert writes == ([after] if after != BASE else [])
    assert LeaderEpochCache(cache.path).entries() == after


@pytest.mark.parametrize(("start_offset", "after"), [
    (0, BASE),
    (5, [E(1, 5), E(3, 10), E(6, 25)]),
    (9, [E(1, 9), E(3, 10), E(6, 25)]),
    (10, [E(3, 10), E(6, 25)]),  # epoch 1 is gone entirely
    (12, [E(3, 12), E(6, 25)]),
    (25, [E(6, 25)]),
    (30, [E(6, 30)]),  # the latest epoch holds the new start
])
def test_truncate_from_start(tmp_path: Path, writes: list[list[EpochEntry]], start_offset: int,
                             after: list[EpochEntry]) -> None:
    cache = cache_with(tmp_path, BASE)
    writes.clear()
    assert cache.truncate_from_start(start_offset) is (after != BASE)
    assert cache.entries() == after
    assert writes == ([after] if after != BASE else [])
    assert cache.truncate_from_start(start_offset) is False  # idempotent, no second write
    assert LeaderEpochCache(cache.path).entries() == after


def test_truncate_empty_cache_writes_nothing(tmp_path: Path, writes: list[list[EpochEntry]]) -> None:
    cache = LeaderEpochCache(tmp_path / LEADER_EPOCH_CHECKPOINT)
    assert cache.truncate_from_end(0) is False
    assert cache.truncate_from_start(10) is False
    assert writes == []


def test_persisted_in_kafka_format_and_reloaded(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, BASE)
    assert cache.path.read_text() == "0\n3\n1 0\n3 10\n6 25\n"
    again = LeaderEpochCache(cache.path)
    assert again.entries() == BASE and not again.needs_rebuild
    assert not cache.path.with_name(LEADER_EPOCH_CHECKPOINT + ".tmp").exists()
    again.clear()
    assert again.entries() == [] and read_leader_epochs(cache.path) == []
    assert LeaderEpochCache(cache.path).entries() == [] and not LeaderEpochCache(cache.path).needs_rebuild


def test_non_monotonic_file_is_cleaned_on_load(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    write_leader_epochs(path, [E(1, 0), E(4, 20), E(3, 30)])  # as assign() would have resolved it
    assert LeaderEpochCache(path).entries() == [E(1, 0), E(3, 30)]


@pytest.mark.parametrize("content", [
    b"garbage\n",
    b"0\n2\n1 0\n",  # count mismatch
    b"1\n1\n1 0\n",  # unknown version
    b"0\n1\n1 x\n",
    b"0\n1\n-1 0\n",  # negative epoch
    b"0\n1\n1 2 3\n",
    b"\xff\xfe\n",  # not text
])
def test_corrupt_checkpoint_starts_empty_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                        content: bytes) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="samsa.storage"):
        cache = LeaderEpochCache(path)
    assert cache.entries() == [] and cache.needs_rebuild
    assert any("leader epoch checkpoint" in r.getMessage() for r in caplog.records)
    assert cache.assign(2, 7)
    assert LeaderEpochCache(path).entries() == [E(2, 7)]


# ----------------------------------------------------------------------------- header scan


def follower_batch(base_offset: int, epoch: int, n: int = 2, value_size: int = 20) -> bytes:
    no_headers: list[tuple[str, bytes | None]] = []
    records = [(None, b"v" * value_size, no_headers, 1000 + i) for i in range(n)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


def follower_buf(epochs: Sequence[int], start: int = 0, n: int = 2,
                 value_size: int = 20) -> tuple[bytes, list[tuple[int, BatchHeader]]]:
    """Batches of n records at offsets start, start+n, ... with these leader epochs."""
    parts = [follower_batch(start + i * n, e, n, value_size) for i, e in enumerate(epochs)]
    buf = b"".join(parts)
    headers, pos = [], 0
    for part in parts:
        headers.append((pos, parse_header(buf, pos)))
        pos += len(part)
    return buf, headers


@pytest.mark.parametrize("chunk", [64 << 10, 200, 61, 16])
def test_epoch_starts_walks_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(leader_epoch_module, "HEADER_SCAN_CHUNK", chunk)
    buf, _ = follower_buf([-1, 0, 0, 2, -1, 2, 5, 5, 3, 7], n=3, value_size=150)
    path = tmp_path / "data"
    path.write_bytes(buf + b"\x00" * 30)  # a torn tail is not a batch
    fd = os.open(path, os.O_RDONLY)
    try:
        got = list(leader_epoch_module.epoch_starts(fd, 0, len(buf) + 30))
    finally:
        os.close(fd)
    assert got == [(0, 3), (2, 9), (5, 18), (3, 24), (7, 27)]


# ----------------------------------------------------------------------------- in the Log


CFG = SMALL.replace(segment_bytes=500)  # 4 batches of 2 records (115 bytes) per segment


def open_log(tmp_path: Path, clock: FakeClock, config: LogConfig = CFG, **kw: object) -> Log:
    return Log.open(tmp_path / "t-0", config, clock=clock, **kw)  # type: ignore[arg-type]


def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT


def follow(lg: Log, *epochs: int) -> None:
    """Replicate batches of 2 records with these epochs, one append each."""
    for epoch in epochs:
        buf, headers = follower_buf([epoch], start=lg.log_end_offset)
        lg.append_as_follower(buf, headers)


def test_leader_append_assigns_its_epoch_at_the_first_offset(tmp_path: Path, clock: FakeClock,
                                                              writes: list[list[EpochEntry]]) -> None:
    lg = open_log(tmp_path, clock)
    assert lg.leader_epochs.entries() == [] and not checkpoint(tmp_path).exists()
    append(lg, make_batch(2))  # no epoch: not recorded
    append(lg, make_batch(3), make_batch(1), leader_epoch=0)
    append(lg, make_batch(2), leader_epoch=0)
    append(lg, make_batch(2), leader_epoch=4)
    append(lg, make_batch(1), leader_epoch=4)
    assert lg.leader_epochs.entries() == [E(0, 2), E(4, 8)]
    assert len(writes) == 2  # once per new epoch
    assert lg.leader_epochs.end_offset_for(0, lg.log_end_offset) == (0, 8)
    assert lg.leader_epochs.end_offset_for(4, lg.log_end_offset) == (4, 11)
    lg.close()
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [E(0, 2), E(4, 8)]
    again.close()


def test_follower_append_assigns_only_epoch_changes(tmp_path: Path, clock: FakeClock,
                                                    writes: list[list[EpochEntry]]) -> None:
    lg = open_log(tmp_path, clock, CFG.replace(segment_bytes=4000))
    buf, headers = follower_buf([-1, 1, 1, 3, -1, 3, 5])  # one append of 7 batches
    lg.append_as_follower(buf, headers)
    assert lg.leader_epochs.entries() == [E(1, 2), E(3, 6), E(5, 12)]
    assert len(writes) == 3
    writes.clear()
    follow(lg, 5, 5, -1, 5)
    assert writes == []  # same epoch: the cache is not touched
    follow(lg, 6)
    assert lg.leader_epochs.entries() == [E(1, 2), E(3, 6), E(5, 12), E(6, 22)]
    assert read_leader_epochs(checkpoint(tmp_path)) == lg.leader_epochs.entries()
    lg.close()


def test_truncation_keeps_the_cache_consistent(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 0, 0, 2, 2, 2, 4, 4, 7)  # epoch 0 at 0, 2 at 4, 4 at 10, 7 at 14; log end 16
    assert lg.leader_epochs.entries() == [E(0, 0), E(2, 4), E(4, 10), E(7, 14)]
    assert len(lg.segments) > 1
    lg.truncate_to(11)  # inside a 2-record batch: it goes whole, the log ends at 10
    assert lg.log_end_offset == 10
    assert lg.leader_epochs.entries() == [E(0, 0), E(2, 4)]
    assert lg.leader_epochs.end_offset_for(2, lg.log_end_offset) == (2, 10)
    assert lg.leader_epochs.end_offset_for(4, lg.log_end_offset) == (-1, -1)
    follow(lg, 5)  # the new leader's data
    assert lg.leader_epochs.entries() == [E(0, 0), E(2, 4), E(5, 10)]
    lg.delete_records_before(5)
    assert lg.leader_epochs.entries() == [E(2, 5), E(5, 10)]
    lg.truncate_fully_and_start_at(40)
    assert lg.leader_epochs.entries() == [] and read_leader_epochs(checkpoint(tmp_path)) == []
    follow(lg, 6)
    assert lg.leader_epochs.entries() == [E(6, 40)]
    lg.close()
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [E(6, 40)]
    again.close()


def test_retention_moves_the_first_epoch_up(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, CFG.replace(retention_ms=10_000, file_delete_delay_ms=0))
    follow(lg, 1, 1, 1, 1, 2, 2)  # timestamps ~1000: long expired
    buf, headers = follower_buf([3], start=lg.log_end_offset)
    lg.append_as_follower(buf, headers)
    lg.roll()
    fresh = build_batch([(None, b"v", [], clock.ms)], base_offset=lg.log_end_offset, partition_leader_epoch=3)
    lg.append_as_follower(fresh, [(0, parse_header(fresh))])
    assert lg.leader_epochs.entries() == [E(1, 0), E(2, 8), E(3, 12)]
    assert lg.delete_old_segments(clock.ms) > 0
    assert lg.log_start_offset == 14
    assert lg.leader_epochs.entries() == [E(3, 14)]
    lg.close()


def test_rebuilt_from_batches_when_the_checkpoint_is_missing(tmp_path: Path, clock: FakeClock,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, -1, 0, 0, 3, 3, 3, 8)
    append(lg, make_batch(2), leader_epoch=9)
    expected = [E(0, 2), E(3, 6), E(8, 12), E(9, 14)]
    assert lg.leader_epochs.entries() == expected and len(lg.segments) > 1
    lg.close()
    checkpoint(tmp_path).unlink()
    with caplog.at_level(logging.INFO, logger="samsa.storage"):
        again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == expected
    assert read_leader_epochs(checkpoint(tmp_path)) == expected
    assert any("Rebuilt the leader epoch cache" in r.getMessage() for r in caplog.records)
    again.close()


def test_rebuilt_when_the_checkpoint_is_corrupt(tmp_path: Path, clock: FakeClock,
                                                caplog: pytest.LogCaptureFixture) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 0, 2, 2, 5)
    lg.delete_records_before(3)
    lg.close()
    checkpoint(tmp_path).write_text("0\n7\nnonsense\n")
    with caplog.at_level(logging.WARNING, logger="samsa.storage"):
        again = open_log(tmp_path, clock, log_start_offset=3)
    assert again.leader_epochs.entries() == [E(2, 3), E(5, 6)]  # cut to the log start offset
    # The rebuilt entries are written; the cut to the log start offset is made again at each open.
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(0, 0), E(2, 2), E(5, 6)]
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    again.close()
    again = open_log(tmp_path, clock, log_start_offset=3)
    assert again.leader_epochs.entries() == [E(2, 3), E(5, 6)]
    follow(again, 5)
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(2, 3), E(5, 6)]
    again.close()


def test_rebuild_of_a_log_without_epochs_is_done_once(tmp_path: Path, clock: FakeClock,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    lg = open_log(tmp_path, clock)
    append(lg, make_batch(2))
    follow(lg, -1)
    lg.close()
    assert not checkpoint(tmp_path).exists()
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [] and read_leader_epochs(checkpoint(tmp_path)) == []
    again.close()

    def fail(*args: object) -> None:
        raise AssertionError("scanned again")

    monkeypatch.setattr("samsa.storage.log.epoch_starts", fail)
    open_log(tmp_path, clock).close()  # the (empty) checkpoint is trusted now


def test_no_rebuild_or_file_for_an_empty_log(tmp_path: Path, clock: FakeClock,
                                             writes: list[list[EpochEntry]]) -> None:
    open_log(tmp_path, clock).close()
    open_log(tmp_path, clock).close()
    assert writes == [] and not checkpoint(tmp_path).exists()


def test_only_the_first_write_over_a_missing_checkpoint_skips_fsync(tmp_path: Path, clock: FakeClock,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr("samsa.storage.checkpoints.os.fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    lg = open_log(tmp_path, clock)
    append(lg, make_batch(2), leader_epoch=0)  # a new partition's first epoch: nothing fsynced
    assert synced == [] and read_leader_epochs(checkpoint(tmp_path)) == [E(0, 0)]
    append(lg, make_batch(2), leader_epoch=1)  # later changes are durable before the data
    assert len(synced) == 2  # the file, then its directory
    lg.close()
    # Were the first write lost (a crash), the cache comes back from the batches.
    checkpoint(tmp_path).write_text("")
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [E(0, 0), E(1, 2)]
    again.close()


def test_restart_with_an_unchanged_epoch_writes_nothing(tmp_path: Path, clock: FakeClock,
                                                        writes: list[list[EpochEntry]]) -> None:
    for data in (False, True):  # an empty partition that led, and one with data
        d = tmp_path / f"data-{data}"
        d.mkdir()
        lg = open_log(d, clock)
        lg.leader_epochs.assign(3, 0)  # became leader
        if data:
            append(lg, make_batch(2), leader_epoch=3)
        lg.close()
        writes.clear()
        again = open_log(d, clock)  # the entry at the log end offset (0) is cut, in memory only
        assert again.leader_epochs.entries() == ([E(3, 0)] if data else [])
        again.leader_epochs.assign(3, again.log_end_offset)  # leads again, same epoch
        append(again, make_batch(1), leader_epoch=3)
        assert writes == []
        assert read_leader_epochs(checkpoint(d)) == [E(3, 0)] == again.leader_epochs.entries()
        again.close()


def test_a_cut_deferred_at_open_is_written_before_data(tmp_path: Path, clock: FakeClock,
                                                       writes: list[list[EpochEntry]]) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 2, 2)  # epoch 2 at 0, log end 4
    lg.leader_epochs.assign(5, 4)  # led in epoch 5, wrote nothing
    lg.close()
    writes.clear()
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [E(2, 0)] and writes == []
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(2, 0), E(5, 4)]  # the next open cuts it again
    again.close()
    again = open_log(tmp_path, clock)
    follow(again, 2)  # more data of epoch 2 (no new epoch): the file must not claim epoch 5 for it
    assert writes == [[E(2, 0)]]
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(2, 0)]
    again.close()


def test_entries_past_the_recovered_log_end_are_dropped(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 1, 1, 4)
    lg.close()
    last = max((tmp_path / "t-0").glob("*.log"))
    last.write_bytes(last.read_bytes()[:-5])  # the epoch 4 batch was torn by a crash
    again = open_log(tmp_path, clock, recovery_point=0)
    assert again.log_end_offset == 4
    assert again.leader_epochs.entries() == [E(1, 0)]
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(1, 0), E(4, 4)]  # cut again by the next open ...
    follow(again, 1)
    assert read_leader_epochs(checkpoint(tmp_path)) == [E(1, 0)]  # ... or written before more data
    again.close()


def test_checkpoint_ahead_of_the_log_is_cut_on_open(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 1, 2)
    lg.close()
    write_leader_epochs(checkpoint(tmp_path), [E(1, 0), E(2, 2), E(3, 4), E(4, 9)])
    again = open_log(tmp_path, clock)
    assert again.leader_epochs.entries() == [E(1, 0), E(2, 2)]
    again.close()


def test_delete_removes_the_checkpoint_with_the_directory(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    follow(lg, 1)
    assert checkpoint(tmp_path).exists()
    lg.delete()
    assert not (tmp_path / "t-0").exists()
    assert list(tmp_path.iterdir()) == []
