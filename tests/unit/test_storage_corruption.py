"""Damaged bytes on the read path (issue 16): a read either returns the batch holding the
offset asked for, or fails with KAFKA_STORAGE_ERROR's CorruptSegment; it never lands on a
later offset, silently skipping what it could not parse. On real segment files, damaged
the way a bad disk or a bad write would: a batch length, an index entry, a byte flip."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from samsa.protocol.batch import HEADER
from samsa.storage import Log
from samsa.storage.errors import CorruptSegment
from samsa.storage.offset_index import ENTRY_SIZE
from tests.unit.test_storage_log import FakeClock, append, make_batch
from tests.unit.test_storage_recovery import CFG


def write_log(path: Path, clock: FakeClock, n: int = 25) -> tuple[int, list[int]]:
    """A log of n batches of 3 records over 3 segments, flushed and closed cleanly: a reopen
    (`reopen`) rescans nothing, so damage done meanwhile is met only by reads."""
    lg = Log.open(path, CFG, clock=clock)
    for i in range(n):
        append(lg, make_batch(3, ts=1000 + i, value_size=40))
    bases = [s.base_offset for s in lg.segments]
    leo = lg.log_end_offset
    lg.flush()
    lg.close()
    return leo, bases


def reopen(path: Path, clock: FakeClock) -> Log:
    leo = 75
    return Log.open(path, CFG, clock=clock, recovery_point=leo, clean_shutdown=True)


def read_or_error(lg: Log, offset: int) -> tuple[int, int] | str:
    """(base, last offset) of the first batch a read at `offset` returns, or "error"."""
    try:
        sl = lg.read(offset, 1 << 20)
    except CorruptSegment:
        return "error"
    assert sl is not None
    base, _, _, _, _, _, last_delta = HEADER.unpack_from(Log.read_bytes(sl))[:7]  # (no CRC check)
    return base, base + last_delta


def assert_no_silent_skip(lg: Log) -> int:
    """Every offset reads its own batch or fails; returns how many failed."""
    errors = 0
    for offset in range(lg.log_start_offset, lg.log_end_offset):
        got = read_or_error(lg, offset)
        if got == "error":
            errors += 1
        else:
            assert got[0] <= offset <= got[1], f"a read at {offset} returned offsets {got}"
    return errors


def test_a_damaged_batch_length_in_an_old_segment_fails_the_reads_past_it(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    first_segment = path / f"{bases[0]:020d}.log"
    batch_size = len(make_batch(3, value_size=40))
    with open(first_segment, "r+b") as f:  # the 4th batch's length: far past the segment's end
        f.seek(3 * batch_size + 8)
        f.write(struct.pack(">i", 10_000_000))
    lg = reopen(path, clock)  # (a clean reopen: nothing rescans the old segment)
    assert read_or_error(lg, 0) == (0, 2)  # before the damage: read as ever
    for offset in (9, 10, 11):  # the damaged batch: an error, not the next segment's offset 30
        assert read_or_error(lg, offset) == "error"
    assert read_or_error(lg, 27) == (27, 29)  # found through the index, past the damage
    assert read_or_error(lg, bases[1]) == (bases[1], bases[1] + 2)  # the next segment is intact
    assert assert_no_silent_skip(lg) >= 3
    lg.close()


def test_an_index_entry_off_by_777_bytes_is_read_by_a_scan(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    lg = reopen(path, clock)
    seg = lg.segments[0]
    assert len(seg.offset_index.entries()) >= 2
    index_file = path / f"{bases[0]:020d}.index"
    lg.close()
    data = bytearray(index_file.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, ENTRY_SIZE)  # the second entry
    struct.pack_into(">ii", data, ENTRY_SIZE, rel, pos + 777)
    index_file.write_bytes(bytes(data))
    lg = reopen(path, clock)
    assert assert_no_silent_skip(lg) == 0  # every offset still reads its own batch
    assert "not at a batch that holds it" in caplog.text
    lg.close()


def test_a_byte_flip_in_a_record_is_served_as_it_is(tmp_path: Path) -> None:
    """As Kafka does: the reader's CRC check finds it; the broker does not re-check on reads."""
    clock = FakeClock()
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    seg_file = path / f"{bases[0]:020d}.log"
    with open(seg_file, "r+b") as f:
        f.seek(len(make_batch(3, value_size=40)) + 70)  # inside the second batch's records
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    lg = reopen(path, clock)
    assert assert_no_silent_skip(lg) == 0
    lg.close()


def test_offsets_past_the_last_batch_of_a_segment_go_on_in_the_next(tmp_path: Path) -> None:
    """No damage: the strict scan changes nothing for a healthy log."""
    clock = FakeClock()
    path = tmp_path / "t-0"
    write_log(path, clock)
    lg = reopen(path, clock)
    assert assert_no_silent_skip(lg) == 0
    lg.close()



def test_an_index_rebuilt_at_start_up_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    path = tmp_path / "t-0"
    _, bases = write_log(path, clock)
    index_file = path / f"{bases[0]:020d}.index"
    with open(index_file, "ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole entry: the index fails its sanity check
    lg = reopen(path, clock)
    assert f"Rebuilding the indexes of {path / f'{bases[0]:020d}.log'}" in caplog.text
    assert "not a multiple" in caplog.text
    assert assert_no_silent_skip(lg) == 0
    lg.close()
