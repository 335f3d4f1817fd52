"""Where the CPU goes on three brokers: 1 KiB acks=1 to RF=1 against acks=all to RF=3 (issue 19's
"acks=all RF=3 at >= 0.8x of acks=1 RF=1"), with every process's CPU time counted.

    PYTHONPATH=. .venv/bin/python bench/cluster_cpu.py [--rounds 3] [--records 1000000]

Each round starts a real ZooKeeper and three fresh Samsa brokers (as bench/vs_kafka.py's cluster
rows), creates `rf1` (one partition, RF=1) and `rf3` (one partition, RF=3, min.insync.replicas
2), and runs librdkafka's rdkafka_performance producing `--records` records of 1 KiB (linger 5
ms) to each, acks=1 to rf1 and acks=all to rf3. Printed per run: records/s; the client's and each
broker's CPU seconds (user/system, from /proc and the client's rusage) with each broker's role;
all of it per record; and the cores in use (CPU seconds over wall time). Then medians, and
the ratio a CPU-bound machine allows: RF=1's CPU per record over RF=3's (with every core busy in
both, acks=all RF=3 / acks=1 RF=1 cannot pass it).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import vs_kafka as V  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def run(c: V.Cluster, topic: str, acks: int, n: int) -> dict[str, Any]:
    leader = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    before = [cpu(p) for p in c.pids]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rate = V.produce(c.bootstrap, topic, 1024, n, acks)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = [cpu(p) for p in c.pids]
    client = (ru1.ru_utime - ru0.ru_utime, ru1.ru_stime - ru0.ru_stime)
    brokers = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True)]
    total = sum(client) + sum(u + s for u, s in brokers)
    return {"rate": rate, "wall": wall, "client": client, "brokers": brokers, "leader": leader,
            "us/rec": total / n * 1e6, "cores": total / wall}


def show(name: str, r: dict[str, Any], n: int) -> None:
    roles = "  ".join(f"b{i}{'(leader)' if i == r['leader'] else ''} {u:.2f}/{s:.2f}"
                      for i, (u, s) in enumerate(r["brokers"]))
    print(f"    {name}: {r['rate']:>9,.0f} rec/s; CPU s user/system: client {r['client'][0]:.2f}/{r['client'][1]:.2f}"
          f"  {roles}; {r['us/rec']:.2f} us/record, {r['cores']:.2f} cores", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    a = ap.parse_args()
    if not V.PERF.exists():
        raise SystemExit(f"{V.PERF} is missing: run scripts/install-deps.sh")
    rows: dict[str, list[float]] = {}
    base = Path(tempfile.mkdtemp(prefix="cluster-cpu-"))
    zk_proc, zk = V.start_zookeeper(base / "zk")
    try:
        for i in range(a.rounds):
            print(f"==> round {i + 1}", flush=True)
            c = V.Cluster("samsa", base / f"r{i}", zk, "")
            c.start()
            try:
                V.create(c.bootstrap, "rf1", 1)
                V.create(c.bootstrap, "rf3", 1, rf=3, config={"min.insync.replicas": "2"})
                one, three = run(c, "rf1", 1, a.records), run(c, "rf3", -1, a.records)
            finally:
                c.stop()
                shutil.rmtree(base / f"r{i}", ignore_errors=True)  # (4 GB a round)
            show("acks=1 RF=1  ", one, a.records)
            show("acks=all RF=3", three, a.records)
            for k, v in {"acks=1 RF=1 rec/s": one["rate"], "acks=all RF=3 rec/s": three["rate"],
                         "ratio": three["rate"] / one["rate"], "RF=1 us/record": one["us/rec"],
                         "RF=3 us/record": three["us/rec"], "RF=1 cores": one["cores"], "RF=3 cores": three["cores"],
                         "CPU-bound ratio (RF=1 us / RF=3 us)": one["us/rec"] / three["us/rec"]}.items():
                rows.setdefault(k, []).append(v)
    finally:
        zk_proc.terminate()
        zk_proc.wait(10)
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nmedians of {a.rounds} rounds ({a.records:,} records of 1 KiB, {os.cpu_count()} cores):")
    for k, v in rows.items():
        print(f"  {k:40} {statistics.median(v):>12,.2f}   (range {min(v):,.2f} - {max(v):,.2f})")


if __name__ == "__main__":
    main()
