"""samsa.storage.Log: append, read, roll, retention, truncation, timestamps (no network, no sleeps)."""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest
from crc32c import crc32c

from samsa.protocol.batch import HEADER_SIZE, BatchHeader, compute_crc, parse_header
from samsa.storage import (
    FileSlice,
    Log,
    LogConfig,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    RecordTooLarge,
    UnexpectedAppendOffset,
)

# ----------------------------------------------------------------------------- helpers


def _varint(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def make_batch(n: int = 1, *, ts: int = 1000, ts_step: int = 1, value_size: int = 10, base_offset: int = 0,
               attributes: int = 0) -> bytes:
    """A sealed uncompressed RecordBatch v2 of `n` records with timestamps ts, ts+step, ..."""
    records = bytearray()
    for i in range(n):
        body = b"\x00" + _varint(i * ts_step) + _varint(i) + _varint(-1) + _varint(value_size) + b"v" * value_size
        body += _varint(0)
        records += _varint(len(body)) + body
    max_ts = ts + (n - 1) * ts_step
    sealed = struct.pack(">hiqqqhii", attributes, n - 1, ts, max_ts, -1, -1, -1, n) + bytes(records)
    return struct.pack(">qiibI", base_offset, 9 + len(sealed), -1, 2, crc32c(sealed)) + sealed


def make_buf(batches: Sequence[bytes]) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    buf = bytearray(b"".join(batches))
    headers = []
    pos = 0
    for b in batches:
        headers.append((pos, parse_header(buf, pos)))
        pos += len(b)
    return buf, headers


def append(lg: Log, *batches: bytes, **kw: object):  # type: ignore[no-untyped-def]
    buf, headers = make_buf(batches)
    return lg.append(buf, headers, **kw)  # type: ignore[arg-type]


def batches_in(data: bytes) -> list[BatchHeader]:
    """Headers of the whole batches in `data` (a trailing partial batch is dropped, like clients)."""
    out = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        h = parse_header(data, pos)
        if pos + h.size > len(data):
            break
        assert compute_crc(data, pos, h.size) == h.crc
        out.append(h)
        pos += h.size
    return out


class FakeClock:
    def __init__(self, ms: int = 1_000_000) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


SMALL = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100, retention_ms=-1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_log(path: Path, clock: FakeClock, config: LogConfig = SMALL, **kw: object) -> Log:
    return Log.open(path / "t-0", config, clock=clock, **kw)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- append / read


def test_append_assigns_offsets_and_reads_back_at_every_offset(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    sizes = [1, 3, 1, 5, 2] * 20
    results = [append(lg, make_batch(n, ts=1000 + i)) for i, n in enumerate(sizes)]
    assert results[0].first_offset == 0 and results[0].last_offset == 0
    assert results[1].first_offset == 1 and results[1].last_offset == 3
    assert lg.log_end_offset == sum(sizes)
    assert results[-1].log_append_time_ms == -1
    starts = [r.first_offset for r in results]
    assert len(lg.active_segment.offset_index) > 10  # sparse but present (interval 100 bytes)
    for offset in range(lg.log_end_offset):
        sl = lg.read(offset, 1 << 20)
        assert isinstance(sl, FileSlice)
        got = batches_in(Log.read_bytes(sl))
        assert got[0].base_offset <= offset <= got[0].last_offset
        assert got[0].base_offset == sl.first_batch_offset
        assert got[0].base_offset in starts
        assert got[-1].next_offset == lg.log_end_offset  # to the end of the segment
    assert lg.read(lg.log_end_offset, 100) is None
    lg.close()


def test_read_out_of_range(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    append(lg, make_batch(2))
    with pytest.raises(OffsetOutOfRange):
        lg.read(3, 100)
    with pytest.raises(OffsetOutOfRange):
        lg.read(-1, 100)
    assert lg.read(2, 100) is None
    lg.delete_records_before(1)
    with pytest.raises(OffsetOutOfRange):
        lg.read(0, 100)
    assert lg.read(1, 1000) is not None
    lg.close()


def test_read_max_bytes_partial_tail_and_min_one_batch(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    batch = make_batch(3, value_size=50)
    for _ in range(5):
        append(lg, batch)
    size = len(batch)
    sl = lg.read(0, size * 2 + 10)
    assert sl is not None and sl.size == size * 2 + 10  # may end mid-batch
    assert [h.base_offset for h in batches_in(Log.read_bytes(sl))] == [0, 3]
    big = lg.read(4, 10)
    assert big is not None and big.size == size and big.first_batch_offset == 3  # first batch whole
    empty = lg.read(4, 10, min_one_batch=False)
    assert empty is not None and empty.size == 0
    zero = lg.read(0, 0)
    assert zero is not None and zero.size == 0
    lg.close()


def test_read_respects_max_offset(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    for _ in range(10):
        append(lg, make_batch(2))  # offsets 0..19, batches at even offsets
    sl = lg.read(0, 1 << 20, max_offset=6)
    assert sl is not None
    assert [h.base_offset for h in batches_in(Log.read_bytes(sl))] == [0, 2, 4]
    assert len(Log.read_bytes(sl)) == sl.size
    assert lg.read(6, 1 << 20, max_offset=6) is None
    assert lg.read(7, 1 << 20, max_offset=6) is None
    assert lg.read(4, 1 << 20, max_offset=5) is None  # max_offset falls inside the first batch
    whole = lg.read(0, 1 << 20, max_offset=100)
    assert whole is not None and batches_in(Log.read_bytes(whole))[-1].last_offset == 19
    lg.close()


def test_reads_never_span_segments_and_roll_by_size(tmp_path: Path, clock: FakeClock) -> None:
    batch = make_batch(4, value_size=100)
    cfg = SMALL.replace(segment_bytes=len(batch) * 3)
    lg = open_log(tmp_path, clock, cfg)
    for _ in range(10):
        append(lg, batch)
    assert [s.base_offset for s in lg.segments] == [0, 12, 24, 36]
    assert all(s.size <= cfg.segment_bytes for s in lg.segments)
    assert (lg.dir / "00000000000000000012.log").exists()
    sl = lg.read(5, 1 << 20)
    assert sl is not None
    assert [h.base_offset for h in batches_in(Log.read_bytes(sl))] == [4, 8]
    assert lg.size_in_bytes == 10 * len(batch)
    for offset in range(lg.log_end_offset):
        sl = lg.read(offset, 1 << 20)
        assert sl is not None
        hs = batches_in(Log.read_bytes(sl))
        assert hs[0].base_offset <= offset <= hs[0].last_offset
    with pytest.raises(RecordBatchTooLarge):
        append(lg, batch, batch, batch, batch)
    lg.close()


def test_roll_by_time_with_injected_clock(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(segment_ms=1000))
    append(lg, make_batch())
    clock.advance(999)
    append(lg, make_batch())
    assert len(lg.segments) == 1
    clock.advance(2)
    append(lg, make_batch())
    assert [s.base_offset for s in lg.segments] == [0, 2]
    clock.advance(5000)
    lg.roll()
    assert len(lg.segments) == 3
    lg.roll()  # active is empty: no new segment
    assert len(lg.segments) == 3
    lg.close()


def test_roll_when_index_full(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(index_interval_bytes=0, segment_index_bytes=24))
    for _ in range(8):
        append(lg, make_batch())
    assert len(lg.segments) > 1
    assert all(len(s.offset_index) <= 3 for s in lg.segments)
    for offset in range(8):
        sl = lg.read(offset, 1 << 20)
        assert sl is not None and sl.first_batch_offset == offset
    lg.close()


def test_log_append_time_and_leader_epoch(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    res = append(lg, make_batch(3, ts=5), make_batch(2, ts=7), now_ms=123456, log_append_time=True, leader_epoch=4)
    assert res == (0, 4, 123456, 123456, res.offset_of_max_timestamp)
    data = Log.read_bytes(lg.read(0, 1 << 20))  # type: ignore[arg-type]
    hs = batches_in(data)  # CRCs re-sealed and valid
    assert [h.max_timestamp for h in hs] == [123456, 123456]
    assert all(h.attributes & 0x08 for h in hs)
    assert [h.partition_leader_epoch for h in hs] == [4, 4]
    lg.close()


def test_append_as_follower(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock)
    buf, headers = make_buf([make_batch(2, base_offset=0), make_batch(3, base_offset=2)])
    res = lg.append_as_follower(buf, headers)
    assert (res.first_offset, res.last_offset) == (0, 4)
    with pytest.raises(UnexpectedAppendOffset):
        buf, headers = make_buf([make_batch(1, base_offset=4)])
        lg.append_as_follower(buf, headers)
    buf, headers = make_buf([make_batch(1, base_offset=5), make_batch(1, base_offset=3)])
    with pytest.raises(UnexpectedAppendOffset):
        lg.append_as_follower(buf, headers)
    assert lg.log_end_offset == 5
    lg.close()


def test_size_limits(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(max_message_bytes=200))
    with pytest.raises(RecordTooLarge):
        append(lg, make_batch(1, value_size=300))
    buf, headers = make_buf([make_batch(), make_batch()])
    with pytest.raises(ValueError):
        lg.append(buf + b"x", headers)
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    lg.close()


def test_flush_messages_advances_recovery_point(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(flush_messages=5))
    append(lg, make_batch(3))
    assert lg.recovery_point == 0
    append(lg, make_batch(3))
    assert lg.recovery_point == 6
    append(lg, make_batch(1))
    assert lg.unflushed_messages == 1
    lg.close()


def test_flush_ms_and_rolled_segments_via_maybe_flush(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(flush_ms=1000))
    append(lg, make_batch(2))
    assert not lg.maybe_flush(clock.ms + 10)
    assert lg.maybe_flush(clock.ms + 1000) and lg.recovery_point == 2
    lg.update_config(SMALL)  # flush.ms back to "never"
    append(lg, make_batch(2))
    lg.flush()
    lg.roll()  # flushed while active, then rolled: its index files are written but not fsynced
    append(lg, make_batch(2))
    assert not lg.segments[0].durable
    assert lg.maybe_flush(clock.ms) and lg.segments[0].durable and lg.recovery_point == 4
    lg.roll()
    append(lg, make_batch(2))
    assert lg.maybe_flush(clock.ms) and lg.recovery_point == 6  # up to the active segment
    assert all(s.durable for s in lg.segments[:-1])
    assert not lg.maybe_flush(clock.ms)
    lg.close()


def test_presync_names_exactly_the_segments_maybe_flush_would_sync(tmp_path: Path, clock: FakeClock,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduled flush syncs the segments' data in a worker thread first (presync_fds: their
    descriptors, duplicated), then runs maybe_flush on the loop: every fdatasync that one makes
    is of a descriptor the presync already synced, so the loop waits for no data."""
    from samsa.storage import log_manager, segment

    lg = open_log(tmp_path, clock, SMALL.replace(flush_ms=1000))
    append(lg, make_batch(2))
    assert lg.presync_fds(clock.ms + 10) == []  # flush.ms not over: nothing due
    lg.roll()
    append(lg, make_batch(2))
    fds = lg.presync_fds(clock.ms + 10)  # the rolled segment only (flush.ms not over)
    assert [os.fstat(fd).st_ino for fd in fds] == [os.stat(lg.segments[0].log_path).st_ino]
    presynced = {os.fstat(fd).st_ino for fd in fds}
    log_manager.sync_and_close(fds)
    with pytest.raises(OSError):
        os.fstat(fds[0])  # closed
    synced: list[int] = []
    real = segment._fdatasync
    monkeypatch.setattr(segment, "_fdatasync", lambda fd: (synced.append(os.fstat(fd).st_ino), real(fd)))
    assert lg.maybe_flush(clock.ms + 10) and lg.segments[0].durable and lg.recovery_point == 2
    assert set(synced) <= presynced and synced
    assert lg.presync_fds(clock.ms + 10) == []

    fds = lg.presync_fds(clock.ms + 1000)  # flush.ms over: the active segment too
    assert [os.fstat(fd).st_ino for fd in fds] == [os.stat(lg.segments[-1].log_path).st_ino]
    log_manager.sync_and_close(fds)
    assert lg.maybe_flush(clock.ms + 1000) and lg.recovery_point == 4
    assert lg.presync_fds(clock.ms + 2000) == []
    lg.close()


# ----------------------------------------------------------------------------- timestamps


def test_offset_for_timestamp(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=600))
    for i in range(20):
        append(lg, make_batch(5, ts=1000 + 100 * i, ts_step=10))  # record k of batch i: 1000+100i+10k
    assert len(lg.segments) > 3
    assert lg.offset_for_timestamp(0) == (0, 1000)
    assert lg.offset_for_timestamp(1000) == (0, 1000)
    assert lg.offset_for_timestamp(1001) == (1, 1010)
    assert lg.offset_for_timestamp(1041) == (5, 1100)
    assert lg.offset_for_timestamp(1000 + 100 * 13 + 25) == (13 * 5 + 3, 1000 + 100 * 13 + 30)
    assert lg.offset_for_timestamp(1000 + 100 * 19 + 40) == (99, 2940)
    assert lg.offset_for_timestamp(3000) is None
    # compressed (attribute bits 0-2): answered with the batch base offset and max timestamp
    append(lg, make_batch(5, ts=5000, attributes=1))
    assert lg.offset_for_timestamp(5002) == (100, 5004)
    lg.close()


# ----------------------------------------------------------------------------- retention


def test_a_record_from_2100_holds_time_retention_as_in_kafka(tmp_path: Path, clock: FakeClock) -> None:
    """Without the timestamp bounds (message.timestamp.after.max.ms at Long.MAX), retention is
    Kafka's: a segment goes when its largest timestamp is older than retention.ms, oldest
    first, so one record stamped 2100 holds its segment and every later one. (With the
    bounds, Kafka 4's default, the producer gets INVALID_TIMESTAMP instead:
    test_storage_validator.py.) Segments still roll: by their creation time, not by their
    records' timestamps, so a bad clock does not stop a segment from closing."""
    cfg = SMALL.replace(segment_bytes=1 << 20, segment_ms=1000, retention_ms=10_000, file_delete_delay_ms=0)
    lg = open_log(tmp_path, clock, cfg)
    now = clock.ms
    append(lg, make_batch(2, ts=4_102_444_800_000))  # the year 2100
    for _ in range(3):
        clock.advance(2000)  # past segment.ms: each append starts a segment, the 2100 one included
        append(lg, make_batch(2, ts=clock.ms))
    assert [s.base_offset for s in lg.segments] == [0, 2, 4, 6]
    assert lg.delete_old_segments(now + 1_000_000) == 0  # all held by the first segment
    assert lg.log_start_offset == 0
    lg.close()


def test_retention_by_time_rolls_expired_active_segment(tmp_path: Path, clock: FakeClock) -> None:
    cfg = SMALL.replace(segment_bytes=200, retention_ms=10_000, file_delete_delay_ms=0)
    lg = open_log(tmp_path, clock, cfg)
    now = clock.ms
    for i in range(6):
        append(lg, make_batch(2, ts=now + i))
    n_segments = len(lg.segments)
    assert n_segments > 2
    assert lg.delete_old_segments(now + 5000) == 0
    old_fd = lg.segments[0].fd
    assert lg.delete_old_segments(now + 20_000) == n_segments
    assert len(lg.segments) == 1 and lg.segments[0].size == 0
    assert lg.log_start_offset == lg.log_end_offset == 12
    assert lg.read(12, 100) is None
    with pytest.raises(OffsetOutOfRange):
        lg.read(11, 100)
    os.fstat(old_fd)  # still open until the next pass
    assert (lg.dir / "00000000000000000000.log.deleted").exists()
    lg.delete_old_segments(now + 20_001)
    with pytest.raises(OSError):
        os.fstat(old_fd)
    assert not list(lg.dir.glob("*.deleted"))
    assert append(lg, make_batch()).first_offset == 12
    lg.close()


def test_retention_by_time_respects_high_watermark(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=200, retention_ms=10))
    for _ in range(6):
        append(lg, make_batch(2, ts=1))
    bases = [s.base_offset for s in lg.segments]
    assert lg.delete_old_segments(clock.ms, high_watermark=bases[2]) == 2
    assert lg.log_start_offset == bases[2]
    lg.close()


def test_retention_by_bytes(tmp_path: Path, clock: FakeClock) -> None:
    batch = make_batch(2, ts=clock.ms)
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=len(batch) * 2, retention_bytes=len(batch) * 3))
    for _ in range(9):
        append(lg, batch)
    assert len(lg.segments) == 5
    assert lg.delete_old_segments(clock.ms) == 3  # 9 batches -> keep >= 3 batches' worth
    assert lg.size_in_bytes == len(batch) * 3
    assert lg.log_start_offset == lg.segments[0].base_offset == 12
    lg.update_config(lg.config.replace(retention_bytes=0))
    assert lg.delete_old_segments(clock.ms) == 1  # never the active segment
    assert len(lg.segments) == 1 and lg.log_end_offset == 18
    lg.close()


def test_delete_records_before_and_start_offset_retention(tmp_path: Path, clock: FakeClock) -> None:
    batch = make_batch(2)
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=len(batch) * 2))
    for _ in range(6):
        append(lg, batch)
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert lg.delete_records_before(5) == 5
    assert [s.base_offset for s in lg.segments] == [4, 8]
    with pytest.raises(OffsetOutOfRange):
        lg.read(4, 100)
    sl = lg.read(5, 1 << 20)
    assert sl is not None and sl.first_batch_offset == 4  # the batch holding offset 5
    assert lg.delete_records_before(12) == 12
    assert [s.base_offset for s in lg.segments] == [8]  # the active segment stays
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(13)
    lg.close()


def test_delete_records_that_cannot_write_its_checkpoint_changes_nothing(tmp_path: Path, clock: FakeClock,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader-epoch checkpoint is written before the log start offset moves: a disk-full
    failure leaves the log as it was, and the retry really deletes."""
    import samsa.storage.leader_epoch as leader_epoch

    batch = make_batch(2)
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=len(batch) * 2))
    for epoch in (1, 2, 3):
        lg.leader_epochs.assign(epoch, lg.log_end_offset)
        append(lg, batch, leader_epoch=epoch)
        append(lg, batch, leader_epoch=epoch)
    before = (lg.log_start_offset, lg.leader_epochs.entries(), [s.base_offset for s in lg.segments])

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    real = leader_epoch.write_leader_epochs
    monkeypatch.setattr(leader_epoch, "write_leader_epochs", full)
    with pytest.raises(OSError):
        lg.delete_records_before(6)
    assert (lg.log_start_offset, lg.leader_epochs.entries(), [s.base_offset for s in lg.segments]) == before
    monkeypatch.setattr(leader_epoch, "write_leader_epochs", real)
    assert lg.delete_records_before(6) == 6
    assert lg.log_start_offset == 6 and lg.leader_epochs.entries()[0] == (2, 6)
    assert [s.base_offset for s in lg.segments] == [4, 8]
    lg.close()


# ----------------------------------------------------------------------------- truncation


def test_truncate_to(tmp_path: Path, clock: FakeClock) -> None:
    batch = make_batch(2)
    lg = open_log(tmp_path, clock, SMALL.replace(segment_bytes=len(batch) * 2))
    for _ in range(6):
        append(lg, batch)
    assert lg.truncate_to(12) is False
    assert lg.truncate_to(9)  # mid-batch: the batch 8..9 goes whole
    assert lg.log_end_offset == 8
    assert [s.base_offset for s in lg.segments] == [0, 4, 8]
    assert lg.truncate_to(5)
    assert lg.log_end_offset == 4 and [s.base_offset for s in lg.segments] == [0, 4]
    assert append(lg, batch).first_offset == 4
    assert lg.truncate_to(2)
    assert lg.log_end_offset == 2 and [s.base_offset for s in lg.segments] == [0]
    sl = lg.read(0, 1 << 20)
    assert sl is not None and [h.base_offset for h in batches_in(Log.read_bytes(sl))] == [0]
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset) == (100, 100)
    assert append(lg, batch).first_offset == 100
    lg.close()


def test_truncate_keeps_indexes_consistent(tmp_path: Path, clock: FakeClock) -> None:
    lg = open_log(tmp_path, clock, SMALL.replace(index_interval_bytes=0))
    for i in range(50):
        append(lg, make_batch(1, ts=i))
    lg.truncate_to(30)
    seg = lg.active_segment
    assert all(o < 30 for o, _ in seg.offset_index.entries())
    assert all(o < 30 for _, o in seg.time_index.entries())
    assert seg.max_timestamp == 29
    for i in range(30, 40):
        append(lg, make_batch(1, ts=i))
    for offset in range(40):
        assert lg.read(offset, 1 << 20).first_batch_offset == offset  # type: ignore[union-attr]
    lg.close()
    reopened = open_log(tmp_path, clock, SMALL.replace(index_interval_bytes=0), clean_shutdown=True)
    assert reopened.log_end_offset == 40
    assert reopened.offset_for_timestamp(35) == (35, 35)
    reopened.close()


# ----------------------------------------------------------------------------- close / reopen


def test_clean_close_and_reopen(tmp_path: Path, clock: FakeClock) -> None:
    cfg = SMALL.replace(segment_bytes=2000)
    lg = open_log(tmp_path, clock, cfg)
    for i in range(40):
        append(lg, make_batch(2, ts=100 + i))
    lg.close()
    entries = [(s.offset_index.entries(), s.time_index.entries()) for s in lg.segments]
    assert entries[-1][1][-1] == (140, 79)  # close records the final max timestamp
    for seg_entries, seg in zip(entries, lg.segments, strict=True):
        assert seg.path(".index").stat().st_size == 8 * len(seg_entries[0])
        assert seg.path(".timeindex").stat().st_size == 12 * len(seg_entries[1])
    again = open_log(tmp_path, clock, cfg, recovery_point=80, clean_shutdown=True)
    assert again.log_end_offset == 80 and again.recovery_point == 80
    assert [(s.offset_index.entries(), s.time_index.entries()) for s in again.segments] == entries
    assert [s.max_timestamp for s in again.segments] == [e[1][-1][0] for e in entries]
    assert append(again, make_batch()).first_offset == 80
    again.close()


# ----------------------------------------------------------------------------- model check


@pytest.mark.parametrize("seed", range(int(os.environ.get("STORAGE_SEEDS", "4"))))  # more: STORAGE_SEEDS=300
def test_random_operations_match_a_model(tmp_path: Path, clock: FakeClock, seed: int) -> None:
    import random

    rng = random.Random(seed)
    cfg = SMALL.replace(segment_bytes=1600, index_interval_bytes=150, segment_index_bytes=48)
    lg = open_log(tmp_path, clock, cfg)
    model: list[bytes] = []  # stored batches, in order, with offsets assigned

    def check() -> None:
        leo = parse_header(model[-1]).next_offset if model else lg.log_end_offset
        assert lg.log_end_offset == leo
        for _ in range(15):
            if lg.log_start_offset >= leo:
                break
            offset = rng.randrange(lg.log_start_offset, leo)
            sl = lg.read(offset, rng.choice([1, 200, 1 << 20]))
            assert sl is not None
            want = next(b for b in model if parse_header(b).last_offset >= offset)
            got = Log.read_bytes(sl)
            assert got[: len(want)] == want or (len(got) < len(want) and want.startswith(got))

    for _ in range(60):
        op = rng.random()
        if op < 0.6:
            batches = [make_batch(rng.randint(1, 4), ts=clock.ms, value_size=rng.randint(1, 120))
                       for _ in range(rng.randint(1, 3))]
            buf, headers = make_buf(batches)
            lg.append(buf, headers)
            for pos, h in headers:
                model.append(bytes(buf[pos : pos + h.size]))
        elif op < 0.7 and model:
            target = rng.randrange(parse_header(model[0]).base_offset, lg.log_end_offset + 1)
            lg.truncate_to(target)
            model = [b for b in model if parse_header(b).last_offset < target]
        elif op < 0.8:
            lg.roll()
        elif op < 0.85:
            lg.close()
            lg = open_log(tmp_path, clock, cfg, recovery_point=lg.recovery_point, log_start_offset=lg.log_start_offset,
                          clean_shutdown=rng.random() < 0.5)
        elif op < 0.9:  # crash: fds vanish, indexes unwritten, maybe the last batch half on disk
            active = lg.active_segment
            for seg in lg.segments:
                seg.close()
            if model and active.size and rng.random() < 0.5:
                os.truncate(active.log_path, active.size - rng.randint(1, len(model[-1])))
                model.pop()
            lg = open_log(tmp_path, clock, cfg, recovery_point=lg.recovery_point, log_start_offset=lg.log_start_offset)
            if model and lg.log_start_offset >= parse_header(model[-1]).next_offset:
                model = []  # the start offset was past the lost tail: the log restarts empty there
        elif model:
            lg.delete_records_before(rng.randint(lg.log_start_offset, lg.log_end_offset))
            lg.delete_old_segments(clock.ms)
            model = [b for b in model if parse_header(b).base_offset >= lg.segments[0].base_offset]
        clock.advance(10)
        if model or lg.log_end_offset == lg.log_start_offset:
            check()
    lg.close()
