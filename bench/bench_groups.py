"""Consumer-group benchmarks against a real Samsa broker (started here, data in a temp dir):

1. time from 10 members subscribing to a stable assignment (group.initial.rebalance.delay.ms=0);
2. OffsetCommit requests/s from one client connection (6 partitions per request);
3. replay of `__consumer_offsets` holding 1M offset commits at broker start-up.

Usage: .venv/bin/python bench/bench_groups.py [--commits N]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from samsa.coordinator.records import OffsetCommitValue, offset_commit_key, offset_commit_value, partition_for  # noqa: E402
from samsa.protocol.records import build_batch, scan_batches  # noqa: E402
from samsa.storage.config import LogConfig  # noqa: E402
from samsa.storage.log_manager import LogManager  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402
from tests.rawclient import RawClient  # noqa: E402


def time_to_stable(b: BrokerProcess, members: int = 10, partitions: int = 20) -> float:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("stable", partitions, 1)])["stable"].result(10)
    cs = [Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ten", "heartbeat.interval.ms": 200})
          for _ in range(members)]
    t0 = time.monotonic()
    for c in cs:
        c.subscribe(["stable"])
    while True:
        for c in cs:
            c.poll(0.01)
        owned = sorted(tp.partition for c in cs for tp in c.assignment())
        if owned == list(range(partitions)) and all(c.assignment() for c in cs):
            break
        if time.monotonic() - t0 > 60:
            raise SystemExit("no stable assignment in 60 s")
    dt = time.monotonic() - t0
    for c in cs:
        c.close()
    return dt


def commits_per_second(b: BrokerProcess, seconds: float = 3.0) -> float:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("commits", 6, 1)])["commits"].result(10)
    n = 0
    with RawClient(b.bootstrap) as c:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            r = c.request(8, 8, {"group_id": "committer", "generation_id_or_member_epoch": -1, "member_id": "",
                                 "topics": [{"name": "commits", "partitions": [
                                     {"partition_index": p, "committed_offset": n, "committed_metadata": ""}
                                     for p in range(6)]}]})
            assert r.topics[0].partitions[0].error_code == 0, r
            n += 1
        return n / (time.monotonic() - t0)


def replay(workdir: Path, commits: int) -> tuple[float, str]:
    """Write `commits` offset-commit records into a fresh log dir, then time the broker's load."""
    b = BrokerProcess(workdir / "replay")
    b.start()
    assert b.stop() == 0  # creates __consumer_offsets with its 50 partitions
    logs = LogManager([b.log_dir], LogConfig())
    logs.startup()
    groups = [f"group-{i}" for i in range(100)]
    now = int(time.time() * 1000)
    per_batch = 1000
    for start in range(0, commits, per_batch):
        by_partition: dict[int, list] = {}
        for i in range(start, min(start + per_batch, commits)):
            g = groups[i % len(groups)]
            key = offset_commit_key(g, "t", i % 64)
            value = offset_commit_value(OffsetCommitValue(i, -1, "", now, -1))
            by_partition.setdefault(partition_for(g, 50), []).append((key, value, [], now))
        for p, recs in by_partition.items():
            lg = logs.get_or_create_log("__consumer_offsets", p)
            buf = bytearray(build_batch(recs))
            lg.append(buf, scan_batches(buf))
    logs.shutdown()
    t0 = time.monotonic()
    b.start()
    text = ""
    while text.count("started") < 2:
        text = b.log_text()
        time.sleep(0.05)
    wall = time.monotonic() - t0
    line = [l for l in text.splitlines() if "group records" in l][-1]
    b.stop()
    return wall, line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=1_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        b = BrokerProcess(Path(d) / "b")
        b.start()
        try:
            print(f"10 members to a stable assignment: {time_to_stable(b):.2f} s")
            print(f"OffsetCommit (6 partitions each), one connection: {commits_per_second(b):,.0f} requests/s")
        finally:
            b.close()
        wall, line = replay(Path(d), args.commits)
        print(f"start-up with {args.commits:,} commits in __consumer_offsets: ready in {wall:.1f} s")
        print("  broker log: " + re.sub(r"^\[[^]]*\] ", "", line))


if __name__ == "__main__":
    main()
