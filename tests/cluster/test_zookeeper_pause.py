"""ZooKeeper paused (SIGSTOP) for 20 s under load: the data path does not notice.

Three brokers, a replicated topic with a leader on each broker, an idempotent acks=all
producer at a steady rate and a consumer group reading it. The brokers ask for Kafka's
default session timeout, 18 s; ZooKeeper is stopped for 20 s. Every broker sees its
connection drop after 12 s, and ZooKeeper expires every session as soon as it resumes: the
brokers register again, a controller is elected again. Through all of it the leaders keep
leading, because their followers keep fetching from them (nobody else can have been elected:
see `must_fence` in `samsa/controller/session.py`). While ZooKeeper is stopped:

- no acknowledgement takes a second or more: a write that waited on ZooKeeper would wait
  12 s (until the connection is declared lost) or the whole pause. (The p99 before and
  during are printed; they are not compared, since on a shared machine the spread of a
  few milliseconds is the scheduler's, not the broker's.)
- the consumer keeps receiving;
- no broker's event loop stalls for 100 ms or more in broker code (the loop-lag monitor's log
  lines; a stall caught waiting in the selector is the machine's, not the broker's);

and after ZooKeeper resumes, nothing acknowledged is lost.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from tests.cluster.cluster import Cluster
from tests.zk.conftest import start_server

SESSION_MS = 18000
PAUSE_S = 20.0
RATE = 200  # records per second
SLOW_S = 1.0  # far below the 12 s a write waiting on ZooKeeper would take


def loop_stalls(log: str) -> list[str]:
    """The loop-lag monitor's warnings, each with the stack it caught."""
    out: list[str] = []
    for line in log.splitlines():
        if "Event loop stalled" in line:
            out.append(line)
        elif out and line.startswith("  "):
            out[-1] += "\n" + line
    return out


def idle(stall: str) -> bool:
    """A stall caught with the loop waiting in its selector (or with no stack) is the process
    not getting a core on a busy machine, not broker code blocking the loop."""
    frames = stall.splitlines()[1:]
    return not frames or "no stack caught" in frames[-1] or "selectors.py" in frames[-1]


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


class TimedProducer:
    """acks=all, idempotent, RATE records/s round-robin over the partitions; records each
    record's send and acknowledgement times."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 0, "message.timeout.ms": 120000})
        self.topic, self.partitions = topic, partitions
        self.sent: dict[int, float] = {}
        self.acked: dict[int, tuple[float, int, int]] = {}  # seq -> (ack time, partition, offset)
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, seq: int, err: Any, msg: Any) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(err.str())
            else:
                self.acked[seq] = (time.monotonic(), msg.partition(), msg.offset())

    def _run(self) -> None:
        seq = 0
        start = time.monotonic()
        while not self.stop.is_set():
            due = start + seq / RATE
            wait = due - time.monotonic()
            if wait > 0:
                self.p.poll(wait)
                continue
            with self.lock:
                self.sent[seq] = time.monotonic()
            self.p.produce(self.topic, value=b"%08d" % seq, partition=seq % self.partitions,
                           on_delivery=lambda err, msg, s=seq: self._on_delivery(s, err, msg))
            self.p.poll(0)
            seq += 1
        self.left = self.p.flush(60)

    def latencies(self, t0: float, t1: float) -> list[float]:
        with self.lock:
            return [a[0] - self.sent[s] for s, a in self.acked.items() if t0 <= self.sent[s] < t1]

    def slowest(self, t0: float, t1: float, n: int = 10) -> str:
        """The n slowest acknowledgements sent in [t0, t1): when (from t0), partition, latency."""
        with self.lock:
            xs = sorted(((a[0] - self.sent[s], self.sent[s] - t0, a[1]) for s, a in self.acked.items()
                         if t0 <= self.sent[s] < t1), reverse=True)[:n]
        return ", ".join(f"{w * 1000:.0f} ms at +{at:.1f} s (p{p})" for w, at, p in xs)


def test_a_paused_zookeeper_costs_the_data_path_nothing(tmp_path: Path, cluster: Any) -> None:
    d = tmp_path / "zk"
    d.mkdir()
    zk = start_server(d, extra_config=f"maxSessionTimeout={SESSION_MS * 2}\n")
    try:
        c: Cluster = cluster(3, zk_hosts=zk.hosts, zookeeper_session_timeout_ms=SESSION_MS, min_insync_replicas=2)
        topic = f"pause-{uuid.uuid4().hex[:8]}"
        c.create_topic(topic, partitions=3, rf=3, configs={"min.insync.replicas": "2"})
        c.wait_full_isr(topic)
        prod = TimedProducer(c.bootstrap, topic, 3)
        received: list[float] = []
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest", "enable.auto.commit": True})
        consumer.subscribe([topic])
        stop_consuming = threading.Event()

        def consume() -> None:
            while not stop_consuming.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    received.append(time.monotonic())

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        prod.thread.start()
        try:
            c.wait_for(lambda: len(received) > 200, 30, "the consumer reads")
            before0 = time.monotonic()
            time.sleep(10)  # the fault's schedule: 10 s of load before, measured as the reference
            t_pause = time.monotonic()
            os.kill(zk.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)
            finally:
                t_resume = time.monotonic()
                os.kill(zk.proc.pid, signal.SIGCONT)
            time.sleep(3)
        finally:
            prod.stop.set()
            prod.thread.join(90)
            stop_consuming.set()
            reader.join(10)
            consumer.close()

        before = prod.latencies(before0, t_pause)
        during = prod.latencies(t_pause, t_resume)
        report = (f"p99 before {p99(before) * 1000:.1f} ms ({len(before)} records), during the pause "
                  f"{p99(during) * 1000:.1f} ms ({len(during)} records); slowest during: "
                  f"{prod.slowest(t_pause, t_resume)}")
        print("\n" + report)
        assert len(during) >= RATE * PAUSE_S * 0.8, f"the producer slowed down while ZooKeeper was paused: {report}"
        assert max(during) < SLOW_S, f"an acknowledgement waited {max(during):.1f} s: {report}"
        gaps = [b - a for a, b in zip(received, received[1:]) if t_pause <= a < t_resume]
        assert gaps and max(gaps) < 2.0, f"the consumer stalled for {max(gaps or [0]):.1f} s during the pause"
        stalls = [st for b in c.brokers for st in loop_stalls(b.log_text()) if not idle(st)]
        assert not stalls, "event loops stalled in broker code:\n" + "\n".join(stalls)
        assert prod.left == 0 and not prod.errors, (prod.left, prod.errors[:5])
        got = c.consume_all(topic, [0, 1, 2])
        stored = {(p, o) for p, recs in got.items() for o, _, _ in recs}
        lost = [s for s, (_, p, o) in prod.acked.items() if (p, o) not in stored]
        assert not lost, f"{len(lost)} acknowledged records lost"
    finally:
        if zk.proc.poll() is None:
            os.kill(zk.proc.pid, signal.SIGCONT)
        zk.stop()
