"""Samsa beside Apache Kafka on this machine: the same workloads, alternating, a fresh broker each round.

    PYTHONPATH=. .venv/bin/python bench/vs_kafka.py [--rounds 3] [--quick] [--only one|cluster|e2e] [--e2e-probe python|rdkafka]

The peer is Apache Kafka 4.4 in KRaft combined mode (one JVM, broker and controller), started
from Maven Central's jars (`scripts/kafka-jars.sh tools`) the way `kafka-server-start.sh`
does (1 GiB heap, G1, 20 ms pause goal). Samsa is `samsa broker start` with its defaults. Both
keep Kafka's default durability: no fsync per write (`log.flush.interval.messages` unset),
the page cache and replication are what keep data.

The clients are native, so that the broker is the limit, not a Python client:
- librdkafka's `rdkafka_performance` (C; the librdkafka 2.12 that compat/node-rdkafka builds
  from source), for produce, consume and end-to-end latency;
- Kafka's `kafka-producer-perf-test` (Java; org.apache.kafka.tools.ProducerPerformance).

Workloads, each round, for each broker (which goes first alternates):
- ready: from the process start until a Metadata request is answered (s), RSS idle (MiB);
- produce 100 B acks=1 and 1 KiB acks=all (linger 5 ms), to 1 partition and to 100;
- consume both 1-partition topics from the beginning;
- end to end at 10,000 msg/s, linger 0: p50, p99, p99.9 (ms), from the timestamps each
  message carries, read back by rdkafka_performance; the producer sleeps between messages
  (`--e2e-probe rdkafka`: rdkafka_performance -r, which spins a core);
- the Java producer, 1 KiB acks=all, 1 partition, and the Java consumer reading it back;
- RSS at its highest during the workloads (MiB);
- 1,000 partitions: create (until every one has a leader, and until each has taken a first
  write), produce 100 B over all of them,
  then a clean restart until every partition has a leader again (s).

Then three brokers of each on one ZooKeeper (Kafka 3.9.2, the last line that runs on
ZooKeeper, `kafka-jars.sh kafka39`; each under its own chroot), alternating: ready time, RSS,
1 KiB acks=1 to RF=1 and acks=all to RF=3 (min.insync.replicas 2, 1 and 100 partitions),
consume, and the acks=all RF=3 / acks=1 RF=1 ratio (Samsa's goal: >= 0.8).

Each round also runs the produce rows against librdkafka's in-process mock broker: the
native client's own ceiling, which Samsa's produce should reach within 0.9x.

Printed: each round's numbers, then medians and the ratio Samsa/Kafka per row (throughput:
higher is better; latency, time and memory: lower is better).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402
from tests.kafkaproc import ApacheKafka, JarsMissing, kafka_classpath  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PERF = REPO / "compat/node-rdkafka/node_modules/node-rdkafka/deps/librdkafka/examples/rdkafka_performance"
# Debian's libjemalloc2 (scripts/install-deps.sh): the consume rows run a second time with the
# client on it. librdkafka's fetch thread allocates each message and the application thread
# frees it; on glibc's malloc the two contend for one arena's lock, the more so the sooner the
# broker answers (perf: __lll_lock_wait_private under calloc and _int_free), so the glibc rows
# measure the client as much as the broker.
JEMALLOC = Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def metadata_ready(bootstrap: str, timeout: float) -> bool:
    """A Metadata request answered (the broker is serving clients); False at once while nothing
    listens on the port."""
    host, port = bootstrap.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        time.sleep(0.01)  # polling for the port: there is no event to await across processes
        return False
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:
        return False


def wait_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 300) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=10).topics.get(topic)
        except Exception:
            md = None
        if md is not None and md.error is None and len(md.partitions) == partitions and all(
                p.leader >= 0 and p.error is None for p in md.partitions.values()):
            return
        time.sleep(0.05)
    raise SystemExit(f"{topic}: not every one of {partitions} partitions has a leader after {timeout} s")


class Side:
    name = ""
    pid = 0
    bootstrap = ""

    def start(self) -> float:
        """Start; the seconds until it answers Metadata."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class SamsaSide(Side):
    name = "samsa"

    def __init__(self, workdir: Path) -> None:
        self.broker = BrokerProcess(workdir)
        self.bootstrap = self.broker.bootstrap

    def start(self) -> float:
        t0 = time.monotonic()
        self.broker.start(timeout=120)
        assert self.broker.proc is not None
        self.pid = self.broker.proc.pid
        while not metadata_ready(self.bootstrap, 5):
            pass
        return time.monotonic() - t0

    def stop(self) -> None:
        self.broker.stop(120)


class KafkaSide(Side):
    """Apache Kafka 4.4, KRaft combined mode, one node (tests/kafkaproc.py), with a 1 GiB heap
    as kafka-server-start.sh gives it."""

    name = "kafka"

    def __init__(self, workdir: Path, cp: str) -> None:
        self.kafka = ApacheKafka(workdir, cp, heap="1G")
        self.bootstrap = self.kafka.bootstrap

    def start(self) -> float:
        t0 = time.monotonic()
        self.kafka.start()
        self.pid = self.kafka.pid
        while not metadata_ready(self.bootstrap, 5):
            pass
        return time.monotonic() - t0

    def stop(self) -> None:
        self.kafka.stop()


class PeakRss:
    """The highest RSS (summed over the processes) while the block runs, sampled every 100 ms."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.peak = max(self.peak, sum(rss_mib(p) for p in self.pids))
            except OSError:
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def create(bootstrap: str, topic: str, partitions: int, rf: int = 1, config: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept alive until the future resolves)
    admin.create_topics([NewTopic(topic, partitions, rf, config=config or {})])[topic].result(120)
    wait_leaders(bootstrap, topic, partitions)
    return time.monotonic() - t0


RATE = re.compile(r"(\d+) msgs/s")


def perf(args: list[str], timeout: float = 600, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(PERF), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
    if proc.returncode != 0:
        raise SystemExit(f"rdkafka_performance {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return proc.stdout + proc.stderr


def produce(bootstrap: str, topic: str, size: int, count: int, acks: int, linger: int = 5,
            extra: list[str] | None = None) -> float:
    """Records/s acknowledged, from rdkafka_performance's final line."""
    out = perf(["-P", "-t", topic, *(["-b", bootstrap] if bootstrap else []), "-s", str(size), "-c", str(count),
                "-a", str(acks), "-X", f"linger.ms={linger}", "-X", "queue.buffering.max.messages=1000000", "-q",
                *(extra or [])])
    last = [ln for ln in out.splitlines() if "messages produced" in ln][-1]
    if f"{count} delivered" not in last:
        raise SystemExit(f"not every record was acknowledged: {last}")
    return float(RATE.findall(last)[-1])


def consume(bootstrap: str, topic: str, count: int, env: dict[str, str] | None = None) -> float:
    out = perf(["-C", "-t", topic, "-p", "0", "-b", bootstrap, "-o", "beginning", "-c", str(count), "-q",
                "-X", "fetch.queue.backoff.ms=10"], env=env)
    last = [ln for ln in out.splitlines() if "consumed" in ln][-1]
    return float(RATE.findall(last)[-1])


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, workdir: Path,
               probe: str = "python") -> tuple[float, float, float]:
    """p50, p99, p99.9 (ms) of produce-to-consume at `rate` msg/s, linger 0, acks=1.

    The consumer is rdkafka_performance in latency mode: each message carries
    "LATENCY:<wall clock µs>" and the consumer writes now minus that, per message. The producer
    is `e2e_producer` below (probe "python"), which sleeps between messages, or
    rdkafka_performance -r (probe "rdkafka"), which paces by polling with a 0 ms timeout when
    less than a millisecond is left: it spins a whole core of this 2-core machine, and the
    latency then measures a saturated machine more than the broker."""
    lat_file = workdir / f"lat-{topic}.txt"
    count = int(rate * seconds)
    consumer = subprocess.Popen([str(PERF), "-C", "-l", "-A", str(lat_file), "-t", topic, "-p", "0", "-b", bootstrap,
                                 "-o", "end", "-c", str(count), "-q", "-X", "fetch.wait.max.ms=100",
                                 "-X", "fetch.queue.backoff.ms=10"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2)  # the consumer has its position at the end (no event to await across the process)
    if probe == "rdkafka":
        perf(["-P", "-l", "-t", topic, "-p", "0", "-b", bootstrap, "-s", "100", "-c", str(count), "-r", str(rate),
              "-a", "1", "-X", "linger.ms=0", "-q"])
    else:
        subprocess.run([sys.executable, __file__, "--e2e-producer", bootstrap, topic, str(rate), str(count)],
                       check=True, timeout=seconds * 4 + 60)
    try:
        consumer.wait(60)
    except subprocess.TimeoutExpired:
        consumer.kill()
        consumer.wait()
    us = sorted(int(x) for x in lat_file.read_text().split() if x.strip())
    if len(us) < count * 0.99:
        raise SystemExit(f"end to end: {len(us)} of {count} latencies")
    pick = lambda q: us[min(len(us) - 1, int(q * len(us)))] / 1000  # noqa: E731
    return pick(0.50), pick(0.99), pick(0.999)


def e2e_producer(bootstrap: str, topic: str, rate: int, count: int) -> None:
    """`count` 100 B messages at `rate` msg/s to partition 0 (acks=1, linger 0), one produce call
    each, paced by sleeping; each payload is "LATENCY:<wall clock µs>" padded to 100 B, as
    rdkafka_performance -l writes it, so that its consumer reads the latency back. The
    connection and the topic's metadata are in place before the first one."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1})
    p.list_topics(topic, timeout=30)  # connected, with the leader known, before the first timed message
    interval = 1.0 / rate
    due = time.perf_counter()
    for _ in range(count):
        value = b"LATENCY:%d" % (time.time_ns() // 1000)
        while True:
            try:
                p.produce(topic, value.ljust(100, b"\0"), partition=0)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
        due += interval
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
    if p.flush(60):
        raise SystemExit("e2e producer: messages not delivered in 60 s")


def java_produce(cp: str, bootstrap: str, topic: str, size: int, count: int, acks: str) -> float:
    proc = subprocess.run(["java", "-Xmx512M", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                           "--num-records", str(count), "--record-size", str(size), "--throughput", "-1",
                           "--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5",
                           "batch.size=262144"], capture_output=True, text=True, timeout=600)
    last = [ln for ln in proc.stdout.splitlines() if "records sent" in ln]
    if proc.returncode != 0 or not last:
        raise SystemExit(f"kafka-producer-perf-test failed: {proc.stdout[-500:]}{proc.stderr[-800:]}")
    return float(re.search(r"([\d.]+) records/sec", last[-1]).group(1))  # type: ignore[union-attr]


def first_writes(bootstrap: str, topic: str, partitions: int) -> float:
    """Seconds until one record to each partition is acknowledged: a topic is usable when its
    partitions take writes, not when Metadata names their leaders (Kafka's KRaft broker updates
    its metadata before it creates the logs)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "message.timeout.ms": 120000})
    failed: list[Any] = []
    t0 = time.monotonic()
    for i in range(partitions):
        p.produce(topic, b"first", partition=i, on_delivery=lambda e, m: failed.append(e) if e else None)
    if p.flush(120) or failed:
        raise SystemExit(f"{topic}: first writes failed: {failed[:3]}")
    return time.monotonic() - t0


def java_consume(cp: str, bootstrap: str, topic: str, count: int) -> float:
    """kafka-consumer-perf-test's records/s while fetching (its fetch.nMsg.sec: the group join excluded)."""
    proc = subprocess.run(["java", "-Xmx512M", "-cp", cp, "org.apache.kafka.tools.ConsumerPerformance",
                           "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
                           "--timeout", "60000", "--group", f"perf-{topic}"], capture_output=True, text=True,
                          timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or len(lines) < 2:
        raise SystemExit(f"kafka-consumer-perf-test failed: {proc.stdout[-500:]}{proc.stderr[-800:]}")
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    return float(dict(zip(header, values, strict=False))["fetch.nMsg.sec"])


def mock_round(quick: bool) -> dict[str, float]:
    """The native client's own ceiling: rdkafka_performance against librdkafka's in-process mock
    broker (`test.mock.num.brokers=1`), the same produce rows."""
    n100, n1k = (300_000, 100_000) if quick else (2_000_000, 500_000)
    mock = ["-X", "test.mock.num.brokers=1"]
    return {"produce 100 B acks=1, 1 part. rec/s": produce("", "m100", 100, n100, 1, extra=mock),
            "produce 1 KiB acks=all, 1 part. rec/s": produce("", "m1k", 1024, n1k, -1, extra=mock)}


def file_write_ceiling(workdir: Path, nbytes: int) -> float:
    """Bytes/s of the simplest possible log append: 1 MiB pwrites into a new file (no fsync,
    as both brokers), in the file system the brokers write to. The mock broker writes nothing;
    any broker that keeps the records (Kafka's FileChannel.write, Samsa's pwrite) copies each
    byte into the page cache, which this machine does at a rate well below its memcpy."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "write-ceiling.bin"
    chunk = os.urandom(1 << 20)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        t0 = time.perf_counter()
        for pos in range(0, nbytes, len(chunk)):
            os.pwrite(fd, chunk, pos)
        return nbytes / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()


def one_round(side: Side, cp: str, workdir: Path, quick: bool, probe: str = "python") -> dict[str, float]:
    n100, n1k = (300_000, 100_000) if quick else (2_000_000, 500_000)
    row: dict[str, float] = {}
    row["ready s"] = side.start()
    try:
        time.sleep(1)
        row["RSS idle MiB"] = rss_mib(side.pid)
        b = side.bootstrap
        with PeakRss(side.pid) as peak:
            for parts in (1, 100):
                create(b, f"p100-{parts}", parts)
                create(b, f"p1k-{parts}", parts)
                row[f"produce 100 B acks=1, {parts} part. rec/s"] = produce(b, f"p100-{parts}", 100, n100, 1)
                row[f"produce 1 KiB acks=all, {parts} part. rec/s"] = produce(b, f"p1k-{parts}", 1024, n1k, -1)
            row["consume 100 B rec/s"] = consume(b, "p100-1", n100)
            row["consume 1 KiB rec/s"] = consume(b, "p1k-1", n1k)
            if JEMALLOC.exists():
                je = {"LD_PRELOAD": str(JEMALLOC)}
                row["consume 100 B, client on jemalloc rec/s"] = consume(b, "p100-1", n100, je)
                row["consume 1 KiB, client on jemalloc rec/s"] = consume(b, "p1k-1", n1k, je)
            create(b, "e2e", 1)
            p50, p99, p999 = end_to_end(b, "e2e", 10_000, 5 if quick else 15, workdir, probe)
            row["e2e p50 ms"], row["e2e p99 ms"], row["e2e p99.9 ms"] = p50, p99, p999
            create(b, "java", 1)
            row["Java producer 1 KiB acks=all rec/s"] = java_produce(cp, b, "java", 1024, n1k, "all")
            row["Java consumer 1 KiB rec/s"] = java_consume(cp, b, "java", n1k)
            row["1,000 partitions: create s"] = create(b, "wide", 1000)
            row["1,000 partitions: create until each takes a write s"] = (
                row["1,000 partitions: create s"] + first_writes(b, "wide", 1000))
            row["1,000 partitions: produce 100 B acks=1 rec/s"] = produce(b, "wide", 100, n100, 1)
        row["RSS loaded MiB"] = peak.peak
    finally:
        side.stop()
    t0 = time.monotonic()
    side.start()
    try:
        wait_leaders(side.bootstrap, "wide", 1000)
        row["1,000 partitions: restart s"] = time.monotonic() - t0
    finally:
        side.stop()
    return row


# --------------------------------------------------------------------------- 3 brokers on one ZooKeeper


class Cluster:
    """Three brokers of one kind under their own chroot of a shared ZooKeeper."""

    def __init__(self, name: str, root: Path, zk: str, cp39: str) -> None:
        self.name = name
        overrides = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                     "transaction.state.log.min.isr": "2"}
        chroot = f"{zk}/{name}-{uuid.uuid4().hex[:6]}"
        if name == "samsa":
            self.samsa = [BrokerProcess(root / f"b{i}", {"broker.id": str(i), "zookeeper.connect": chroot,
                                                          **overrides}) for i in range(3)]
            self.bootstraps = [b.bootstrap for b in self.samsa]
        else:
            self.kafka = [ApacheKafka(root / f"b{i}", cp39, heap="1G", zookeeper=chroot, broker_id=i,
                                      overrides=overrides) for i in range(3)]
            self.bootstraps = [k.bootstrap for k in self.kafka]
        self.bootstrap = ",".join(self.bootstraps)
        self.pids: list[int] = []

    def start(self) -> float:
        """Start the three; the seconds until Metadata lists all three brokers."""
        t0 = time.monotonic()
        if self.name == "samsa":
            for b in self.samsa:
                b.start(timeout=120)
            self.pids = [b.proc.pid for b in self.samsa if b.proc is not None]
        else:
            for k in self.kafka:
                k.start()
            self.pids = [k.pid for k in self.kafka]
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while True:
            try:
                if len(admin.list_topics(timeout=5).brokers) == 3:
                    return time.monotonic() - t0
            except Exception:
                pass
            time.sleep(0.05)

    def stop(self) -> None:
        for b in getattr(self, "samsa", []):
            b.stop(120)
        for k in getattr(self, "kafka", []):
            k.stop()


def e2e_round(side: Side, workdir: Path, quick: bool, first: str) -> dict[str, float]:
    """`--only e2e`: the end-to-end rows alone, with both producers (`first` goes first), on a
    fresh broker."""
    row: dict[str, float] = {}
    side.start()
    try:
        create(side.bootstrap, "e2e", 1)
        for probe in (first, "rdkafka" if first == "python" else "python"):
            p50, p99, p999 = end_to_end(side.bootstrap, "e2e", 10_000, 5 if quick else 15, workdir, probe)
            for q, v in (("p50", p50), ("p99", p99), ("p99.9", p999)):
                row[f"e2e {q} ms, {probe} producer"] = v
    finally:
        side.stop()
    return row


def cluster_round(c: Cluster, quick: bool) -> dict[str, float]:
    n = 100_000 if quick else 500_000
    row: dict[str, float] = {"3 brokers: ready s": c.start()}
    try:
        time.sleep(1)
        row["3 brokers: RSS idle MiB"] = sum(rss_mib(p) for p in c.pids)
        b = c.bootstrap
        with PeakRss(*c.pids) as peak:
            create(b, "rf1", 1)
            create(b, "rf3", 1, rf=3, config={"min.insync.replicas": "2"})
            create(b, "rf3-100", 100, rf=3, config={"min.insync.replicas": "2"})
            row["3 brokers: 1 KiB acks=1 RF=1 rec/s"] = produce(b, "rf1", 1024, n, 1)
            row["3 brokers: 1 KiB acks=all RF=3 rec/s"] = produce(b, "rf3", 1024, n, -1)
            row["3 brokers: 1 KiB acks=all RF=3, 100 part. rec/s"] = produce(b, "rf3-100", 1024, n, -1)
            row["3 brokers: consume RF=3 rec/s"] = consume(b, "rf3", n)
        row["3 brokers: RSS loaded MiB"] = peak.peak
        row["3 brokers: acks=all RF=3 / acks=1 RF=1"] = (row["3 brokers: 1 KiB acks=all RF=3 rec/s"]
                                                        / row["3 brokers: 1 KiB acks=1 RF=1 rec/s"])
    finally:
        c.stop()
    return row


def start_zookeeper(d: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.brokerproc import free_port
    from tests.zk.conftest import launcher_cmd, serving, write_zoo_cfg

    d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = subprocess.Popen(launcher_cmd("start", str(write_zoo_cfg(d, port))), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not serving(port):
        if time.monotonic() > deadline:
            raise SystemExit("ZooKeeper did not start")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{port}"


HIGHER_IS_BETTER = ("rec/s",)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer records (a smoke run, not a measurement)")
    ap.add_argument("--only", choices=("one", "cluster", "e2e"),
                    help="only the one-broker or only the 3-broker comparison, or only the end-to-end rows "
                         "(with both producers)")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' directories (their logs)")
    ap.add_argument("--e2e-probe", choices=("python", "rdkafka"), default="python",
                    help="the end-to-end rows' producer: python sleeps between messages (default); rdkafka is "
                         "rdkafka_performance -r, which spins a core to pace itself")
    ap.add_argument("--e2e-producer", nargs=4, metavar=("BOOTSTRAP", "TOPIC", "RATE", "COUNT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.e2e_producer:
        bs, topic, rate, count = args.e2e_producer
        e2e_producer(bs, topic, int(rate), int(count))
        return
    if not PERF.exists():
        raise SystemExit(f"vs_kafka: {PERF} is missing: run scripts/install-deps.sh (it builds compat/node-rdkafka)")
    try:
        cp = kafka_classpath("tools")
        cp39 = kafka_classpath("kafka39") if args.only not in ("one", "e2e") else ""
    except JarsMissing as e:
        raise SystemExit(f"vs_kafka: Kafka's jars are missing: {e}") from None
    rows: dict[str, dict[str, list[float]]] = {"samsa": {}, "kafka": {}, "mock": {}, "machine": {}}
    base = Path(tempfile.mkdtemp(prefix="vs-kafka-"))
    zk_proc = None
    try:
        if args.only == "e2e":
            for r in range(args.rounds):
                for name in (["samsa", "kafka"] if r % 2 == 0 else ["kafka", "samsa"]):
                    d = base / f"{name}-{r}"
                    side_: Side = SamsaSide(d) if name == "samsa" else KafkaSide(d, cp)
                    print(f"==> round {r + 1}: {name}, end to end", flush=True)
                    _record(rows[name], e2e_round(side_, d, args.quick, "python" if r % 2 == 0 else "rdkafka"))
                    shutil.rmtree(d, ignore_errors=True)
        elif args.only != "cluster":
            for r in range(args.rounds):
                for name in (["samsa", "kafka"] if r % 2 == 0 else ["kafka", "samsa"]):
                    d = base / f"{name}-{r}"
                    side: Side = SamsaSide(d) if name == "samsa" else KafkaSide(d, cp)
                    print(f"==> round {r + 1}: {name}, one broker", flush=True)
                    _record(rows[name], one_round(side, cp, d, args.quick, args.e2e_probe))
                print(f"==> round {r + 1}: librdkafka's mock broker", flush=True)
                _record(rows["mock"], mock_round(args.quick))
                _record(rows["machine"], {CEILING: file_write_ceiling(base / "ceiling", 500 << 20) / 2**20})
        if args.only not in ("one", "e2e"):
            zk_proc, zk = start_zookeeper(base / "zk")
            for r in range(args.rounds):
                for name in (["samsa", "kafka"] if r % 2 == 0 else ["kafka", "samsa"]):
                    print(f"==> round {r + 1}: {name}, 3 brokers (Kafka 3.9 on ZooKeeper)", flush=True)
                    _record(rows[name], cluster_round(Cluster(name, base / f"{name}-c{r}", zk, cp39), args.quick))
                _record(rows["machine"], {CEILING: file_write_ceiling(base / "ceiling", 500 << 20) / 2**20})
    finally:
        if zk_proc is not None:
            zk_proc.terminate()
            zk_proc.wait(10)
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"brokers' directories kept in {base}")
    print(f"\nmedians of {args.rounds} rounds (Samsa / Kafka: > 1 is Samsa ahead for rec/s, < 1 for the others)")
    print(f"{'':52} {'samsa':>14} {'kafka':>14} {'ratio':>7}")
    for k in rows["samsa"]:
        s, k_ = statistics.median(rows["samsa"][k]), statistics.median(rows["kafka"][k])
        print(f"{k:52} {s:>14,.2f} {k_:>14,.2f} {s / k_ if k_ else float('nan'):>7.2f}")
    if rows["mock"]:
        print("\nthe native client's ceiling (librdkafka's in-process mock broker); Samsa / mock:")
        for k, v in rows["mock"].items():
            s, m = statistics.median(rows["samsa"][k]), statistics.median(v)
            print(f"{k:52} {s:>14,.2f} {m:>14,.2f} {s / m:>7.2f}")
    if rows["machine"]:
        _print_ceiling(rows)
    print(f"\nmachine: {os.cpu_count()} cores; librdkafka 2.12 rdkafka_performance; Kafka 4.4.0 (KRaft, 1 GiB heap); "
          "Kafka 3.9.2 (ZooKeeper, 1 GiB heap each); no fsync per write on either side")


CEILING = "file write ceiling MiB/s"


def _print_ceiling(rows: dict[str, dict[str, list[float]]]) -> None:
    """Each rate that writes 1 KiB records, against what this machine's page cache takes."""
    ceiling = statistics.median(rows["machine"][CEILING])
    print(f"\nthis machine's file write ceiling (500 MiB in 1 MiB pwrites into a new file, median of "
          f"{len(rows['machine'][CEILING])}): {ceiling:,.0f} MiB/s = {ceiling * 1024:,.0f} records/s of 1 KiB "
          "(record overhead not counted), the bound on any broker that writes what it receives;")
    writes = [("the mock broker (writes nothing)", "mock", "produce 1 KiB acks=all, 1 part. rec/s", 1),
              ("Samsa", "samsa", "produce 1 KiB acks=all, 1 part. rec/s", 1),
              ("Kafka", "kafka", "produce 1 KiB acks=all, 1 part. rec/s", 1),
              ("Samsa, 3 brokers, RF=1", "samsa", "3 brokers: 1 KiB acks=1 RF=1 rec/s", 1),
              ("Samsa, 3 brokers, RF=3 (3 copies written)", "samsa", "3 brokers: 1 KiB acks=all RF=3 rec/s", 3),
              ("Kafka 3.9, 3 brokers, RF=3 (3 copies written)", "kafka", "3 brokers: 1 KiB acks=all RF=3 rec/s", 3)]
    for what, side, k, copies in writes:
        if k in rows[side]:
            rate = statistics.median(rows[side][k])
            print(f"  {what}: {rate * copies / 1024:,.0f} MiB/s written, {rate * copies / (ceiling * 1024):.2f} "
                  "of the ceiling")


def _record(into: dict[str, list[float]], row: dict[str, float]) -> None:
    for k, v in row.items():
        into.setdefault(k, []).append(v)
    print("    " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
