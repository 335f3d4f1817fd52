"""One contract for every storage engine behind `PartitionLog` (samsa/storage/partition_log.py).

Each test runs on every engine: the on-disk `Log` (in tmp_path), the `NullLog` as the null
engine benchmarks use it (only the last append's bytes kept), and a `NullLog` that retains
everything (so its answers must equal the Log's wherever it keeps the data).

Where the null engine by design cannot answer as `Log` does, the test does not skip: the
engine declares a capability (`Engine.reads_all`, `exact_timestamps`, `knows_old_boundaries`)
and the contract states what an engine without it must answer instead -- never data that was
not appended at those offsets, never a batch ending before the offset asked for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.protocol import compression
from samsa.protocol.batch import BatchHeader
from samsa.protocol.messages import encode_response
from samsa.protocol.records import build_batch, scan_batches
from samsa.protocol.schema import Out
from samsa.storage import (
    Log,
    LogConfig,
    LogManager,
    OffsetOutOfRange,
    PartitionLog,
    RecordBatchTooLarge,
    RecordTooLarge,
    StorageError,
    UnexpectedAppendOffset,
)
from samsa.storage.null_log import NullLog
from samsa.storage.partition_log import FileSlice, LogFactory, LogSlice, MemorySlice

NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=64)


@dataclass(frozen=True)
class Engine:
    name: str
    make: Callable[[Path, LogConfig], PartitionLog]
    reads_all: bool  # every offset in [start, end) reads back the batch holding it
    exact_timestamps: bool  # offset_for_timestamp finds the record, not only the batch, where it can
    knows_old_boundaries: bool  # truncation anywhere cuts at the start of the batch holding the offset


def _clock() -> float:
    return NOW_MS / 1000


ENGINES = [
    Engine("log", lambda d, c: Log.open(d, c, clock=_clock), True, True, True),
    Engine("null", lambda d, c: NullLog.open(d, c, clock=_clock), False, False, False),
    Engine("null-retaining", lambda d, c: NullLog.open(d, c, clock=_clock, retain_bytes=1 << 30), True, False, True),
]


@pytest.fixture(params=ENGINES, ids=[e.name for e in ENGINES])
def engine(request: pytest.FixtureRequest) -> Engine:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def lg(engine: Engine, tmp_path: Path) -> Iterator[PartitionLog]:
    log = engine.make(tmp_path / "topic-0", CONFIG)
    yield log
    log.close()


# ----------------------------------------------------------------------------- helpers


def batch(n: int, *, ts: int = NOW_MS, codec: int = compression.NONE, epoch: int = -1, base_offset: int = 0,
          value: bytes = b"v" * 20) -> bytes:
    return build_batch([(b"k%d" % i, value, [], ts + i) for i in range(n)], compression=codec,
                       partition_leader_epoch=epoch, base_offset=base_offset)


def buf_of(*batches: bytes) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    buf = bytearray(b"".join(batches))
    return buf, scan_batches(buf, verify_crc=False)


def append(lg: PartitionLog, *batches: bytes, **kw: object) -> tuple[int, int, bytes]:
    """Leader-append `batches` as one buffer; (first offset, last offset, the bytes as stored)."""
    buf, headers = buf_of(*batches)
    r = lg.append(buf, headers, now_ms=NOW_MS, **kw)  # type: ignore[arg-type]
    return r.first_offset, r.last_offset, bytes(buf)


def batches_in(data: bytes) -> list[BatchHeader]:
    return [h for _, h in scan_batches(data, verify_crc=True, allow_partial_tail=True)]


def read(lg: PartitionLog, offset: int, max_bytes: int = 1 << 20, **kw: object) -> bytes | None:
    sl = lg.read(offset, max_bytes, **kw)  # type: ignore[arg-type]
    return None if sl is None else lg.read_bytes(sl)


# ----------------------------------------------------------------------------- the interface


def test_both_engines_have_every_protocol_member_with_its_signature() -> None:
    members = [m for m in vars(PartitionLog) if not m.startswith("_")] + list(PartitionLog.__annotations__)
    for cls in (Log, NullLog):
        for m in members:
            assert hasattr(cls, m) or m in ("config", "dir", "leader_epochs", "producers"), f"{cls.__name__} lacks {m}"
            proto = getattr(PartitionLog, m, None)
            if inspect.isfunction(proto):
                want = [p for p in inspect.signature(proto).parameters.values() if p.name != "self"]
                impl = getattr(cls, m)
                got = [p for p in inspect.signature(impl).parameters.values() if p.name != "self"]
                assert [(p.name, p.kind, p.default) for p in got] == [(p.name, p.kind, p.default) for p in want], \
                    f"{cls.__name__}.{m}"


def test_both_engines_open_as_a_log_factory() -> None:
    want = [(p.name, p.kind) for p in inspect.signature(LogFactory.__call__).parameters.values() if p.name != "self"]
    for opener in (Log.open, NullLog.open):
        got = [(p.name, p.kind) for p in inspect.signature(opener).parameters.values()]
        assert got[: len(want)] == want, opener


def test_a_new_log_is_empty(lg: PartitionLog) -> None:
    assert isinstance(lg, PartitionLog)
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (0, 0, 0)
    assert lg.read(0, 1000) is None
    with pytest.raises(OffsetOutOfRange):
        lg.read(1, 1000)
    assert lg.offset_for_max_timestamp() is None and lg.offset_for_timestamp(0) is None
    assert list(lg.tail_batch_headers(1 << 20)) == []
    assert lg.leader_epochs.latest_epoch() is None and lg.segment_count >= 1


# ----------------------------------------------------------------------------- append


def test_append_assigns_offsets_from_the_log_end_and_rewrites_base_offsets(lg: PartitionLog) -> None:
    assert append(lg, batch(3))[:2] == (0, 2)
    first, last, stored = append(lg, batch(2), batch(5))
    assert (first, last) == (3, 9) and lg.log_end_offset == 10
    assert [(h.base_offset, h.last_offset) for h in batches_in(stored)] == [(3, 4), (5, 9)]
    assert lg.log_start_offset == 0


def test_append_result_reports_timestamps_and_log_append_time(lg: PartitionLog) -> None:
    buf, headers = buf_of(batch(2, ts=5000), batch(3, ts=9000), batch(1, ts=7000))
    r = lg.append(buf, headers, now_ms=NOW_MS)
    assert (r.log_append_time_ms, r.max_timestamp, r.offset_of_max_timestamp) == (-1, 9002, 4)
    buf, headers = buf_of(batch(2, ts=5000))
    r = lg.append(buf, headers, now_ms=NOW_MS + 7, log_append_time=True)
    assert (r.log_append_time_ms, r.max_timestamp, r.offset_of_max_timestamp) == (NOW_MS + 7, NOW_MS + 7, 7)
    (h,) = batches_in(bytes(buf))  # stamped, CRC re-sealed (batches_in verifies it)
    assert h.max_timestamp == NOW_MS + 7 and h.attributes & 0x08
    assert lg.offset_for_max_timestamp() == (7, NOW_MS + 7)


def test_size_limits(engine: Engine, tmp_path: Path) -> None:
    lg = engine.make(tmp_path / "small-0", LogConfig(segment_bytes=2048, max_message_bytes=600))
    big = batch(30)
    assert 600 < len(big) < 2048
    buf, headers = buf_of(big)
    with pytest.raises(RecordTooLarge):
        lg.append(buf, headers)
    lg.append_as_follower(buf, headers)  # a follower takes what its leader took
    assert lg.log_end_offset == 30
    huge = [batch(20, base_offset=30 + 20 * i) for i in range(6)]
    buf, headers = buf_of(*huge)
    with pytest.raises(RecordBatchTooLarge):
        lg.append_as_follower(buf, headers)
    assert lg.log_end_offset == 30
    lg.update_config(LogConfig(segment_bytes=2048, max_message_bytes=4096))
    buf, headers = buf_of(big)
    assert lg.append(buf, headers).first_offset == 30


def test_follower_append_keeps_offsets_and_never_goes_back(lg: PartitionLog) -> None:
    buf, headers = buf_of(batch(3, base_offset=0), batch(2, base_offset=3))
    r = lg.append_as_follower(buf, headers)
    assert (r.first_offset, r.last_offset, lg.log_end_offset) == (0, 4, 5)
    assert read(lg, 0) == bytes(buf)
    back, back_headers = buf_of(batch(2, base_offset=4))
    with pytest.raises(UnexpectedAppendOffset):
        lg.append_as_follower(back, back_headers)
    # A gap (the leader's cleaner removed batches 5..7) is taken as it is: offsets never move.
    gap, gap_headers = buf_of(batch(2, base_offset=8))
    r = lg.append_as_follower(gap, gap_headers)
    assert (r.first_offset, r.last_offset, lg.log_end_offset) == (8, 9, 10)


# ----------------------------------------------------------------------------- read


def test_read_returns_the_last_append_as_written(lg: PartitionLog) -> None:
    append(lg, batch(4))
    _, _, stored = append(lg, batch(2), batch(3))
    assert read(lg, 4) == stored
    assert read(lg, 6) == stored[len(batch(2)):]  # from the batch holding offset 6
    assert read(lg, 8) == stored[len(batch(2)):]  # (a batch is never split at its start)
    assert lg.read(9, 1000) is None  # the log end offset: nothing yet
    with pytest.raises(OffsetOutOfRange):
        lg.read(10, 1000)


def test_read_slices_carry_size_and_first_batch_offset(lg: PartitionLog) -> None:
    append(lg, batch(2), batch(3))
    sl = lg.read(3, 1 << 20)
    assert isinstance(sl, (FileSlice, MemorySlice))
    data = lg.read_bytes(sl)
    assert sl.size == len(data) and sl.first_batch_offset == 2 == batches_in(data)[0].base_offset


def test_read_limits_max_offset_max_bytes_and_min_one_batch(lg: PartitionLog) -> None:
    b1, b2, b3 = batch(2), batch(3), batch(4)
    _, _, stored = append(lg, b1, b2, b3)
    assert read(lg, 0, max_offset=5) == stored[: len(b1) + len(b2)]  # stops before the batch holding 5
    assert read(lg, 0, max_offset=4) == stored[: len(b1)]  # 4 is inside b2: b2 is not returned
    assert lg.read(2, 1000, max_offset=2) is None and lg.read(2, 1000, max_offset=4) is None
    assert read(lg, 0, len(b1) + 10) == stored[: len(b1) + 10]  # cut mid-batch (clients drop it)
    assert read(lg, 0, 10) == stored[: len(b1)]  # smaller than the first batch: it comes whole
    sl = lg.read(0, 10, min_one_batch=False)
    assert sl is not None and sl.size == 0
    with pytest.raises(ValueError):
        lg.read(0, -1)


def test_read_of_older_offsets(engine: Engine, lg: PartitionLog) -> None:
    """Engines that read all data return the batch holding the offset. Without that capability
    the answer is None or starts at a later batch -- and it is still exactly what was appended
    from that batch on, never a batch ending before the offset asked for."""
    written = bytearray()
    position_of: dict[int, int] = {}  # base offset -> position in `written`
    for n in (3, 1, 4, 2):
        _, _, stored = append(lg, batch(n, value=b"%d" % n * 10))
        for pos, h in scan_batches(stored, verify_crc=False):
            position_of[h.base_offset] = len(written) + pos
        written += stored
    for offset in range(lg.log_end_offset):
        data = read(lg, offset)
        if engine.reads_all:
            assert data is not None
            h = batches_in(data)[0]
            assert h.base_offset <= offset <= h.last_offset
        if data is not None:
            h = batches_in(data)[0]
            assert h.last_offset >= offset
            start = position_of[h.base_offset]
            assert data == written[start : start + len(data)]


# ----------------------------------------------------------------------------- log start offset


def test_delete_records_before_moves_the_log_start_offset(engine: Engine, lg: PartitionLog) -> None:
    append(lg, batch(3), leader_epoch=1)
    append(lg, batch(3), leader_epoch=2)
    assert lg.delete_records_before(4) == 4 == lg.log_start_offset
    assert lg.delete_records_before(2) == 4  # never back
    assert [(e.epoch, e.start_offset) for e in lg.leader_epochs.entries()] == [(2, 4)]
    with pytest.raises(OffsetOutOfRange):
        lg.read(3, 1000)
    data = read(lg, 4)
    assert data is not None and batches_in(data)[0].base_offset == 3  # the batch holding 4
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(7)
    assert lg.delete_records_before(6) == 6
    assert lg.read(6, 1000) is None
    assert append(lg, batch(1))[0] == 6 and lg.log_start_offset == 6


# ----------------------------------------------------------------------------- truncation


def test_truncate_to_a_batch_boundary_and_append_again(lg: PartitionLog) -> None:
    append(lg, batch(3))
    append(lg, batch(2), batch(4))
    assert not lg.truncate_to(9) and not lg.truncate_to(100)
    assert lg.truncate_to(5) and lg.log_end_offset == 5
    assert lg.read(5, 1000) is None
    first, _, stored = append(lg, batch(2))
    assert first == 5 and read(lg, 5) == stored
    with pytest.raises(ValueError):
        lg.truncate_to(-1)


def test_truncate_inside_a_batch_removes_the_whole_batch(engine: Engine, lg: PartitionLog) -> None:
    append(lg, batch(4))  # 0..3
    append(lg, batch(3), batch(3))  # 4..6, 7..9
    assert lg.truncate_to(8) and lg.log_end_offset == 7  # in the last append: every engine knows its batches
    assert lg.truncate_to(2)  # inside the first append, which the null engine no longer holds
    assert lg.log_end_offset == (0 if engine.knows_old_boundaries else 2)
    assert lg.log_start_offset == 0
    assert append(lg, batch(1))[0] == lg.log_end_offset - 1


def test_truncate_below_the_log_start_offset(lg: PartitionLog) -> None:
    append(lg, batch(5))
    lg.delete_records_before(3)
    assert lg.truncate_to(2)
    assert lg.log_start_offset == lg.log_end_offset <= 2


def test_truncate_fully_and_start_at(lg: PartitionLog) -> None:
    append(lg, batch(5), leader_epoch=3)
    lg.truncate_fully_and_start_at(100)
    assert (lg.log_start_offset, lg.log_end_offset) == (100, 100)
    assert lg.leader_epochs.entries() == [] and lg.read(100, 1000) is None
    assert lg.offset_for_max_timestamp() is None
    first, _, stored = append(lg, batch(2), leader_epoch=4)
    assert first == 100 and read(lg, 101) == stored
    assert [(e.epoch, e.start_offset) for e in lg.leader_epochs.entries()] == [(4, 100)]


# ----------------------------------------------------------------------------- leader epochs


def test_leader_epochs_follow_appends_truncation_and_follower_batches(lg: PartitionLog) -> None:
    epochs = lg.leader_epochs
    append(lg, batch(3), leader_epoch=1)
    append(lg, batch(2), leader_epoch=1)
    _, _, stored = append(lg, batch(4), leader_epoch=3)
    assert [(e.epoch, e.start_offset) for e in epochs.entries()] == [(1, 0), (3, 5)]
    assert batches_in(stored)[0].partition_leader_epoch == 3
    assert epochs.end_offset_for(1, lg.log_end_offset) == (1, 5)
    assert epochs.end_offset_for(3, lg.log_end_offset) == (3, 9)
    assert lg.truncate_to(5)
    assert [(e.epoch, e.start_offset) for e in epochs.entries()] == [(1, 0)]
    buf, headers = buf_of(batch(2, base_offset=5, epoch=4), batch(1, base_offset=7, epoch=4),
                          batch(2, base_offset=8, epoch=6))
    lg.append_as_follower(buf, headers)
    assert [(e.epoch, e.start_offset) for e in epochs.entries()] == [(1, 0), (4, 5), (6, 8)]
    assert epochs.latest_epoch() == 6 and lg.log_end_offset == 10


def test_a_leader_assigns_its_epoch_at_the_log_end(lg: PartitionLog) -> None:
    append(lg, batch(3))
    lg.leader_epochs.assign(7, lg.log_end_offset)  # what Partition does on becoming leader
    append(lg, batch(1), leader_epoch=7)
    assert [(e.epoch, e.start_offset) for e in lg.leader_epochs.entries()] == [(7, 3)]


# ----------------------------------------------------------------------------- timestamps


def test_offset_for_max_timestamp(lg: PartitionLog) -> None:
    append(lg, batch(3, ts=1000))
    append(lg, batch(2, ts=9000))  # offsets 3..4, max 9001
    append(lg, batch(2, ts=5000))
    assert lg.offset_for_max_timestamp() == (4, 9001)
    lg.truncate_to(3)
    found = lg.offset_for_max_timestamp()
    assert found is None or found[0] < 3  # never an offset that is gone


def test_offset_for_timestamp(engine: Engine, lg: PartitionLog) -> None:
    append(lg, batch(3, ts=1000))  # uncompressed: record timestamps 1000..1002 at offsets 0..2
    append(lg, batch(3, ts=2000, codec=compression.GZIP))  # offsets 3..5
    append(lg, batch(3, ts=3000, codec=compression.GZIP))  # offsets 6..8
    # A compressed batch in the last append: every engine answers its base offset and max timestamp.
    assert lg.offset_for_timestamp(2500) == (6, 3002)
    assert lg.offset_for_timestamp(5000) is None
    found = lg.offset_for_timestamp(1001)
    if engine.exact_timestamps:  # the record, in an uncompressed CreateTime batch
        assert found == (1, 1001)
    elif engine.reads_all:  # the batch holding that record: its base offset and max timestamp
        assert found == (0, 1002)
    else:  # the first batch it still holds with a max timestamp at or after the target
        assert found in [(0, 1002), (3, 2002), (6, 3002)]


# ----------------------------------------------------------------------------- producer state rebuild


def test_tail_batch_headers_end_with_the_last_batches_appended(engine: Engine, lg: PartitionLog) -> None:
    append(lg, batch(3))
    append(lg, batch(2), batch(4))
    headers = list(lg.tail_batch_headers(1 << 20))
    assert [(h.base_offset, h.record_count) for h in headers[-2:]] == [(3, 2), (5, 4)]
    if engine.reads_all:
        assert [h.base_offset for h in headers] == [0, 3, 5]
    offsets = [h.base_offset for h in headers]
    assert offsets == sorted(offsets)


# ----------------------------------------------------------------------------- lifecycle


def test_flush_roll_and_retention_keep_the_offsets(lg: PartitionLog) -> None:
    append(lg, batch(3))
    lg.flush()
    assert lg.recovery_point == lg.log_end_offset == 3
    lg.roll()
    assert append(lg, batch(2))[0] == 3
    lg.delete_old_segments(NOW_MS)
    assert (lg.log_start_offset, lg.log_end_offset) == (0, 5)
    assert lg.maybe_flush(NOW_MS) in (True, False)


def test_a_closed_log_refuses_work(lg: PartitionLog) -> None:
    append(lg, batch(1))
    lg.close()
    buf, headers = buf_of(batch(1))
    with pytest.raises(StorageError):
        lg.append(buf, headers)
    with pytest.raises(StorageError):
        lg.read(0, 100)


def test_log_manager_opens_logs_through_its_factory(engine: Engine, tmp_path: Path) -> None:
    manager = LogManager([tmp_path / "logs"], CONFIG, _clock,
                         log_factory=lambda d, c, **kw: engine.make(d, c))  # type: ignore[arg-type]
    manager.startup(broker_id=1)
    lg = manager.get_or_create_log("t", 0)
    assert manager.get_or_create_log("t", 0) is lg and lg.dir == tmp_path / "logs" / "t-0"
    append(lg, batch(3))
    manager.checkpoint()
    assert manager.flush_due(NOW_MS) >= 0 and manager.cleanup(NOW_MS) == 0
    assert manager.delete_log("t", 0)
    manager.shutdown()


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_memory_slice_encodes_as_its_bytes_would(version: int) -> None:
    """A fetch response carries either kind of slice: a MemorySlice's bytes are written inline,
    exactly as the same bytes given as `bytes` would be."""
    data = batch(3)
    sl: LogSlice = MemorySlice(data, 0)
    assert (sl.size, sl.first_batch_offset, bytes(sl)) == (len(data), 0, data) and not hasattr(sl, "fd")

    def response(records: object) -> Out:
        part = {"partition_index": 0, "error_code": 0, "high_watermark": 3, "last_stable_offset": 3,
                "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
                "records": records}
        body = {"throttle_time": 0, "error_code": 0, "session_id": 0,
                "responses": [{"topic": "t", "partitions": [part]}]}
        return encode_response(1, version, 7, body)

    out = response(sl)
    assert out.slices == [] and bytes(out) == bytes(response(data))


# ----------------------------------------------------------------------------- transactions


def test_aborted_transactions_follow_appends_truncation_and_rebuilds(engine: Engine, lg: PartitionLog) -> None:
    from samsa.protocol.batch import parse_header
    from samsa.protocol.control import marker_batch
    from samsa.storage.txn_index import AbortedTxn

    data = bytearray(build_batch([(None, b"v", [], NOW_MS)] * 2, producer_id=1, producer_epoch=0, base_sequence=0,
                                 transactional=True))
    h = parse_header(data)
    lg.producers.record(h, lg.append(data, [(0, h)], now_ms=NOW_MS).first_offset)
    marker = bytearray(marker_batch(1, 0, False, 0, NOW_MS))
    at = lg.append(marker, [(0, parse_header(marker))], now_ms=NOW_MS).first_offset
    done = lg.producers.complete_txn(1, 0, False, at, 0)
    assert done is not None and (done.first_offset, done.last_offset, done.aborted) == (0, 2, True)
    lg.add_aborted_txn(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, done.last_stable_offset))
    assert lg.collect_aborted_transactions(0, 3) == [(1, 0)]
    assert lg.collect_aborted_transactions(2, 3) == [(1, 0)]
    assert lg.collect_aborted_transactions(3, 3) == []
    assert [b.base_offset for b, _ in lg.batch_headers(0)] == ([0, 2] if engine.reads_all else [2])
    lg.load_producer_state()
    assert lg.producers.ongoing_txn(1) is None and lg.collect_aborted_transactions(0, 3) == [(1, 0)]
    lg.truncate_to(2)  # the marker goes: the transaction is open again
    assert lg.collect_aborted_transactions(0, 3) == []
    lg.load_producer_state()
    assert lg.producers.ongoing_txn(1) == ((0, 0) if engine.reads_all else None)
