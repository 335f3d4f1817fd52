"""Storage hot-path benchmark: Log.append and Log.read on a temp dir.

    .venv/bin/python bench/bench_storage.py            # small run, a few seconds
    .venv/bin/python bench/bench_storage.py --mb 1024  # bigger

Scenarios: appends of one 1 MiB batch each, and of one 1 KiB batch each (per-call overhead);
then reads of the whole log front to back (max_bytes 1 MiB, as a fetch would) both as
FileSlice lookups only (what sendfile needs) and with the bytes pread into memory.
Batches are built once; the buffer is reused (append rewrites its baseOffset in place).
"""

from __future__ import annotations

import argparse
import random
import struct
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from samsa.protocol.batch import parse_header
from samsa.storage import Log, LogConfig


def make_batch(size: int, records: int = 1) -> bytearray:
    """A sealed uncompressed RecordBatch v2 of about `size` bytes holding `records` records."""
    value_len = max(1, (size - 61) // records - 12)
    body = bytearray()
    for i in range(records):
        rec = bytes([0, 0, i * 2 & 0x7F, 1]) + _varint(value_len) + b"x" * value_len + b"\x00"
        body += _varint(len(rec)) + rec
    sealed = struct.pack(">hiqqqhii", 0, records - 1, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, records)
    sealed += body
    return bytearray(struct.pack(">qiibI", 0, 9 + len(sealed), -1, 2, crc32c(sealed)) + sealed)


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def bench(label: str, directory: Path, batch: bytearray, total_bytes: int, records: int) -> None:
    lg = Log.open(directory, LogConfig(segment_bytes=256 << 20), clock=time.time)
    headers = [(0, parse_header(batch, 0))]
    n = max(1, total_bytes // len(batch))
    t0 = time.perf_counter()
    for _ in range(n):
        lg.append(batch, headers)
    t_append = time.perf_counter() - t0
    mb = n * len(batch) / 1e6

    # sequential fetches, max_bytes 1 MiB; batches are uniform, so the next offset is arithmetic
    t0 = time.perf_counter()
    offset = nbytes = fetches = 0
    while offset < lg.log_end_offset:
        sl = lg.read(offset, 1 << 20)
        assert sl is not None
        nbytes += len(Log.read_bytes(sl))
        fetches += 1
        offset = sl.first_batch_offset + max(1, sl.size // len(batch)) * records
    t_read = time.perf_counter() - t0

    # random-offset lookups (index bisect + header scan + max_offset position): what each fetch costs
    rng = random.Random(1)
    offsets = [rng.randrange(lg.log_end_offset) for _ in range(20000)]
    hw = lg.log_end_offset - records
    t0 = time.perf_counter()
    for off in offsets:
        lg.read(off, 1 << 20)
    t_lookup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for off in offsets:
        lg.read(off, 1 << 20, max_offset=hw)
    t_lookup_hw = time.perf_counter() - t0

    print(f"{label:>14}: append {n:7d} batches {mb:8.1f} MB in {t_append:6.2f}s = {mb / t_append:8.1f} MB/s "
          f"{n / t_append:9.0f} batches/s ({n * records / t_append:9.0f} records/s)")
    print(f"{'':>14}  read {fetches:5d} sequential 1 MiB fetches with pread: {nbytes / 1e6 / t_read:8.1f} MB/s; "
          f"FileSlice lookups at random offsets: {len(offsets) / t_lookup:8.0f}/s "
          f"({len(offsets) / t_lookup_hw:8.0f}/s with max_offset)")
    lg.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=256, help="MB to append per 1 MiB-batch run (default 256)")
    ap.add_argument("--small-mb", type=int, default=16, help="MB to append per 1 KiB-batch run (default 16)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-") as tmp:
        bench("1 MiB batches", Path(tmp) / "big-0", make_batch(1 << 20, records=100), args.mb << 20, 100)
        bench("1 KiB batches", Path(tmp) / "small-0", make_batch(1024, records=10), args.small_mb << 20, 10)


if __name__ == "__main__":
    main()
