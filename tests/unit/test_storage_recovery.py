"""samsa.storage recovery after unclean stops, index rebuilds, and LogManager restarts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.storage import InconsistentMetadata, Log, LogConfig, LogManager, parse_topic_partition
from samsa.storage import loader as loader_module
from samsa.storage.checkpoints import read_offsets
from tests.unit.test_storage_log import SMALL, FakeClock, append, batches_in, make_batch

BATCH = make_batch(3, value_size=40)
CFG = SMALL.replace(segment_bytes=len(BATCH) * 10, index_interval_bytes=len(BATCH) * 2)


def write_log(path: Path, clock: FakeClock, n: int = 25) -> tuple[Log, list[int]]:
    """A log of n batches of 3 records over 3 segments; closed without flush (an unclean stop)."""
    lg = Log.open(path, CFG, clock=clock)
    for i in range(n):
        append(lg, make_batch(3, ts=1000 + i, value_size=40))
    bases = [s.base_offset for s in lg.segments]
    lg.close()
    return lg, bases


def reopen(path: Path, clock: FakeClock, **kw: object) -> Log:
    return Log.open(path, CFG, clock=clock, **kw)  # type: ignore[arg-type]


def check_readable(lg: Log) -> None:
    for offset in range(lg.log_start_offset, lg.log_end_offset):
        sl = lg.read(offset, 1 << 20)
        assert sl is not None
        first = batches_in(Log.read_bytes(sl))[0]
        assert first.base_offset <= offset <= first.last_offset


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def last_log_file(path: Path) -> Path:
    return max(path.glob("*.log"))


def test_torn_tail_truncated_mid_batch(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    tail = last_log_file(path)
    size = tail.stat().st_size
    os.truncate(tail, size - 7)
    lg = reopen(path, clock, recovery_point=bases[-1])
    assert lg.log_end_offset == 72  # the 25th batch (72..74) was torn
    assert lg.active_segment.size == size - len(BATCH)
    check_readable(lg)
    assert append(lg, make_batch(2)).first_offset == 72
    lg.close()
    again = reopen(path, clock, clean_shutdown=True)
    assert again.log_end_offset == 74
    again.close()


def test_garbage_after_last_batch(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    write_log(path, clock)
    with open(last_log_file(path), "ab") as f:
        f.write(os.urandom(300))
    lg = reopen(path, clock)
    assert lg.log_end_offset == 75
    check_readable(lg)
    lg.close()


def test_zeroed_tail(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    write_log(path, clock)
    with open(last_log_file(path), "ab") as f:
        f.write(bytes(4096))  # a preallocated or half-written page
    lg = reopen(path, clock)
    assert lg.log_end_offset == 75
    lg.close()


def test_flipped_crc_byte_truncates_there_and_drops_later_segments(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    assert len(bases) == 3
    middle = path / "00000000000000000030.log"
    with open(middle, "r+b") as f:
        f.seek(len(BATCH) * 4 + 70)  # inside the 5th batch's records (offsets 42..44)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    lg = reopen(path, clock, recovery_point=bases[1])
    assert lg.log_end_offset == 42
    assert [s.base_offset for s in lg.segments] == [0, 30]
    assert not (path / "00000000000000000060.log").exists()
    check_readable(lg)
    assert lg.offset_for_timestamp(1013) == (35, 1013)  # batch 11 holds 1011..1013
    assert append(lg, make_batch()).first_offset == 42
    lg.close()


def test_only_segments_from_the_recovery_point_are_rescanned(tmp_path: Path, clock: FakeClock,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t-0"
    write_log(path, clock)
    scanned: list[int] = []
    real = loader_module.recover_segment

    def spy(seg):  # type: ignore[no-untyped-def]
        scanned.append(seg.base_offset)
        return real(seg)

    monkeypatch.setattr(loader_module, "recover_segment", spy)
    reopen(path, clock, recovery_point=45).close()
    assert scanned == [30, 60]  # the segment holding the recovery point onward
    scanned.clear()
    reopen(path, clock, recovery_point=45, clean_shutdown=True).close()
    assert scanned == []


def test_missing_and_corrupt_indexes_rebuilt(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    lg, _ = write_log(path, clock)
    expected = [(s.offset_index.entries(), s.time_index.entries()) for s in lg.segments]
    assert all(e[0] for e in expected)
    (path / "00000000000000000000.index").unlink()
    (path / "00000000000000000030.timeindex").write_bytes(b"\x01" * 7)
    (path / "00000000000000000060.index").write_bytes(b"\x00\x00\x00\x01\x7f\x00\x00\x00")  # position past EOF
    again = reopen(path, clock, recovery_point=75, clean_shutdown=True)
    rebuilt = [(s.offset_index.entries(), s.time_index.entries()) for s in again.segments]
    assert rebuilt[:2] == expected[:2]
    # the active segment's final time entry is written again at close; until then it is in memory
    assert rebuilt[2][0] == expected[2][0] and rebuilt[2][1] == expected[2][1][:-1]
    assert again.active_segment.max_timestamp == expected[2][1][-1][0]
    assert again.log_end_offset == 75
    check_readable(again)
    again.close()
    assert (path / "00000000000000000000.index").stat().st_size == 8 * len(expected[0][0])


def test_leftover_files_removed(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    write_log(path, clock)
    for name in ("00000000000000000005.log.deleted", "00000000000000000005.index.deleted",
                 "00000000000000000000.log.cleaned", "00000000000000000000.log.swap",
                 "00000000000000000099.index", "00000000000000000099.timeindex"):
        (path / name).write_bytes(b"junk")
    (path / "leader-epoch-checkpoint").write_text("0\n0\n")
    lg = reopen(path, clock, clean_shutdown=True)
    names = sorted(p.name for p in path.iterdir())
    assert names == sorted([f"{b:020d}{s}" for b in (0, 30, 60) for s in (".log", ".index", ".timeindex")]
                           + ["leader-epoch-checkpoint"])
    assert lg.log_end_offset == 75
    lg.close()


def test_log_start_offset_from_checkpoint(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    write_log(path, clock)
    lg = reopen(path, clock, log_start_offset=40, clean_shutdown=True)
    assert lg.log_start_offset == 40
    lg.close()
    lg = reopen(path, clock, log_start_offset=500, clean_shutdown=True)  # past the end: start empty there
    assert (lg.log_start_offset, lg.log_end_offset) == (500, 500)
    assert [s.base_offset for s in lg.segments] == [500]
    lg.close()


# ----------------------------------------------------------------------------- LogManager


def make_manager(tmp_path: Path, clock: FakeClock, **kw: object) -> LogManager:
    return LogManager([tmp_path / "d1", tmp_path / "d2"], CFG, clock, **kw)  # type: ignore[arg-type]


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("my-topic.v2-13") == ("my-topic.v2", 13)
    assert parse_topic_partition("__consumer_offsets-49") == ("__consumer_offsets", 49)
    for bad in ("topic", "topic-", "-3", "t-1.abc-delete", "bad name-1", "t-x"):
        assert parse_topic_partition(bad) is None


def test_manager_meta_properties(tmp_path: Path, clock: FakeClock) -> None:
    m = make_manager(tmp_path, clock, broker_id=3, cluster_id="abc")
    m.startup()
    text = (tmp_path / "d1" / "meta.properties").read_text()
    assert "version=0" in text and "broker.id=3" in text and "cluster.id=abc" in text
    m.shutdown()
    other = make_manager(tmp_path, clock, broker_id=4)
    with pytest.raises(InconsistentMetadata, match=r"broker\.id"):
        other.startup()
    same = make_manager(tmp_path, clock)
    same.startup()
    assert (same.broker_id, same.cluster_id) == (3, "abc")
    same.shutdown()


def test_manager_restart_clean_and_unclean(tmp_path: Path, clock: FakeClock) -> None:
    m = make_manager(tmp_path, clock, broker_id=1)
    m.startup()
    topics = [("a-b.c", 0), ("a-b.c", 1), ("x", 0)]
    for t, p in topics:
        lg = m.get_or_create_log(t, p)
        for _ in range(4):
            append(lg, BATCH)
    assert m.get_or_create_log("x", 0) is m.get_log(("x", 0))
    assert {lg.dir.parent.name for lg in m.logs().values()} == {"d1", "d2"}
    (tmp_path / "d1" / "not a partition").mkdir()
    (tmp_path / "d1" / "old-0.1234abcd-delete").mkdir()
    with pytest.raises(ValueError):
        m.get_or_create_log("../evil", 0)
    m.shutdown()
    assert (tmp_path / "d1" / ".kafka_cleanshutdown").exists()
    points = {**read_offsets(tmp_path / "d1" / "recovery-point-offset-checkpoint"),
              **read_offsets(tmp_path / "d2" / "recovery-point-offset-checkpoint")}
    assert points == {tp: 12 for tp in topics}

    m = make_manager(tmp_path, clock, broker_id=1)
    m.startup()
    assert not (tmp_path / "d1" / ".kafka_cleanshutdown").exists()
    assert not (tmp_path / "d1" / "old-0.1234abcd-delete").exists()
    assert sorted(m.logs()) == sorted(topics)
    assert all(lg.log_end_offset == 12 for lg in m.logs().values())
    lg = m.get_log(("a-b.c", 1))
    assert lg is not None
    append(lg, BATCH)
    tail = last_log_file(lg.dir)
    m.checkpoint()
    # crash: no shutdown, the last batch half written
    os.truncate(tail, tail.stat().st_size - 10)
    m = make_manager(tmp_path, clock, broker_id=1)
    m.startup()
    assert m.get_log(("a-b.c", 1)).log_end_offset == 12  # type: ignore[union-attr]
    assert m.get_log(("x", 0)).log_end_offset == 12  # type: ignore[union-attr]
    fd = m.get_log(("x", 0)).segments[0].fd  # type: ignore[union-attr]
    assert m.delete_log("x", 0) and m.get_log(("x", 0)) is None
    assert not any(p.name.startswith("x-0") for d in ("d1", "d2") for p in (tmp_path / d).iterdir())
    os.fstat(fd)  # a queued sendfile may still use it
    m.cleanup(clock.ms + CFG.file_delete_delay_ms)
    with pytest.raises(OSError):
        os.fstat(fd)
    m.shutdown()


def test_manager_cleanup_and_flush_due(tmp_path: Path, clock: FakeClock) -> None:
    m = LogManager([tmp_path], CFG.replace(retention_ms=1000, flush_ms=500), clock)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for _ in range(25):
        append(lg, make_batch(3, ts=clock.ms, value_size=40))
    assert m.flush_due(clock.ms) == 0 or lg.recovery_point == lg.active_segment.base_offset
    assert m.flush_due(clock.ms + 500) == 1 and lg.recovery_point == 75
    assert m.cleanup(clock.ms + 500) == 0
    assert m.cleanup(clock.ms + 2000) == 3
    assert lg.log_start_offset == lg.log_end_offset == 75
    m.shutdown()


def test_corrupt_checkpoint_means_full_recovery(tmp_path: Path, clock: FakeClock) -> None:
    m = LogManager([tmp_path], CFG, clock)
    m.startup()
    append(m.get_or_create_log("t", 0), BATCH)
    m.shutdown()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    (tmp_path / ".kafka_cleanshutdown").unlink()
    m = LogManager([tmp_path], LogConfig(), clock)
    m.startup()
    assert m.get_log(("t", 0)).log_end_offset == 3  # type: ignore[union-attr]
    m.shutdown()


def test_crash_without_close_rebuilds_unwritten_indexes(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "t-0"
    lg = Log.open(path, CFG.replace(index_interval_bytes=0), clock=clock)
    for i in range(25):
        append(lg, make_batch(3, ts=1000 + i, value_size=40))
    lg.flush(30)
    for seg in lg.segments:  # the process dies: fds go away, nothing else is written
        seg.close()
    assert (path / "00000000000000000060.index").stat().st_size == 0
    again = Log.open(path, CFG.replace(index_interval_bytes=0), clock=clock, recovery_point=lg.recovery_point)
    assert again.log_end_offset == 75 and again.recovery_point == 30
    assert len(again.active_segment.offset_index) == 4  # one entry per batch after the first
    check_readable(again)
    assert again.offset_for_timestamp(1023) == (65, 1023)  # batch 21: offsets 63..65, ts 1021..1023
    again.close()


def test_deleted_files_are_released_after_file_delete_delay_ms_without_a_retention_pass(
        tmp_path: Path, clock: FakeClock) -> None:
    """Segments removed by retention, and whole deleted logs, keep their fds for
    file.delete.delay.ms (a sendfile may still use them), then `release_due` (the broker's
    one-second timer) closes and unlinks them; before, only the next retention pass did,
    log.retention.check.interval.ms (5 minutes) later."""
    m = LogManager([tmp_path], CFG.replace(retention_ms=1000, file_delete_delay_ms=60_000), clock)
    m.startup()
    lg = m.get_or_create_log("t", 0)
    for _ in range(25):
        append(lg, make_batch(3, ts=clock.ms, value_size=40))
    assert m.cleanup(clock.ms + 2000) == 3
    deleted = sorted((tmp_path / "t-0").glob("*.deleted"))
    assert deleted
    m.release_due(clock.ms + 2000 + 59_000)
    assert all(p.exists() for p in deleted)  # not yet
    m.release_due(clock.ms + 2000 + 60_000)
    assert not any(p.exists() for p in deleted)
    other = m.get_or_create_log("u", 0)
    append(other, BATCH)
    fd = other.segments[0].fd
    assert m.delete_log("u", 0)
    m.release_due(clock.ms + 60_000)
    with pytest.raises(OSError):
        os.fstat(fd)
    m.shutdown()
