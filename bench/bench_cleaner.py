"""The log cleaner's throughput and memory: one clean of a large compacted log, in process.

A log of `--gib` GiB (default 1) is written with the storage API directly (Log.append, no
broker): records of `--value` bytes (default 200) over `--keys` keys (default 1,000,000),
each key written about size / (keys x record size) times, in batches of `--batch` records
(default 100), uncompressed or `--codec`; segment.bytes `--segment-mb` (default 128). Then,
in a fresh child process (so its peak RSS is the clean's own), the whole log is cleaned once:
cleanable_range, Log.cleaning_job, cleaner.clean with a `--dedupe-mb` MiB offset map
(default 128, Kafka's log.cleaner.dedupe.buffer.size) and Log.finish_clean, and it prints

    dirty MB, seconds (offset map / recopy / finish), MB/s of dirty log cleaned (wall clock,
    and per CPU second of the process: on a shared machine the second is the steadier),
    bytes written, records kept, peak RSS of the cleaning process, whether the C map was used

The data is in the page cache when the clean starts (just written) unless `--cold`, which
asks the kernel to drop each segment's cached pages first (posix_fadvise DONTNEED).

    PYTHONPATH=. .venv/bin/python bench/bench_cleaner.py [--gib 1] [--keys 1000000] [--codec lz4] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.protocol import compression  # noqa: E402
from samsa.protocol.records import scan_batches, seal_batch  # noqa: E402
from samsa.storage import Log, LogConfig  # noqa: E402
from samsa.storage.cleaner import clean, cleanable_range  # noqa: E402
from samsa.storage.offset_map import NATIVE, new_offset_map  # noqa: E402

NOW_MS = 1_700_000_000_000


def _varint(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def config(args: argparse.Namespace) -> LogConfig:
    return LogConfig(segment_bytes=args.segment_mb << 20, cleanup_policy="compact", retention_ms=-1,
                     segment_index_bytes=10 << 20)


def build(directory: Path, args: argparse.Namespace) -> tuple[int, int]:
    """Write the log; (records, bytes)."""
    rng = random.Random(7)
    lg = Log.open(directory, config(args), clock=lambda: NOW_MS / 1000)
    codec = {v: k for k, v in compression.CODEC_NAMES.items()}[args.codec]
    values = [rng.randbytes(args.value // 2).hex().encode()[: args.value] for _ in range(256)]
    # The same encoded record tail for every (delta, value) pair is built once: only the key differs.
    target = int(args.gib * 2**30)
    records = 0
    offset_deltas = [_varint(i) for i in range(args.batch)]
    while lg.size_in_bytes < target:
        body = bytearray()
        for i in range(args.batch):
            key = b"key-%08d" % rng.randrange(args.keys)
            value = values[rng.randrange(256)]
            rec = b"\x00" + b"\x00" + offset_deltas[i] + _varint(len(key)) + key + _varint(len(value)) + value + b"\x00"
            body += _varint(len(rec)) + rec
        raw = bytearray(seal_batch(body, args.batch, NOW_MS, NOW_MS, compression=codec))
        lg.append(raw, scan_batches(raw, verify_crc=False))
        records += args.batch
    lg.roll()
    size = lg.size_in_bytes
    lg.close()
    return records, size


def run_clean(directory: Path, args: argparse.Namespace) -> dict[str, object]:
    lg = Log.open(directory, config(args), clock=lambda: NOW_MS / 1000, clean_shutdown=True)
    if args.cold:
        for seg in lg.segments:
            os.posix_fadvise(seg.fd, 0, 0, os.POSIX_FADV_DONTNEED)
    started = time.perf_counter()
    cpu = time.process_time()
    cr = cleanable_range(lg, 0, last_stable_offset=lg.log_end_offset, now_ms=NOW_MS)
    job = lg.cleaning_job(cr.first_dirty, cr.first_uncleanable, NOW_MS)
    assert job is not None
    offset_map = new_offset_map(args.dedupe_mb << 20)
    map_ready = time.perf_counter()
    prepared = clean(job, offset_map)
    cleaned = time.perf_counter()
    stats = lg.finish_clean(prepared)
    done = time.perf_counter()
    cpu = time.process_time() - cpu
    assert stats is not None and not prepared.map_full, "the offset map filled: raise --dedupe-mb"
    lg.close()
    seconds = done - started
    return {
        "dirty_mb": round(cr.dirty_bytes / 1e6, 1),
        "seconds": round(seconds, 2),
        "map_alloc_s": round(map_ready - started, 3),
        "clean_s": round(cleaned - map_ready, 2),
        "finish_s": round(done - cleaned, 3),
        "mb_per_s": round(cr.dirty_bytes / 1e6 / seconds, 1),
        "cpu_s": round(cpu, 2),  # (user + system: what the clean costs whatever else runs)
        "mb_per_cpu_s": round(cr.dirty_bytes / 1e6 / cpu, 1),
        "written_mb": round(prepared.bytes_written / 1e6, 1),
        "records_read": prepared.records_read,
        "records_kept": prepared.records_read - prepared.records_removed,
        "map_entries": prepared.map_entries,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "native": NATIVE,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value", type=int, default=200)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=sorted(compression.CODEC_NAMES.values()))
    ap.add_argument("--segment-mb", type=int, default=128)
    ap.add_argument("--dedupe-mb", type=int, default=128)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--dir", help="keep the log here (default: a temporary directory)")
    ap.add_argument("--clean-only", action="store_true", help=argparse.SUPPRESS)  # (the child)
    args = ap.parse_args()
    if args.clean_only:
        print(json.dumps(run_clean(Path(args.dir), args)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-cleaner-") as tmp:
        directory = Path(args.dir or tmp) / "compacted-0"
        t = time.perf_counter()
        records, size = build(directory, args)
        print(f"built {size / 2**30:.2f} GiB, {records:,} records over {args.keys:,} keys ({args.codec}) "
              f"in {time.perf_counter() - t:.1f} s", flush=True)
        child = [sys.executable, __file__, "--clean-only", "--dir", str(directory)] + [
            a for a in sys.argv[1:] if a not in ("--dir", args.dir)]
        out = subprocess.run(child, check=True, capture_output=True, text=True)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        for k, v in result.items():
            print(f"{k:>14}: {v}")


if __name__ == "__main__":
    main()
