"""Cluster benchmarks: a real ZooKeeper and three Samsa brokers on this machine (temp dirs).

1. acks=all on a replication-factor-3 topic against acks=1 on replication factor 1 (records/s
   with confluent-kafka, same records), and the ratio;
2. failover: kill -9 of a partition's leader while a producer writes acks=all, until the
   first acknowledged write on the new leader (ms), for the ZooKeeper session timeout given;
3. controller: kill -9 of the broker leading every partition of a 1,000-partition topic, the
   time the controller reports for electing their new leaders, and until every partition's
   new leader is in ZooKeeper.

Usage: .venv/bin/python bench/bench_cluster.py [--records N] [--size B] [--session-ms MS] [--partitions P]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from tests.brokerproc import BrokerProcess, free_port  # noqa: E402
from tests.zk.conftest import launcher_cmd, serving, write_zoo_cfg  # noqa: E402


def start_zookeeper(d: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cfg = write_zoo_cfg(d, port)
    proc = subprocess.Popen(launcher_cmd("start", str(cfg)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not serving(port):
        if time.monotonic() > deadline:
            raise SystemExit("ZooKeeper did not start")
        time.sleep(0.05)
    return proc, port


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21})
    value = b"x" * size
    failed = []
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=lambda e, m: failed.append(e) if e else None)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    p.flush(60)
    dt = time.monotonic() - t0
    if failed:
        raise SystemExit(f"{len(failed)} records failed: {failed[0]}")
    return n / dt


def state(zk: KazooClient, topic: str, p: int) -> dict:
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])


def wait(pred, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--session-ms", type=int, default=6000)
    ap.add_argument("--partitions", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-cluster-") as tmp:
        root = Path(tmp)
        (root / "zk").mkdir()
        zk_proc, zk_port = start_zookeeper(root / "zk")
        chroot = f"/bench-{uuid.uuid4().hex[:6]}"
        brokers = [BrokerProcess(root / f"b{i}", {
            "broker.id": str(i), "zookeeper.connect": f"127.0.0.1:{zk_port}{chroot}",
            "zookeeper.session.timeout.ms": str(args.session_ms), "replica.lag.time.max.ms": "10000",
            "offsets.topic.replication.factor": "3", "auto.leader.rebalance.enable": "false"}) for i in range(3)]
        zk = KazooClient(hosts=f"127.0.0.1:{zk_port}{chroot}")
        try:
            for b in brokers:
                b.start()
            zk.start(10)
            bootstrap = ",".join(b.bootstrap for b in brokers)
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for name, rf, conf in (("rf3", 3, {"min.insync.replicas": "2"}), ("rf1", 1, {})):
                admin.create_topics([NewTopic(name, 1, rf, config=conf)])[name].result(30)

            # 1. throughput
            rate1 = produce(bootstrap, "rf1", args.records, args.size, "1")
            rate3 = produce(bootstrap, "rf3", args.records, args.size, "all")
            print(f"produce {args.records} x {args.size} B: acks=1 RF=1 {rate1:,.0f} rec/s; "
                  f"acks=all RF=3 {rate3:,.0f} rec/s; ratio {rate3 / rate1:.2f}")

            # 2. failover
            leader = state(zk, "rf3", 0)["leader"]
            acked_after: list[float] = []
            stop = threading.Event()
            killed_at = [0.0]

            def writer() -> None:
                p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                              "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                              "topic.metadata.refresh.interval.ms": 1000, "message.timeout.ms": 60000})

                def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
                    if err is None and killed_at[0] and not acked_after:
                        acked_after.append(time.monotonic())

                while not stop.is_set():
                    p.produce("rf3", b"failover", on_delivery=cb)
                    p.poll(0.002)
                p.flush(30)

            t = threading.Thread(target=writer)
            t.start()
            time.sleep(1.0)
            killed_at[0] = time.monotonic()
            brokers[leader].kill9()
            wait(lambda: state(zk, "rf3", 0)["leader"] not in (leader, -1), 120, "a new leader")
            elected = time.monotonic()
            wait(lambda: bool(acked_after), 120, "a write acknowledged after the kill")
            new_leader = state(zk, "rf3", 0)["leader"]
            print(f"failover (session {args.session_ms} ms): kill -9 of leader {leader} -> new leader {new_leader} "
                  f"in ZooKeeper {(elected - killed_at[0]) * 1000:.0f} ms -> first acks=all write acknowledged "
                  f"{(acked_after[0] - killed_at[0]) * 1000:.0f} ms (client metadata refresh 1000 ms)")
            stop.set()
            t.join()
            brokers[leader].start()
            wait(lambda: len(state(zk, "rf3", 0)["isr"]) == 3, 60, "the ISR to heal")

            # 3. controller election time for many partitions, all led by the broker that dies
            ctl = json.loads(zk.get("/controller")[0])["brokerid"]
            victim, other = [b for b in range(3) if b != ctl]
            admin.create_topics([NewTopic("many", args.partitions, replica_assignment=[[victim, other]] * args.partitions)])[
                "many"].result(120)
            wait(lambda: all(state(zk, "many", p)["leader"] == victim for p in range(args.partitions)), 60,
                 "every partition led by the victim")
            t0 = time.monotonic()
            brokers[victim].kill9()
            wait(lambda: all(state(zk, "many", p)["leader"] == other for p in range(args.partitions)), 120,
                 "new leaders for the victim's partitions")
            dt = time.monotonic() - t0
            log = brokers[ctl].log_text()
            m = re.findall(r"Elected leaders for (\d+) partitions \((\d+) offline\) after broker \S+ failed in (\d+) ms",
                           log)
            print(f"controller: broker {victim} led all {args.partitions} partitions; controller election "
                  f"{m[-1][2] if m else '?'} ms for {m[-1][0] if m else '?'} partitions; kill -9 -> all led by "
                  f"broker {other} {dt * 1000:.0f} ms (session timeout {args.session_ms} ms)")
        finally:
            zk.stop()
            for b in brokers:
                b.close()
            zk_proc.terminate()
            zk_proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
