"""The log cleaner when things go wrong: kill -9 at every phase of a clean (real child processes
killed with SIGKILL at a named phase), a corrupt batch in the range, retention and truncation
while a clean runs, stop; and the cleaned segments against Samsa's recovery and Kafka's own
DumpLogSegments. Also the offset map's C and Python versions against each other."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from samsa.protocol.batch import HEADER_SIZE
from samsa.protocol.records import build_batch, seal_batch
from samsa.storage import Log, StorageError
from samsa.storage.cleaner import CleanAborted, CleanerError, clean, cleanable_range
from samsa.storage.offset_map import NATIVE, PyOffsetMap, new_offset_map, py_rebuild_records, rebuild_records
from tests.compat.kafkatools import KafkaTools, kafka_tools  # noqa: F401  (a fixture)
from tests.unit.compaction import (
    GROUPED,
    NOW_MS,
    FakeClock,
    append,
    append_raw,
    build_log,
    clean_all,
    open_log,
    snapshot,
)

ROOT = Path(__file__).resolve().parents[2]
def files(directory: Path) -> dict[str, bytes]:
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory)) if not n.endswith(".snapshot")}


# ----------------------------------------------------------------------------- kill -9

CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from samsa.storage import cleaner
    from tests.unit.compaction import GROUPED, FakeClock, clean_all, open_log
    seen = []
    def hook(phase):
        seen.append(phase)
        if phase == {phase!r} and seen.count(phase) == {occurrence}:
            os.kill(os.getpid(), signal.SIGKILL)
    cleaner.phase_hook = hook
    clock = FakeClock({now})
    lg = open_log(Path({path!r}), clock, GROUPED, clean_shutdown=True)
    clean_all(lg, clock)
    print("not killed:", seen)
""")

PHASES = [  # phase, occurrence, the log after a restart reads as: before or after the clean
    ("map-built", 1, "before"),
    ("segment-recopied", 2, "before"),  # the first group's new segment half written
    ("cleaned", 1, "before"),  # every .cleaned file written and fsynced
    ("swap-renamed", 1, "before"),  # the last group renamed to .swap, the others still .cleaned
    ("swap-renamed", 3, "after"),  # all renamed: the clean is done as far as a restart goes
    ("old-deleted", 1, "after"),  # first group: old segments renamed .deleted, its swap not yet in
    ("swap-log-renamed", 2, "after"),  # second group (with a .txnindex): .log in, indexes still .swap
    ("swapped", 2, "after"),  # two groups swapped in, the third still .swap
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[object], list[object], int]:
    """A log (closed), what it reads before a clean and after one, and the clock."""
    base = tmp_path_factory.mktemp("reference")
    clock = FakeClock()
    lg = build_log(base, clock)
    before = snapshot(lg)
    lg.close()
    copy = tmp_path_factory.mktemp("cleaned")
    shutil.copytree(base / "c-0", copy / "c-0")
    lg = open_log(copy, clock, GROUPED, clean_shutdown=True)
    clean_all(lg, clock)
    after = snapshot(lg)
    assert len(after) < len(before) / 2 and lg.collect_aborted_transactions(0, lg.log_end_offset)
    lg.close()
    return base, before, after, clock.ms  # type: ignore[return-value]


@pytest.mark.parametrize(("phase", "occurrence", "expect"), PHASES, ids=[f"{p}-{n}" for p, n, _ in PHASES])
def test_kill9_at_each_phase_leaves_the_log_as_before_or_as_after(tmp_path: Path, reference: tuple, phase: str,  # type: ignore[type-arg]
                                                                  occurrence: int, expect: str) -> None:
    base, before, after, now = reference
    shutil.copytree(base / "c-0", tmp_path / "c-0")
    code = CHILD.format(root=str(ROOT), phase=phase, occurrence=occurrence, now=now, path=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    clock = FakeClock(now)
    lg = open_log(tmp_path, clock, GROUPED)  # an unclean stop: recovery rescans every segment
    assert snapshot(lg) == (before if expect == "before" else after)
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned", ".deleted"))]
    if expect == "after":
        assert lg.collect_aborted_transactions(0, lg.log_end_offset)  # the cleaned .txnindex came along
    clean_all(lg, clock)  # and it cleans again to the same
    assert snapshot(lg) == after


# ----------------------------------------------------------------------------- corrupt batches


@pytest.mark.parametrize("damage", ["crc", "records"])
def test_a_corrupt_batch_in_the_range_stops_the_clean_and_leaves_the_log_alone(tmp_path: Path, damage: str) -> None:
    clock = FakeClock()
    lg = open_log(tmp_path, clock, GROUPED)
    for seg in range(3):
        for _ in range(3):
            append(lg, [(b"k%d" % i, b"v%d" % seg) for i in range(10)])
        if seg == 1 and damage == "records":  # CRC fine, but a record's key overruns it
            body = b"\x0c\x00\x00\x00\x40kk\x02v\x00"  # length 6, key length 32
            append_raw(lg, seal_batch(body, 1, NOW_MS, NOW_MS))
        lg.roll()
    if damage == "crc":
        seg = lg.segments[1]
        os.pwrite(seg.fd, b"\xff", HEADER_SIZE + 5)
    state = files(lg.dir)
    cr = cleanable_range(lg, 0, last_stable_offset=lg.log_end_offset, now_ms=clock.ms)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, clock.ms)
    assert job is not None
    with pytest.raises(CleanerError, match="CRC" if damage == "crc" else "key length overruns"):
        clean(job, new_offset_map(1 << 20))
    assert files(lg.dir) == state  # nothing written, nothing left behind


# ----------------------------------------------------------------------------- while a clean runs


def prepare(lg: Log, clock: FakeClock):  # type: ignore[no-untyped-def]
    lg.update_config(GROUPED.replace(segment_bytes=max(s.size for s in lg.segments) * 3 + 1))
    cr = cleanable_range(lg, 0, last_stable_offset=lg.log_end_offset, now_ms=clock.ms)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, clock.ms)
    assert job is not None
    return clean(job, new_offset_map(1 << 20))


def test_retention_deleting_part_of_a_group_skips_it_and_every_later_group(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    prepared = prepare(lg, clock)
    assert len(prepared.groups) == 3
    bases = [s.base_offset for s in lg.segments]
    lg.delete_records_before(bases[1])  # segment 0 goes: the first group is left with two of three
    expected = snapshot(lg)
    assert lg.finish_clean(prepared) is None
    assert snapshot(lg) == expected
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]


def test_retention_deleting_a_whole_group_lets_the_later_ones_in(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    prepared = prepare(lg, clock)
    bases = [s.base_offset for s in lg.segments]
    lg.delete_records_before(bases[3])  # the first group's three segments go
    stats = lg.finish_clean(prepared)
    assert stats is not None and stats.groups == 2 and stats.segments_before == 6
    assert [s.base_offset for s in lg.segments] == [bases[3], bases[6], bases[9]]
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]
    assert {r[2] for r in snapshot(lg)} >= {b"active"}


def test_a_truncation_into_the_range_cancels_the_clean(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    cr = cleanable_range(lg, 0, last_stable_offset=lg.log_end_offset, now_ms=clock.ms)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, clock.ms)
    assert job is not None
    lg.truncate_to(lg.segments[3].base_offset + 2)
    assert job.cancelled.is_set()
    with pytest.raises(CleanAborted):
        clean(job, new_offset_map(1 << 20))
    # a clean already prepared is abandoned by a truncation, its swap files removed at once
    clock.ms += 1
    expected = snapshot(lg)
    prepared = prepare(lg, clock)
    assert [n for n in os.listdir(lg.dir) if n.endswith(".swap")]
    lg.truncate_to(lg.segments[1].base_offset)
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]
    assert lg.finish_clean(prepared) is None
    assert snapshot(lg) == [r for r in expected if r[0] < lg.log_end_offset]


def test_stop_aborts_between_batches_and_removes_what_was_written(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    state = files(lg.dir)
    stop = threading.Event()
    cr = cleanable_range(lg, 0, last_stable_offset=lg.log_end_offset, now_ms=clock.ms)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, clock.ms)
    assert job is not None
    calls = []

    def throttle(n: int) -> None:
        calls.append(n)
        if len(calls) == 12:
            stop.set()

    with pytest.raises(CleanAborted):
        clean(job, new_offset_map(1 << 20), throttle=throttle, stop=stop)
    assert files(lg.dir) == state


def test_a_clean_finished_after_its_log_closed_is_abandoned(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    prepared = prepare(lg, clock)
    lg.close()
    assert lg.finish_clean(prepared) is None
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]


def test_one_clean_at_a_time(tmp_path: Path) -> None:
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    prepared = prepare(lg, clock)
    with pytest.raises(StorageError, match="in progress"):
        lg.cleaning_job(0, lg.log_end_offset, clock.ms)
    lg.abandon_clean(prepared)
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".swap", ".cleaned"))]
    job = lg.cleaning_job(0, lg.log_end_offset, clock.ms)
    assert job is not None
    lg.abandon_clean(job)  # a job given up before it ran
    with pytest.raises(CleanAborted):
        clean(job, new_offset_map(1 << 20))
    assert lg.cleaning_job(0, lg.log_end_offset, clock.ms) is not None


# ----------------------------------------------------------------------------- Kafka's own reader


def test_cleaned_segments_read_with_kafkas_dump_log_segments(tmp_path: Path, kafka_tools: KafkaTools) -> None:  # noqa: F811
    clock = FakeClock()
    lg = build_log(tmp_path, clock)
    clean_all(lg, clock)
    run = kafka_tools.ok("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--print-data-log", "--files",
                         ",".join(str(s.log_path) for s in lg.segments[:-1]))
    records = [line for line in run.lines if line.startswith("| offset:")]
    expected = [r for r in snapshot(lg) if r[0] < lg.segments[-1].base_offset]
    assert len(records) == len(expected)
    for line, (offset, _, key, _) in zip(records, expected):
        assert line.startswith(f"| offset: {offset} ")
        if key is not None and not key.startswith(b"\x00"):
            assert f"key: {key.decode()}" in line
    assert "isvalid: true" in run.stdout and "isvalid: false" not in run.stdout


# ----------------------------------------------------------------------------- the offset map, C and Python


def _siphash128_reference(data: bytes, key: bytes) -> bytes:
    """SipHash-2-4 with 128-bit output, from the paper's description."""
    mask = (1 << 64) - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D ^ 0xEE, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32)  # noqa: E702
            v[2] = (v[2] + v[3]) & mask; v[3] = rotl(v[3], 16); v[3] ^= v[2]  # noqa: E702
            v[0] = (v[0] + v[3]) & mask; v[3] = rotl(v[3], 21); v[3] ^= v[0]  # noqa: E702
            v[2] = (v[2] + v[1]) & mask; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32)  # noqa: E702

    tail = len(data) % 8
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - tail, 8)]
    words.append((len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail :], "little"))
    for m in words:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xEE
    rounds(4)
    out0 = v[0] ^ v[1] ^ v[2] ^ v[3]
    v[1] ^= 0xDD
    rounds(4)
    return out0.to_bytes(8, "little") + (v[0] ^ v[1] ^ v[2] ^ v[3]).to_bytes(8, "little")


@pytest.mark.skipif(not NATIVE, reason="_cleaner not built")
def test_the_c_hash_is_siphash_2_4_128() -> None:
    from samsa.storage._cleaner import siphash128

    key = bytes(range(16))
    assert siphash128(b"", key).hex() == "a3817f04ba25a8e66df67214c7550293"  # the reference vector 0
    for n in range(64):
        assert siphash128(bytes(range(n)), key) == _siphash128_reference(bytes(range(n)), key)


def _random_records(rng: random.Random, n: int) -> bytes:
    records = []
    for i in range(n):
        key = None if rng.random() < 0.05 else b"key-%d" % rng.randrange(30)
        value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 300))
        headers = [(f"h{j}", rng.choice([None, b"hv"])) for j in range(rng.randrange(3))]
        records.append((key, value, headers, NOW_MS + rng.randrange(-5000, 5000)))
    return build_batch(records)


@pytest.mark.skipif(not NATIVE, reason="_cleaner not built")
def test_the_c_and_python_offset_maps_decide_alike() -> None:
    rng = random.Random(11)
    for trial in range(60):
        limit = rng.choice([5, 12, 40])
        c_map, py_map = new_offset_map(24 * (limit + 3), limit / (limit + 3) + 1e-9, native=True), \
            PyOffsetMap(limit + 3, limit, bytes(16))
        batches = [_random_records(rng, rng.randrange(1, 40)) for _ in range(4)]
        base = 0
        for raw in batches:
            n = raw[57:61]
            count = int.from_bytes(n, "big")
            data = raw[HEADER_SIZE:]
            assert c_map.add_records(data, count, base, 3) == py_map.add_records(data, count, base, 3)
            base += count
        assert c_map.size == py_map.size
        base = 0
        for raw in batches:
            count = int.from_bytes(raw[57:61], "big")
            data = raw[HEADER_SIZE:]
            args = (data, count, base, NOW_MS - 7, NOW_MS + 9, trial % 5 == 0, base + count - trial % 3, trial % 2 == 0)
            c, p = c_map.filter_records(*args), py_map.filter_records(*args)
            assert c == p
            mask = c[4] or b"\x01" * count
            assert rebuild_records(data, count, mask, NOW_MS - 7, NOW_MS + 9, trial % 5 == 0, NOW_MS + 100) == \
                py_rebuild_records(data, count, mask, NOW_MS - 7, NOW_MS + 9, trial % 5 == 0, NOW_MS + 100)
            base += count


@pytest.mark.parametrize("native", [pytest.param(True, marks=pytest.mark.skipif(not NATIVE, reason="not built")),
                                    False])
@pytest.mark.parametrize(("data", "why"), [
    (b"\x0c\x00\x00\x00\x40kk\x02v\x00", "record 0: a key length overruns its record"),
    (b"\x12\x00\x00\x00\x02k\x02v\x00\x00", "record 0: a record's fields do not end where its length says"),
    (b"\x10\x00\x00\x00\x02k\x02v\x08", "record 0: a header count overruns its record"),
    (b"\x20\x00\x00\x00\x02k\x02v\x00", "record 0: a record length overruns the batch"),
    (b"\x10\x00\x00\x00\x02k\x02v\x00\x00", "record 1: bytes are left after the batch's records"),
    (b"\x18\x00" + b"\xff" * 11, "record 0: a timestamp delta does not parse"),
])
def test_records_that_do_not_parse_are_refused_alike(native: bool, data: bytes, why: str) -> None:
    m = new_offset_map(24 * 10, native=native)
    with pytest.raises(ValueError, match=why):
        m.add_records(data, 1, 0, 0)
    with pytest.raises(ValueError, match=why):
        m.filter_records(data, 1, 0, 0, 0, False, 10, True)
