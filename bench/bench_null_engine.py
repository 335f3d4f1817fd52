"""The network path alone: the same broker on the null engine against the on-disk engine.

One broker process per engine, each started fresh by this script and measured in turn (the
engines alternate each round, so a change in the machine's load hits both alike):

    disk  the broker as it ships: `Log`, segments on disk in Kafka's layout
    null  the same broker whose LogManager opens `NullLog`s (samsa/storage/null_log.py):
          offsets and the retained appends in memory, no file, no index, no flush

Workload, with confluent-kafka, one partition, replication factor 1:

    produce  --records records of --size bytes, acks=1, to topic `produce` (records/s, until
             the last delivery report)
    fetch    as many records written to topic `fetch` (not timed), then read back from offset 0
             by a consumer with direct assignment (records/s from the first record received:
             the consumer's start-up is not counted)

Besides records/s, the broker's CPU time per phase (utime + stime from /proc) is reported per
million records: at small records the client is the ceiling and both engines reach it, while
the broker's CPU shows what the storage work costs. Ratios are null / disk, of the medians
over the rounds and of the best round (on a shared machine the best is the least disturbed).

The null engine keeps only the last append of topic `produce` (one copy of each batch, then
dropped: the least it can do and still answer a fetch), and every append of the `fetch*` topics, so
that its fetch phase reads back the same records as the disk broker's. It answers a read from
memory: the bytes are copied into the response where the disk engine sendfiles them from the
page cache, and one read returns at most one append (the disk engine: up to the fetch's byte
limit within a segment).

How it is started: this script re-runs itself as the broker (`--serve null|disk CONFIG`) and,
for null, hands the broker's LogManager `NullLog.open` as its log factory -- a benchmark hook,
not a broker config key.

Usage: .venv/bin/python bench/bench_null_engine.py [--records N] [--size B] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENGINES = ("disk", "null")
_TICKS = os.sysconf("SC_CLK_TCK")


# -- the broker side ------------------------------------------------------------------------------


def serve(engine: str, config: str, retain_bytes: int) -> int:
    """Run one broker in this process on `engine` (the child side of this script)."""
    if engine == "null":
        import samsa.server.broker as broker_module
        from samsa.storage.log_manager import LogManager
        from samsa.storage.null_log import NullLog

        def factory(directory: Path, config: Any, **kwargs: Any) -> NullLog:
            retain = retain_bytes if directory.name.startswith("fetch-") else 0
            return NullLog.open(directory, config, retain_bytes=retain, **kwargs)

        class NullLogManager(LogManager):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, log_factory=factory, **kwargs)

        # The broker builds its LogManager in open_storage(); this swaps in the null engine's
        # for this process only.
        broker_module.LogManager = NullLogManager  # type: ignore[misc]
    from samsa.cli.main import main

    return main(["broker", "start", config, "--log-level", "WARNING"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    def __init__(self, engine: str, workdir: Path, retain_bytes: int) -> None:
        self.engine = engine
        self.workdir = workdir
        self.port = free_port()
        workdir.mkdir(parents=True)
        config = workdir / "server.properties"
        config.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\nlog.dirs={workdir / 'data'}\n"
                          "num.partitions=1\nauto.create.topics.enable=true\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.log = open(workdir / "broker.log", "wb")  # noqa: SIM115  (the broker writes it until stop())
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", engine, str(config),
                                      "--retain-bytes", str(retain_bytes)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{engine} broker exited: {(workdir / 'broker.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{engine} broker did not listen") from None
                time.sleep(0.05)  # polling a port: there is no event to await across processes

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()


# -- the client side ------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1 << 21})
    value = os.urandom(size)
    failed: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                p.poll(0.005)
        if i % 10000 == 0:
            p.poll(0)
    if p.flush(120):
        raise SystemExit("produce did not finish")
    dt = time.perf_counter() - t0
    if failed:
        raise SystemExit(f"{len(failed)} records failed: {failed[0]}")
    return dt


def fetch(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t0 = 0.0
    deadline = time.monotonic() + 120
    while got < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"fetch read {got} of {n} records")
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                if got == 0:
                    t0 = time.perf_counter()  # from the first record: not the consumer's start-up
                got += 1
    dt = time.perf_counter() - t0
    c.close()
    return dt


def one_round(engine: str, args: argparse.Namespace, base: Path) -> dict[str, float]:
    b = Broker(engine, base / f"{engine}-{uuid.uuid4().hex[:6]}", retain_bytes=args.records * (args.size + 100) * 2)
    try:
        for topic in ("fetch-warmup", "produce", "fetch"):
            create_topic(b.bootstrap, topic)
        produce(b.bootstrap, "fetch-warmup", 20_000, args.size)
        fetch(b.bootstrap, "fetch-warmup", 20_000)
        cpu0 = b.cpu_seconds()
        produce_s = produce(b.bootstrap, "produce", args.records, args.size)
        cpu1 = b.cpu_seconds()
        produce(b.bootstrap, "fetch", args.records, args.size)
        cpu2 = b.cpu_seconds()
        fetch_s = fetch(b.bootstrap, "fetch", args.records)
        cpu3 = b.cpu_seconds()
    finally:
        b.stop()
        shutil.rmtree(b.workdir, ignore_errors=True)  # a round writes 2 x records x size to disk
    per_m = 1e6 / args.records
    return {"produce": args.records / produce_s, "fetch": args.records / fetch_s,
            "produce_cpu": (cpu1 - cpu0) * per_m, "fetch_cpu": (cpu3 - cpu2) * per_m}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=512, help="record value bytes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--serve", choices=ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--retain-bytes", type=int, default=0, help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.serve:
        return serve(args.serve, rest[0], args.retain_bytes)

    results: dict[str, list[dict[str, float]]] = {e: [] for e in ENGINES}
    with tempfile.TemporaryDirectory(prefix="bench-null-") as tmp:
        for r in range(args.rounds):
            for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
                res = one_round(engine, args, Path(tmp))
                results[engine].append(res)
                print(f"round {r + 1} {engine:4}: produce {res['produce']:>10,.0f} rec/s"
                      f" ({res['produce_cpu']:.2f} broker CPU s/M rec), fetch {res['fetch']:>10,.0f} rec/s"
                      f" ({res['fetch_cpu']:.2f} broker CPU s/M rec)", flush=True)

    def med(engine: str, key: str) -> float:
        return statistics.median(x[key] for x in results[engine])

    def best(engine: str, key: str) -> float:  # the least disturbed round: highest rate, least CPU
        values = [x[key] for x in results[engine]]
        return min(values) if key.endswith("_cpu") else max(values)

    print(f"\n{args.records:,} records x {args.size} B, acks=1, one partition, {args.rounds} rounds"
          " (CPU: the broker's, seconds per million records)")
    print(f"{'':16}{'disk median':>14}{'null median':>14}{'null/disk':>10}{'disk best':>14}{'null best':>14}"
          f"{'null/disk':>10}")
    for key, label in (("produce", "produce rec/s"), ("fetch", "fetch rec/s"),
                       ("produce_cpu", "produce CPU"), ("fetch_cpu", "fetch CPU")):
        d, n, bd, bn = med("disk", key), med("null", key), best("disk", key), best("null", key)
        print(f"{label:16}{d:>14,.2f}{n:>14,.2f}{n / d if d else float('nan'):>10.2f}"
              f"{bd:>14,.2f}{bn:>14,.2f}{bn / bd if bd else float('nan'):>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
