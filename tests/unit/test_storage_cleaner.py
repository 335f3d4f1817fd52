"""The log cleaner on real files (samsa.storage.cleaner, Log.cleaning_job/finish_clean): what a
compacted log reads like after a clean, tombstones and their delete horizon, reads in removed
ranges, several passes with a small offset map, every codec, transactions and producer state,
the range limits, and cleanable_range's table. No broker, no sleeps: a fake clock."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from samsa.protocol import compression
from samsa.protocol.batch import ATTR_COMPRESSION_MASK, ATTR_TIMESTAMP_TYPE, HEADER_SIZE, parse_header
from samsa.protocol.records import build_batch, decode_records, scan_batches
from samsa.storage import Log, LogConfig
from samsa.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_cleaner_offsets, write_cleaner_offsets
from samsa.storage.clean_filter import ATTR_DELETE_HORIZON
from samsa.storage.cleaner import CleanedGroup, JobSegment, cleanable_range, group_segments_by_size, groups_to_swap
from samsa.storage.loader import recover_segment
from samsa.storage.offset_map import NATIVE
from samsa.storage.producer_state import ProducerStateManager, replay_batch
from tests.unit.compaction import (
    COMPACT,
    DAY_MS,
    FakeClock,
    append,
    marker,
    open_log,
    read_all,
    run_clean,
)

MAPS = [pytest.param(True, id="c", marks=pytest.mark.skipif(not NATIVE, reason="_cleaner not built")),
        pytest.param(False, id="python")]


def write_versions(lg: Log, clock: FakeClock, *, keys: int = 300, versions: int = 60, seed: int = 1
                   ) -> dict[bytes, tuple[int, bytes | None]]:
    """`versions` rounds over `keys` keys in batches of 10, some values null (tombstones, among
    them the last version of every tenth key); the latest (offset, value) per key."""
    rng = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for v in range(versions):
        order = list(range(keys))
        rng.shuffle(order)
        for i in range(0, keys, 10):
            batch = []
            for k in order[i : i + 10]:
                dead = (k % 10 == 0 and v == versions - 1) or (k % 7 == 3 and v % 9 == 4)
                batch.append((b"key-%d" % k, None if dead else b"value-%d-of-%d" % (v, k)))
            first = append(lg, batch, ts=clock.ms)
            for j, (key, value) in enumerate(batch):
                latest[key] = (first + j, value)
        clock.ms += 1000
    lg.roll()
    return latest


def keyed(lg: Log) -> dict[bytes | None, tuple[int, bytes | None]]:
    records = read_all(lg)
    out = {r.key: (r.offset, r.value) for r in records}
    assert len(out) == len(records), "a key read twice"
    return out


def assert_segments_whole(lg: Log) -> None:
    """Every segment's batches check out as recovery checks them (CRC, offsets, lengths)."""
    for seg in lg.segments:
        size = seg.size
        assert recover_segment(seg) == 0 and seg.size == size


# ----------------------------------------------------------------------------- latest per key


@pytest.mark.parametrize("native", MAPS)
def test_a_clean_keeps_exactly_the_latest_record_of_each_key_at_its_offset(tmp_path: Path, native: bool) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock)
    latest = write_versions(lg, clock)
    before = lg.size_in_bytes
    end = run_clean(lg, now_ms=clock.ms, native=native)
    assert end == lg.segments[-1].base_offset  # the whole log but the active segment
    assert keyed(lg) == latest  # tombstones too: delete.retention.ms has not passed
    assert lg.size_in_bytes < before / 20
    offsets = [r.offset for r in read_all(lg)]
    assert offsets == sorted(offsets)
    assert_segments_whole(lg)
    lg.close()
    lg = open_log(tmp_path, clock)  # the swapped-in segments load as any others
    assert keyed(lg) == latest
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]


def test_tombstones_stay_until_delete_retention_ms_after_the_clean_that_first_kept_them(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock)
    latest = write_versions(lg, clock, keys=50, versions=5)
    stamps = {r.offset: r.timestamp for r in read_all(lg)}
    first_clean = clock.ms
    end = run_clean(lg, now_ms=clock.ms)
    tombstones = {k for k, (_, v) in latest.items() if v is None}
    assert tombstones and {k for k, (_, v) in keyed(lg).items() if v is None} == tombstones
    horizons = set()
    for r, h in _records_with_headers(lg):
        assert r.timestamp == stamps[r.offset]  # timestamps read the same under a delete horizon
        if r.value is None:
            assert h.attributes & ATTR_DELETE_HORIZON
            horizons.add(h.base_timestamp)
    assert horizons == {first_clean + COMPACT.delete_retention_ms}

    def clean_again(at: int) -> None:
        nonlocal end
        clock.ms = at
        append(lg, [(b"other-%d" % at, b"x")], ts=at)
        lg.roll()
        end = run_clean(lg, end, now_ms=at)

    clean_again(first_clean + DAY_MS - 1)
    assert {k for k, (_, v) in keyed(lg).items() if v is None} == tombstones
    clean_again(first_clean + DAY_MS)
    after = keyed(lg)
    assert not {k for k, (_, v) in after.items() if v is None}
    assert {k: v for k, v in after.items() if not k.startswith(b"other")} == {
        k: v for k, v in latest.items() if v[1] is not None}
    for r in read_all(lg):
        assert r.timestamp == stamps.get(r.offset, r.timestamp)


def _records_with_headers(lg: Log) -> list:  # type: ignore[type-arg]
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 1 << 20)
        if sl is None:
            break
        data = Log.read_bytes(sl)
        for pos, h in scan_batches(data, allow_partial_tail=True):
            out.extend((r, h) for r in decode_records(memoryview(data)[pos : pos + h.size], h))
            offset = h.next_offset
    return out


# ----------------------------------------------------------------------------- reads in removed ranges


def test_a_read_inside_a_removed_range_gets_the_next_batch(tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = COMPACT.replace(segment_bytes=1 << 20)
    lg = open_log(tmp_path, clock, cfg)
    # segment A: keys a0..a9 then z (z superseded later: a gap at the end of A)
    append(lg, [(b"a%d" % i, b"1") for i in range(10)])
    append(lg, [(b"z", b"old")])
    lg.roll()
    # segment B: only keys written again in C: emptied by the clean
    append(lg, [(b"b%d" % i, b"old") for i in range(5)])
    append(lg, [(b"b%d" % i, b"old2") for i in range(5)])
    lg.roll()
    # segment C: the latest of b*, z, and a mix
    append(lg, [(b"b%d" % i, b"new") for i in range(5)])
    append(lg, [(b"z", b"new"), (b"c", b"1")])
    lg.roll()
    append(lg, [(b"tail", b"1")])  # active
    sizes = [s.size for s in lg.segments]
    assert len(sizes) == 4
    bases = [s.base_offset for s in lg.segments]
    # one group per segment: make each too large to share one
    lg.update_config(cfg.replace(segment_bytes=max(sizes[:3]) + 1))
    run_clean(lg, now_ms=clock.ms)
    segs = lg.segments
    assert [s.base_offset for s in segs] == bases  # one cleaned segment per old one, same bases
    assert segs[1].size == 0  # B emptied
    kept = [(r.offset, r.key) for r in read_all(lg)]
    assert kept == [(i, b"a%d" % i) for i in range(10)] + [(21, b"b0"), (22, b"b1"), (23, b"b2"), (24, b"b3"),
                                                           (25, b"b4"), (26, b"z"), (27, b"c"), (28, b"tail")]
    survivors = sorted({o for o, _ in kept})
    for offset in range(lg.log_end_offset):
        sl = lg.read(offset, 1 << 20)
        assert sl is not None
        h = parse_header(Log.read_bytes(sl)[:HEADER_SIZE])
        nxt = min(o for o in survivors if o >= offset)
        assert h.base_offset <= nxt <= h.last_offset, (offset, h)
    assert lg.read(10, 1 << 20).first_batch_offset == 21  # type: ignore[union-attr]  # (z at 10 gone, B empty)
    lg.close()
    lg = open_log(tmp_path, clock, cfg)
    assert [(r.offset, r.key) for r in read_all(lg, 10)] == kept[10:]
    assert lg.truncate_to(12) and lg.log_end_offset == 12  # a truncation into a gap ends at the offset asked
    assert [(r.offset, r.key) for r in read_all(lg)] == kept[:10]


# ----------------------------------------------------------------------------- a small offset map


def test_a_map_smaller_than_the_key_set_gets_there_in_several_passes(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock, COMPACT.replace(segment_bytes=2048))
    latest = write_versions(lg, clock, keys=300, versions=6)
    bases = {s.base_offset for s in lg.segments}
    dirty = 0
    ends = []
    while True:
        end = run_clean(lg, dirty, now_ms=clock.ms, dedupe_bytes=24 * 110)  # 99 keys
        if end == dirty:
            break
        ends.append(end)
        dirty = end
    assert len(ends) >= 5  # 300 keys, 99 at a time
    assert all(e in bases for e in ends)  # each pass ends at the end of a segment it mapped whole
    assert keyed(lg) == latest


def test_a_segment_with_more_keys_than_the_map_is_mapped_in_part(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock, COMPACT.replace(segment_bytes=1 << 20))
    latest = write_versions(lg, clock, keys=100, versions=3)
    dirty, passes = 0, 0
    while (end := run_clean(lg, dirty, now_ms=clock.ms, dedupe_bytes=24 * 45)) != dirty:  # 40 keys
        dirty, passes = end, passes + 1
    assert passes >= 5  # 100 keys, 300 records, one segment: stops inside it, at a batch's end
    assert keyed(lg) == latest


def test_an_abort_past_the_end_of_a_partial_pass_keeps_its_index_entry(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock, COMPACT.replace(segment_bytes=1 << 20))
    for i in range(8):
        append(lg, [(b"k%d" % (10 * i + j), b"v") for j in range(10)])
    aborted_at = append(lg, [(b"k1", b"aborted")], producer_id=4, producer_epoch=0, base_sequence=0,
                        transactional=True)
    marker(lg, 4, 0, False)
    append(lg, [(b"k1", b"after")])
    lg.roll()
    end = run_clean(lg, now_ms=clock.ms, dedupe_bytes=24 * 35)  # 31 keys: stops inside the segment
    assert end < aborted_at
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == [(4, aborted_at)]
    assert any(r.value == b"aborted" for r in read_all(lg))  # (another pass's to remove)
    while (nxt := run_clean(lg, end, now_ms=clock.ms, dedupe_bytes=24 * 35)) != end:
        end = nxt
    assert not any(r.value == b"aborted" for r in read_all(lg))
    assert keyed(lg)[b"k1"][1] == b"after"


# ----------------------------------------------------------------------------- codecs


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
@pytest.mark.parametrize("native", MAPS)
def test_partly_kept_batches_are_compressed_again_with_their_codec(tmp_path: Path, codec: int, native: bool) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock)
    for round_ in range(3):
        append(lg, [(b"k%d" % i, b"v%d-" % round_ + b"x" * 50 * i) for i in range(10)], compression=codec)
        append(lg, [(b"k%d" % i, b"newer") for i in range(0, 10, 3)], compression=codec)  # supersedes some
    append(lg, [(b"lat%d" % i, b"v") for i in range(4)], compression=codec, log_append_time=True)
    append(lg, [(b"lat%d" % i, b"w") for i in range(0, 4, 2)], compression=codec)
    lg.roll()
    expected = {r.key: (r.offset, r.value, r.timestamp) for r in read_all(lg)}
    run_clean(lg, now_ms=clock.ms, native=native)
    records = _records_with_headers(lg)
    assert {r.key: (r.offset, r.value, r.timestamp) for r, _ in records} == expected
    for _, h in records:
        assert h.attributes & ATTR_COMPRESSION_MASK == codec
    assert any(h.record_count == 6 for _, h in records)  # a batch of 10 with 4 superseded, rebuilt
    assert any(h.record_count == 2 and h.attributes & ATTR_TIMESTAMP_TYPE for _, h in records)
    assert_segments_whole(lg)


# ----------------------------------------------------------------------------- transactions


def test_transactions_aborted_records_go_markers_follow_kafkas_rules(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock)
    append(lg, [(b"a", b"plain"), (b"c", b"plain")])
    append(lg, [(b"a", b"committed")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    commit_at = marker(lg, 1, 0, True)
    aborted_at = append(lg, [(b"a", b"aborted"), (b"c", b"aborted"), (b"d", b"aborted")], producer_id=2,
                        producer_epoch=0, base_sequence=0, transactional=True)
    abort_at = marker(lg, 2, 0, False)
    append(lg, [(b"e", b"p2 later")], producer_id=2, producer_epoch=0, base_sequence=3, transactional=True)
    commit2_at = marker(lg, 2, 0, True)
    idem = append(lg, [(b"x", b"idempotent")], producer_id=3, producer_epoch=5, base_sequence=0)
    idem2 = append(lg, [(b"x", b"idempotent 2")], producer_id=3, producer_epoch=5, base_sequence=1)
    append(lg, [(b"x", b"plain newer")])
    lg.roll()
    append(lg, [(b"active", b"1")])
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == [(2, aborted_at)]

    end = run_clean(lg, now_ms=clock.ms)
    data = {r.key: r.value for r, h in _records_with_headers(lg) if not h.is_control}
    assert data == {b"a": b"committed", b"c": b"plain", b"e": b"p2 later", b"x": b"plain newer", b"active": b"1"}
    batches = _batches(lg)
    markers = {h.base_offset: h for h in batches if h.is_control}
    assert set(markers) == {commit_at, abort_at, commit2_at}  # each txn's data was met in this pass
    # the abort marker keeps its index entry while its batches were met; the aborted batch is gone
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == [(2, aborted_at)]
    assert aborted_at not in {h.base_offset for h in batches}
    # producer 3's batches: its last one (sequence 1) stays, emptied; the one before goes
    assert idem not in {h.base_offset for h in batches}
    last3 = next(h for h in batches if h.base_offset == idem2)
    assert (last3.record_count, last3.producer_id, last3.producer_epoch, last3.base_sequence) == (0, 3, 5, 1)
    assert last3.size == HEADER_SIZE

    # second clean: the abort marker's transaction has no batch left: it gets a delete horizon,
    # its index entry goes; the commit marker of producer 1 too (its batch "a" is kept, so not)
    clock.ms += 1000
    append(lg, [(b"dirty", b"1")])
    lg.roll()
    end = run_clean(lg, end, now_ms=clock.ms)
    markers = {h.base_offset: h for h in _batches(lg) if h.is_control}
    assert markers[abort_at].attributes & ATTR_DELETE_HORIZON
    assert markers[abort_at].base_timestamp == clock.ms + COMPACT.delete_retention_ms
    assert not markers[commit_at].attributes & ATTR_DELETE_HORIZON
    assert lg.collect_aborted_transactions(0, lg.log_end_offset) == []

    # after delete.retention.ms: the abort marker goes
    clock.ms += COMPACT.delete_retention_ms
    append(lg, [(b"dirty2", b"1")])
    lg.roll()
    run_clean(lg, end, now_ms=clock.ms)
    markers = {h.base_offset: h for h in _batches(lg) if h.is_control}
    assert abort_at not in markers and commit_at in markers

    # producer state replayed from the cleaned log's batches alone (what a rebuild from a
    # snapshot older than every producer does): sequences, epochs, no transaction left open
    state = ProducerStateManager()
    for h, read in lg.batch_headers(0):
        replay_batch(state, h, read)
    state.on_high_watermark(lg.log_end_offset)
    assert (state.producers[3].last_seq, state.producers[3].epoch) == (1, 5)
    assert state.producers[2].last_seq == 3 and state.first_unstable_offset() is None
    assert all(p.current_txn_first_offset == -1 for p in state.producers.values())
    lg.close()
    lg = open_log(tmp_path, clock)  # and the usual reload: the snapshot, then the batches after it
    lg.load_producer_state()
    lg.producers.on_high_watermark(lg.log_end_offset)
    assert (lg.producers.producers[3].last_seq, lg.producers.producers[2].last_seq) == (1, 3)
    assert lg.producers.first_unstable_offset() is None


def _batches(lg: Log) -> list:  # type: ignore[type-arg]
    out = []
    for seg in lg.segments:
        out.extend(h for _, h in seg.iter_headers())
    return out


# ----------------------------------------------------------------------------- limits of the range


def test_a_clean_never_reaches_the_first_uncleanable_offset(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock, COMPACT.replace(segment_bytes=1 << 20))
    for seg in range(5):
        for _ in range(3):
            append(lg, [(b"k%d" % i, b"v%d" % seg) for i in range(20)], ts=clock.ms)
        lg.roll()
        clock.ms += 60_000
    bases = [s.base_offset for s in lg.segments]
    untouched = {s.base_offset: (id(s), os.pread(s.fd, s.size, 0)) for s in lg.segments[2:]}
    lso = bases[2] + 7  # inside the third segment: it and later ones stay
    end = run_clean(lg, now_ms=clock.ms, last_stable_offset=lso)
    assert end == bases[2]
    for s in lg.segments[2:]:
        assert (id(s), os.pread(s.fd, s.size, 0)) == untouched[s.base_offset]
    assert {r.offset for r in read_all(lg)} >= set(range(bases[2], lg.log_end_offset))


@pytest.mark.parametrize(("checkpoint", "lso", "lag", "max_lag", "expect"), [
    # first dirty, first uncleanable, dirty ratio > 0.5, max lag due, reset
    (0, None, 0, None, (0, "active", True, False, False)),
    (-5, None, 0, None, (0, "active", True, False, True)),  # below the log start: reset
    (10**9, None, 0, None, (0, "active", True, False, True)),  # past the log end: reset
    ("seg3", None, 0, None, ("seg3", "active", False, False, False)),  # 1 of 4 dirty
    (0, "seg2+1", 0, None, (0, "seg2", True, False, False)),  # LSO rounded down to its segment
    (0, None, 250_000, None, (0, "seg2", True, False, False)),  # the last two segments are too young
    ("seg3", None, 0, 50_000, ("seg3", "active", False, True, False)),  # seg3 is older than max lag
    ("seg3", None, 0, 150_000, ("seg3", "active", False, False, False)),
])
def test_cleanable_range(tmp_path: Path, checkpoint: object, lso: object, lag: int, max_lag: int | None,
                         expect: tuple[object, ...]) -> None:
    clock = FakeClock()
    cfg = COMPACT.replace(segment_bytes=1 << 20, min_compaction_lag_ms=lag,
                          max_compaction_lag_ms=max_lag or COMPACT.max_compaction_lag_ms)
    lg = open_log(tmp_path, clock, cfg)
    for seg in range(4):
        append(lg, [(b"k%d" % i, b"v" * 100) for i in range(20)], ts=clock.ms)
        lg.roll()
        clock.ms += 100_000
    append(lg, [(b"active", b"v")], ts=clock.ms)
    bases = [s.base_offset for s in lg.segments]

    def at(v: object) -> int:
        if isinstance(v, str):
            name, _, plus = v.partition("+")
            return (bases[-1] if name == "active" else bases[int(name[3:])]) + int(plus or 0)
        return int(v)  # type: ignore[call-overload]

    cr = cleanable_range(lg, at(checkpoint), last_stable_offset=lg.log_end_offset if lso is None else at(lso),
                         now_ms=clock.ms)
    first_dirty, first_uncleanable, due, lag_due, reset = expect
    assert (cr.first_dirty, cr.first_uncleanable) == (at(first_dirty), at(first_uncleanable))
    assert (cr.dirty_ratio > 0.5, cr.max_lag_due, cr.checkpoint_reset) == (due, lag_due, reset)
    assert cr.due == (due or lag_due)
    assert cr.clean_bytes + cr.dirty_bytes == sum(s.size for s in lg.segments if s.base_offset < cr.first_uncleanable
                                                  or s.base_offset < cr.first_dirty)


def test_group_segments_by_size() -> None:
    def seg(base: int, nxt: int, size: int, index: int = 0) -> JobSegment:
        return JobSegment(None, base, nxt, -1, size, index, index, "")  # type: ignore[arg-type]

    segs = [seg(0, 10, 400), seg(10, 20, 400), seg(20, 30, 300), seg(30, 40, 900), seg(40, 50, 0), seg(50, 60, 50)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(segs, 1000, 1 << 20)] == [
        [0, 10], [20], [30, 40, 50]]
    indexed = [seg(0, 10, 1, 600), seg(10, 20, 1, 600), seg(20, 30, 1, 300)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(indexed, 1000, 1000)] == [[0], [10, 20]]
    far = [seg(0, 10, 1), seg(2**31 - 5, 2**31 + 5, 1), seg(2**31 + 5, 2**31 + 6, 0)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(far, 1000, 1000)] == [
        [0], [2**31 - 5, 2**31 + 5]]


@pytest.mark.parametrize(("now", "expect"), [
    ("s0 s1 s2 s3 s4 s5 active", [0, 1, 2]),
    ("s1 s2 s3 s4 s5 active", []),  # the first group lost s0: it and every later one stay out
    ("s3 s4 s5 active", [1, 2]),  # the first group is gone whole: the later ones go in
    ("s0 s1 s2 s3 s4 active", [0, 1]),  # s5 is gone (truncation): its group stays out
    ("s0 s1 s2 s3 s4 s5", [0, 1]),  # s5 became the active segment: never replaced
    ("s0 s1 s2 x3 s4 s5 active", [0]),  # s3 replaced by another object
])
def test_groups_to_swap(now: str, expect: list[int]) -> None:
    """Groups [s0 s1 s2] [s3 s4] [s5], against the log's segments when the clean finishes."""
    segs = {f"s{i}": object() for i in range(6)}
    groups = [CleanedGroup(base, tuple(segs[f"s{j}"] for j in members), 0, 0, 0, None, ())  # type: ignore[misc]
              for base, members in ((0, (0, 1, 2)), (3, (3, 4)), (5, (5,)))]
    current = [segs.get(name, object()) for name in now.split()]
    assert [groups.index(g) for g in groups_to_swap(current, groups)] == expect  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- config, checkpoint


def test_log_config_compaction_settings() -> None:
    d = LogConfig()
    assert (d.delete_retention_ms, d.min_compaction_lag_ms, d.max_compaction_lag_ms, d.min_cleanable_dirty_ratio) == (
        86400000, 0, 2**63 - 1, 0.5)
    c = LogConfig.from_topic_configs({"delete.retention.ms": "5", "min.compaction.lag.ms": "6",
                                      "max.compaction.lag.ms": "7", "min.cleanable.dirty.ratio": "0.25"})
    assert (c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms, c.min_cleanable_dirty_ratio) == (
        5, 6, 7, 0.25)
    assert LogConfig.from_topic_configs(c.to_topic_configs()) == c
    b = LogConfig.from_broker_configs({"log.cleaner.delete.retention.ms": "1", "log.cleaner.min.cleanable.ratio": "1",
                                       "log.cleaner.max.compaction.lag.ms": "9"})
    assert (b.delete_retention_ms, b.min_cleanable_dirty_ratio, b.max_compaction_lag_ms) == (1, 1.0, 9)
    for bad in ({"min.cleanable.dirty.ratio": "1.5"}, {"min.cleanable.dirty.ratio": "nan"},
                {"min.cleanable.dirty.ratio": "half"}, {"max.compaction.lag.ms": "0"},
                {"delete.retention.ms": "-1"}, {"min.compaction.lag.ms": "-1"}):
        with pytest.raises(ValueError, match=next(iter(bad)).replace(".", r"\.")):
            LogConfig.from_topic_configs(bad)


def test_cleaner_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    assert read_cleaner_offsets(tmp_path) == {}
    write_cleaner_offsets(tmp_path, {("t", 0): 42, ("my.topic-x", 3): 7})
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == "0\n2\nmy.topic-x 3 7\nt 0 42\n"
    assert read_cleaner_offsets(tmp_path) == {("t", 0): 42, ("my.topic-x", 3): 7}


def test_leader_epochs_and_the_log_start_survive_a_clean(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock)
    for epoch in range(3):
        for _ in range(10):
            raw = bytearray(build_batch([(b"k%d" % i, b"v" * 40, [], clock.ms) for i in range(10)]))
            lg.append(raw, scan_batches(raw), leader_epoch=epoch)
    lg.roll()
    entries = lg.leader_epochs.entries()
    run_clean(lg, now_ms=clock.ms)
    assert lg.leader_epochs.entries() == entries and lg.log_start_offset == 0
    lg.close()
    lg = open_log(tmp_path, clock)
    assert lg.leader_epochs.entries() == entries
    assert {r.key for r in read_all(lg)} == {b"k%d" % i for i in range(10)}
