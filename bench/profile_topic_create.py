"""Profile topic creation inside one broker: where the time goes, server side only.

Runs a single-node broker (embedded store) in this process on a temporary log dir, then
creates topics through the broker's own AdminManager (no client, no network) and waits on
the event loop until every partition has a leader in the broker's view, under cProfile.
Prints the wall time per topic and the functions with the most time (own and cumulative).

Usage: PYTHONPATH=. .venv/bin/python bench/profile_topic_create.py [--partitions 1000,10000] [--top 30]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.config import BrokerConfig  # noqa: E402
from samsa.server.broker import Broker  # noqa: E402


async def run(counts: list[int], log_dir: Path, prof: cProfile.Profile) -> list[tuple[int, float]]:
    broker = Broker(BrokerConfig({"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0",
                                  "log.dirs": str(log_dir), "auto.create.topics.enable": "false"}))
    task = asyncio.get_running_loop().create_task(broker.run())
    while not broker.listeners or not broker.controller.active:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # let start-up settle
    out = []
    for n in counts:
        name = f"prof-{n}"
        t0 = time.perf_counter()
        prof.enable()
        await broker.admin.create_topic(name, n, 1, {})
        await broker.cluster.wait_until(lambda: broker.cluster.topic_ready(name, range(n)), 600)
        prof.disable()
        out.append((n, time.perf_counter() - t0))
        print(f"{n} partitions: every leader in the broker's view after {out[-1][1]:.2f} s", file=sys.stderr)
    broker.stop()
    await task
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="1000,10000")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    counts = [int(c) for c in args.partitions.split(",") if c]
    prof = cProfile.Profile()
    with tempfile.TemporaryDirectory(prefix="samsa-profile-create-") as tmp:
        times = asyncio.run(run(counts, Path(tmp), prof))
    total = sum(t for _, t in times)
    print(f"created {', '.join(f'{n:,} partitions in {t:.2f} s' for n, t in times)} (profiled total {total:.2f} s)")
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(args.top)
        print(f"\n--- by {key} ---")
        print("\n".join(line for line in buf.getvalue().splitlines() if line.strip())[:20000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
