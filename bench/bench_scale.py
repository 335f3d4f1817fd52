"""Scale benchmark: many partitions on one node (embedded store) and on three brokers (ZooKeeper).

For each mode, on this machine, in temporary directories:

1. create: one topic per count in `--partitions` (default 1000 then 10000, on the same
   broker(s), so the second creation starts with the first topic present); the time from the
   client's CreateTopics until every partition has a leader in a Metadata response;
2. produce: `--records` records of `--size` B to a one-partition topic, then the same number
   spread round-robin over every partition of the largest topic (records/s, and the ratio),
   with the CPU time the broker(s) and this client spent on each. librdkafka sends one
   ProduceRequest per partition (confluentinc/librdkafka#1700), so over N partitions the
   broker gets about N times more, smaller requests, and the client itself may be the limit:
   compare the two CPU figures;
3. Metadata: the time of one full Metadata call (every topic), median of 3;
4. RSS of each broker after the creations;
5. restart: SIGTERM every broker (time to exit), start them again; the time from launch until
   every partition of every topic has a leader in Metadata, and RSS after it.

Each wait has a deadline (`--timeout`): a phase that misses it is reported as a timeout with how
far it got, and the phases that need it are skipped. Progress goes to stderr, the table to
stdout; nothing is written anywhere else (copy the table into bench/RESULTS.md by hand).
The brokers' data goes to a temporary directory under $TMPDIR (default /tmp): creating files
is far slower in some places than others on a shared machine, so compare runs made in the
same place.

Usage:
    PYTHONPATH=. .venv/bin/python bench/bench_scale.py [--partitions 1000,10000] [--mode single|cluster|both]
        [--records N] [--size B] [--acks 1|all] [--rf R] [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.brokerproc import BrokerProcess, free_port  # noqa: E402

T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[{time.monotonic() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


class Timeout(Exception):
    pass



def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """This process's CPU time (the client, librdkafka's threads included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Result:
    mode: str
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add(self, what: str, value: str) -> None:
        self.rows.append((what, value))
        progress(f"{self.mode}: {what}: {value}")


def admin_client(bootstrap: str, timeout: float = 300.0) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 2, "socket.timeout.ms": min(int((timeout + 30) * 1000), 300_000)})


def leaders_ready(admin: AdminClient, topic: str, n: int, timeout: float = 30.0) -> int:
    """How many of the topic's n partitions have a leader in one Metadata response."""
    md = admin.list_topics(topic, timeout=timeout)
    tm = md.topics.get(topic)
    if tm is None or tm.error is not None:
        return 0
    return sum(1 for p in tm.partitions.values() if p.leader >= 0 and p.error is None)


def wait_leaders(admin: AdminClient, topics: dict[str, int], deadline: float, what: str) -> None:
    """Poll Metadata until every partition of every topic has a leader; Timeout at the deadline."""
    last_print = 0.0
    pending = dict(topics)
    counts = {t: 0 for t in topics}
    while True:
        for t, n in list(pending.items()):
            try:
                counts[t] = leaders_ready(admin, t, n, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
            except KafkaException as e:
                progress(f"{what}: Metadata failed ({e}); retrying")
            if counts[t] >= n:
                del pending[t]
        if not pending:
            return
        now = time.monotonic()
        have, want = sum(counts.values()), sum(topics.values())
        if now >= deadline:
            raise Timeout(f"{have}/{want} partitions with a leader")
        if now - last_print >= 2.0:
            progress(f"{what}: {have}/{want} partitions with a leader")
            last_print = now
        time.sleep(0.2)


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, timeout: float) -> float:
    """Seconds from CreateTopics until every partition has a leader in Metadata (Timeout after `timeout`)."""
    admin = admin_client(bootstrap, timeout)
    admin.list_topics(timeout=30)  # connected before the clock starts
    t0 = time.monotonic()
    deadline = t0 + timeout
    fut = admin.create_topics([NewTopic(name, partitions, rf)], operation_timeout=timeout,
                              request_timeout=timeout + 5)[name]
    watcher = admin_client(bootstrap, 5) if partitions > 1 else None  # its own connection
    last_print = t0
    while not fut.done():
        time.sleep(0.1)
        now = time.monotonic()
        if now >= deadline + 10:
            try:
                have = f"{leaders_ready(admin_client(bootstrap, 60), name, partitions, timeout=60)}/{partitions}"
            except KafkaException:
                have = "?"
            raise Timeout(f"no CreateTopics answer after {now - t0:.0f} s; {have} partitions with a leader then")
        if watcher is not None and now - last_print >= 5:
            try:
                have = leaders_ready(watcher, name, partitions, timeout=5)
                progress(f"create {name}: {have}/{partitions} partitions with a leader, no answer yet")
            except KafkaException:
                progress(f"create {name}: the broker answers no Metadata within 5 s")
            last_print = time.monotonic()
    try:
        fut.result()
        progress(f"CreateTopics {name} answered after {time.monotonic() - t0:.2f} s")
    except KafkaException as e:
        err = e.args[0]
        if err.code() not in (err.REQUEST_TIMED_OUT, err._TIMED_OUT):
            raise
        # Created, leaders still coming (or the request timed out client-side): keep waiting.
        progress(f"CreateTopics {name}: {err.str()} after {time.monotonic() - t0:.2f} s; waiting for the leaders")
    wait_leaders(admin, {name: partitions}, deadline, f"create {name}")
    return time.monotonic() - t0


def produce(bootstrap: str, topic: str, partitions: int, records: int, size: int, acks: str,
            timeout: float) -> float:
    """Records/s for `records` records sent round-robin to partitions 0..partitions-1."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 1 << 21,
                  "message.timeout.ms": int(timeout * 1000), "log_level": 2})
    # Metadata first (not timed): a producer learns the partitions before it can send.
    p.list_topics(topic, timeout=min(timeout, 60))
    value = b"x" * size
    failed: list[object] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(max(1.0, timeout - (time.monotonic() - t0)))
    dt = time.monotonic() - t0
    if left:
        raise Timeout(f"{left} of {records} records still unacknowledged after {dt:.0f} s")
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[0]}")
    return records / dt


def metadata_time(admin: AdminClient) -> tuple[float, int]:
    times = []
    n = 0
    for _ in range(3):
        t0 = time.monotonic()
        md = admin.list_topics(timeout=60)
        times.append(time.monotonic() - t0)
        n = sum(len(t.partitions) for t in md.topics.values())
    return statistics.median(times), n


def file_creation_us(n: int = 300) -> float:
    """Microseconds per file created (a directory and three empty files, as a new partition
    needs) in a scratch directory beside the brokers' data: this varies several-fold on a
    shared machine, and topic creation is bound by it."""
    with tempfile.TemporaryDirectory(prefix="samsa-bench-scale-probe-") as d:
        t0 = time.perf_counter()
        for i in range(n):
            os.mkdir(f"{d}/p-{i}")
            for name in ("0.log", "0.index", "0.timeindex"):
                os.close(os.open(f"{d}/p-{i}/{name}", os.O_WRONLY | os.O_CREAT, 0o644))
        return (time.perf_counter() - t0) / (4 * n) * 1e6


# -- the two deployments -------------------------------------------------------------------------


class Deployment:
    brokers: list[BrokerProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout: float) -> None:
        errors: list[BaseException] = []

        def run(b: BrokerProcess) -> None:
            try:
                b.start(timeout)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(b,)) for b in self.brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def stop(self, timeout: float) -> None:
        errors: list[BaseException] = []

        def run(b: BrokerProcess) -> None:
            try:
                b.stop(timeout)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(b,)) for b in self.brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def cpu(self) -> float:
        return sum(cpu_seconds(b.proc.pid) for b in self.brokers if b.proc and b.proc.poll() is None)

    def rss(self) -> str:
        return ", ".join(f"{rss_mb(b.proc.pid):.0f} MB" for b in self.brokers if b.proc and b.proc.poll() is None)

    def close(self) -> None:
        for b in self.brokers:
            b.close()


class Single(Deployment):
    rf = 1

    def __init__(self, root: Path) -> None:
        self.brokers = [BrokerProcess(root / "broker0", {"auto.create.topics.enable": "false"})]


class ZkCluster(Deployment):
    def __init__(self, root: Path, rf: int) -> None:
        from tests.zk.conftest import start_server

        self.rf = rf
        (root / "zk").mkdir()
        progress("starting ZooKeeper")
        self.zk = start_server(root / "zk")
        chroot = f"/bench-scale-{uuid.uuid4().hex[:6]}"
        # tickTime 500 ms in the test ZooKeeper caps sessions at 10 s.
        common = {"zookeeper.connect": self.zk.hosts + chroot, "zookeeper.session.timeout.ms": "10000",
                  "replica.lag.time.max.ms": "10000", "default.replication.factor": str(rf),
                  "offsets.topic.replication.factor": str(min(rf, 3)), "auto.create.topics.enable": "false"}
        self.brokers = [BrokerProcess(root / f"broker{i}", {**common, "broker.id": str(i)}, port=free_port())
                        for i in range(3)]

    def close(self) -> None:
        super().close()
        self.zk.stop()


def run_mode(mode: str, counts: list[int], args: argparse.Namespace) -> Result:
    res = Result(mode)
    with tempfile.TemporaryDirectory(prefix=f"samsa-bench-scale-{mode}-") as tmp:
        dep: Deployment = Single(Path(tmp)) if mode == "single" else ZkCluster(Path(tmp), args.rf)
        try:
            _run(dep, res, counts, args)
        finally:
            dep.close()
            if args.keep_logs:
                keep = Path(args.keep_logs) / mode
                keep.mkdir(parents=True, exist_ok=True)
                for f in Path(tmp).rglob("*.log"):
                    if f.name in ("broker.log", "zookeeper.out", "zookeeper.log"):
                        shutil.copy(f, keep / f"{f.parent.name}-{f.name}")
                print(f"broker logs kept in {keep}", flush=True)
    return res


def phase(res: Result, what: str, fn: Callable[[], str]) -> bool:
    """Run one measurement; a Timeout or failure becomes the row's value. True if it worked."""
    try:
        res.add(what, fn())
        return True
    except Timeout as e:
        res.add(what, f"TIMEOUT ({e})")
    except Exception as e:  # noqa: BLE001 - reported in the table, the run carries on
        res.add(what, f"FAILED ({type(e).__name__}: {e})")
    return False


def _run(dep: Deployment, res: Result, counts: list[int], args: argparse.Namespace) -> None:
    res.add("file creation here (before the run)", f"{file_creation_us():.0f} us per file")
    progress(f"{res.mode}: starting {len(dep.brokers)} broker(s)")
    t0 = time.monotonic()
    dep.start(60)
    admin = admin_client(dep.bootstrap, args.timeout)
    admin.list_topics(timeout=60)
    res.add("start (empty), until a Metadata answer", f"{time.monotonic() - t0:.2f} s")
    created: dict[str, int] = {}
    for n in counts:
        name = f"scale-{n}"
        if phase(res, f"create {n:,} partitions (until every leader in Metadata)",
                 lambda: f"{create_topic(dep.bootstrap, name, n, dep.rf, args.timeout):.2f} s"):
            created[name] = n
        else:
            break
    phase(res, "broker RSS after creating", dep.rss)
    if len(created) < len(counts):
        res.add("remaining phases", "skipped: a creation did not finish (the broker is still busy with it, "
                                    "so later figures would mean nothing)")
        return
    big, nbig = max(created.items(), key=lambda kv: kv[1])
    rates: dict[str, float] = {}

    def prod(topic: str, n: int) -> str:
        broker0, client0 = dep.cpu(), own_cpu_seconds()
        rates[topic] = produce(dep.bootstrap, topic, n, args.records, args.size, args.acks, args.timeout)
        return (f"{rates[topic]:,.0f} rec/s (CPU: broker{'s' if len(dep.brokers) > 1 else ''} "
                f"{dep.cpu() - broker0:.1f} s, client {own_cpu_seconds() - client0:.1f} s)")

    ok = phase(res, "create one-partition topic", lambda: f"{create_topic(dep.bootstrap, 'one', 1, dep.rf, 60):.2f} s")
    if ok:
        phase(res, f"produce {args.records:,} x {args.size} B acks={args.acks} to 1 partition",
              lambda: prod("one", 1))
        created["one"] = 1
    phase(res, f"produce {args.records:,} x {args.size} B acks={args.acks} over {nbig:,} partitions",
          lambda: prod(big, nbig))
    if "one" in rates and big in rates:
        res.add("ratio all-partitions / one-partition", f"{rates[big] / rates['one']:.2f}")

    def md() -> str:
        dt, n = metadata_time(admin)  # noqa: F821 (called before `del admin` below)
        return f"{dt * 1000:.0f} ms ({n:,} partitions)"

    phase(res, "one full Metadata call (median of 3)", md)
    del admin
    for n in range(1, args.restarts + 1):
        if not stop_and_restart(dep, res, created, args, n):
            break
    res.add("file creation here (after the run)", f"{file_creation_us():.0f} us per file")


def stop_and_restart(dep: Deployment, res: Result, created: dict[str, int], args: argparse.Namespace,
                     n: int) -> bool:
    """SIGTERM every broker, start them again, wait until every partition has a leader. With
    --profile-restart, py-spy samples each broker from its launch until then."""
    nth = f" #{n}" if args.restarts > 1 else ""
    t0 = time.monotonic()
    progress(f"{res.mode}: stopping (SIGTERM){nth}")
    try:
        dep.stop(args.timeout)
        res.add(f"stop (SIGTERM until exit){nth}", f"{time.monotonic() - t0:.2f} s")
    except subprocess.TimeoutExpired:
        res.add(f"stop (SIGTERM until exit){nth}", f"TIMEOUT (still running after {args.timeout:.0f} s)")
        return False
    if not created:
        return False
    progress(f"{res.mode}: restarting{nth}")
    spies: list[subprocess.Popen[bytes]] = []
    t0 = time.monotonic()

    def restart() -> str:
        if args.profile_restart:
            threading.Thread(target=attach_profilers, args=(dep, spies, Path(args.profile_restart), n),
                             daemon=True).start()
        dep.start(args.timeout)
        listening = time.monotonic() - t0
        admin2 = admin_client(dep.bootstrap, args.timeout)
        wait_leaders(admin2, created, t0 + args.timeout, "restart")
        took = time.monotonic() - t0
        cpu = ", ".join(f"{cpu_seconds(b.proc.pid):.1f}" for b in dep.brokers if b.proc and b.proc.poll() is None)
        return f"{took:.2f} s (listening after {listening:.2f} s; broker CPU {cpu} s)"

    ok = phase(res, f"restart{nth} until every leader ready ({sum(created.values()):,} partitions)", restart)
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
    for spy in spies:
        spy.wait(60)
    if ok:
        phase(res, f"broker RSS after restart{nth}", dep.rss)
    return ok


def attach_profilers(dep: Deployment, spies: list[subprocess.Popen[bytes]], out: Path, n: int) -> None:
    """py-spy on each broker as soon as its process exists (collapsed stacks, one file each)."""
    out.mkdir(parents=True, exist_ok=True)
    pending = list(dep.brokers)
    while pending:
        for b in list(pending):
            if b.proc is not None and b.proc.poll() is None:
                pending.remove(b)
                spies.append(subprocess.Popen(
                    ["py-spy", "record", "--pid", str(b.proc.pid), "--rate", "100", "--format", "raw",
                     "--nonblocking", "--output", str(out / f"restart{n}-{b.workdir.name}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.005)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", default="1000,10000",
                    help="comma-separated partition counts, one topic each, created in order (default 1000,10000)")
    ap.add_argument("--mode", choices=("single", "cluster", "both"), default="single")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--rf", type=int, default=3, help="replication factor in cluster mode (default 3)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per phase (default 300)")
    ap.add_argument("--restarts", type=int, default=1, help="stop and restart this many times (default 1)")
    ap.add_argument("--profile-restart", metavar="DIR",
                    help="sample each broker with py-spy (on PATH) during each restart: DIR/restart<N>-<broker>.txt")
    ap.add_argument("--keep-logs", metavar="DIR", help="copy the brokers' logs into DIR/<mode>/ at the end")
    args = ap.parse_args()
    counts = [int(c) for c in args.partitions.split(",") if c]
    modes = ["single", "cluster"] if args.mode == "both" else [args.mode]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    results = [run_mode(m, counts, args) for m in modes]
    print(f"\n`bench/bench_scale.py --partitions {args.partitions} --mode {args.mode} --records {args.records} "
          f"--size {args.size} --acks {args.acks}` at {commit or '?'}, {time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores\n")
    for r in results:
        print(f"| {r.mode} | |\n|---|---|")
        for what, value in r.rows:
            print(f"| {what} | {value} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
