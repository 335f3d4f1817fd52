"""Helpers of the log cleaner's tests: a compacted Log on a fake clock, appends of keyed
records, reads of everything a consumer would get, one clean end to end."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from samsa.protocol.control import marker_batch
from samsa.protocol.records import Record, build_batch, decode_records, scan_batches
from samsa.storage import Log, LogConfig
from samsa.storage.cleaner import PreparedClean, clean, cleanable_range
from samsa.storage.offset_map import new_offset_map
from samsa.storage.txn_index import AbortedTxn

NOW_MS = 1_700_000_000_000
DAY_MS = 86_400_000
COMPACT = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512, retention_ms=-1, cleanup_policy="compact")

KV = tuple[bytes | None, bytes | None]


class FakeClock:
    def __init__(self, ms: int = NOW_MS) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def open_log(path: Path, clock: FakeClock, config: LogConfig = COMPACT, **kw: object) -> Log:
    return Log.open(path / "c-0", config, clock=clock, **kw)  # type: ignore[arg-type]


def append_raw(lg: Log, raw: bytes) -> tuple[int, int]:
    buf = bytearray(raw)
    res = lg.append(buf, scan_batches(buf))
    return res.first_offset, res.last_offset


def append(lg: Log, records: Sequence[KV], *, ts: int | None = None, compression: int = 0, producer_id: int = -1,
           producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
           log_append_time: bool = False) -> int:
    """One batch of `records`; its first offset. Records keep the producer's fields given."""
    stamp = NOW_MS if ts is None else ts
    raw = build_batch([(k, v, [("h", b"x")] if i % 3 == 0 else [], stamp + i) for i, (k, v) in enumerate(records)],
                      compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                      base_sequence=base_sequence, transactional=transactional, log_append_time=log_append_time)
    buf = bytearray(raw)
    headers = scan_batches(buf)
    first = lg.log_end_offset
    if producer_id >= 0:
        lg.producers.check(headers[0][1])
    res = lg.append(buf, headers)
    if producer_id >= 0:
        lg.producers.record(headers[0][1]._replace(base_offset=res.first_offset), res.first_offset)
    assert res.first_offset == first
    return first


def marker(lg: Log, producer_id: int, epoch: int, commit: bool, *, ts: int = NOW_MS) -> int:
    """A transaction marker, with what the partition does around it (producer state, index)."""
    first, _ = append_raw(lg, marker_batch(producer_id, epoch, commit, 0, ts))
    done = lg.producers.complete_txn(producer_id, epoch, commit, first, 0, ts)
    if done is not None and done.aborted:
        lg.add_aborted_txn(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, done.last_stable_offset))
    lg.producers.on_high_watermark(first + 1)
    return first


def read_all(lg: Log, start: int | None = None) -> list[Record]:
    """Every record a consumer reading from `start` (the log start) gets, control records too."""
    out: list[Record] = []
    offset = lg.log_start_offset if start is None else start
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 1 << 20)
        if sl is None:
            break
        data = Log.read_bytes(sl)
        batches = scan_batches(data, allow_partial_tail=True)
        assert batches, f"no whole batch at offset {offset}"
        for pos, h in batches:
            out.extend(decode_records(memoryview(data)[pos : pos + h.size], h))
            offset = h.next_offset
    return out


def snapshot(lg: Log) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in read_all(lg)]


def run_clean(lg: Log, first_dirty: int = 0, *, now_ms: int, dedupe_bytes: int = 1 << 20,
              native: bool | None = None, last_stable_offset: int | None = None,
              before_finish: Callable[[PreparedClean], None] | None = None,
              stop: threading.Event | None = None) -> int:
    """One whole clean; the next first dirty offset (first_dirty again if nothing to clean)."""
    now = now_ms
    lso = lg.log_end_offset if last_stable_offset is None else last_stable_offset
    cr = cleanable_range(lg, first_dirty, last_stable_offset=lso, now_ms=now)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, now)
    if job is None:
        return cr.first_dirty
    prepared = clean(job, new_offset_map(dedupe_bytes, native=native), stop=stop)
    if before_finish is not None:
        before_finish(prepared)
    lg.finish_clean(prepared)
    return prepared.end_offset


def latest_per_key(records: Sequence[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        out[key] = (offset, value)
    return out


GROUPED = COMPACT.replace(segment_bytes=1 << 20)  # segments rolled by hand, grouped at clean time


def build_log(path: Path, clock: FakeClock) -> Log:
    """Nine small segments (rolled by hand) of keys written over and over, tombstones, an
    aborted transaction whose abort marker is met with its batches, and an active segment."""
    lg = open_log(path, clock, GROUPED)
    rng = random.Random(3)
    for seg in range(9):
        for _ in range(4):
            keys = rng.sample(range(40), 8)
            append(lg, [(b"k%d" % k, None if k % 11 == 0 else b"v%d-%d" % (seg, k)) for k in keys], ts=clock.ms)
        if seg == 4:
            append(lg, [(b"k1", b"aborted")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
            marker(lg, 9, 0, False)
        lg.roll()
        clock.ms += 1000
    append(lg, [(b"active", b"1")], ts=clock.ms)
    return lg


def clean_all(lg: Log, clock: FakeClock) -> None:
    """One clean, in groups of three segments."""
    lg.update_config(GROUPED.replace(segment_bytes=max(s.size for s in lg.segments) * 3 + 1))
    run_clean(lg, now_ms=clock.ms)
