"""An acks=all idempotent producer that records every acknowledgement, for the fault runs
(`tests/cluster/faults.py`): sequence-numbered records to every partition, at a steady pace,
from its own thread; each delivery report kept with its partition, sequence number, offset and
arrival time; and the longest gap between two acknowledgements of a partition over a window.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer


class FaultProducer:
    """acks=all idempotent producer writing numbered records to every partition, recording
    every acknowledgement (partition, seq, offset, time) from its own thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, client_log: Path,
                 interval: float = 0.005, backlog: int = 500, message_timeout_s: float = 600.0,
                 debug: str = "") -> None:
        self.topic = topic
        self.partitions = list(range(partitions))
        self.interval = interval
        self.backlog = backlog  # outstanding records per partition: a stalled one stalls no other
        log = logging.getLogger(f"rdkafka.{topic}")
        log.propagate = False
        handler = logging.FileHandler(client_log)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)
        # librdkafka's debug contexts: $SAMSA_TEST_RDKAFKA_DEBUG, else the caller's (the short
        # fault tests log connections, metadata and leaders: a failure in CI must explain itself)
        debug = os.environ.get("SAMSA_TEST_RDKAFKA_DEBUG") or debug
        log.setLevel(logging.DEBUG if debug else logging.INFO)
        self._log_handler = handler
        self.client_log = client_log
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": int(message_timeout_s * 1000),  # never give up during a fault
            # A stopped or cut-off broker never answers: give up on its in-flight requests after
            # 5 s (librdkafka's default is 60 s) and retry where the metadata now points.
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
            "logger": log,
            **({"debug": debug} if debug else {}),
        })
        self.cond = threading.Condition()
        self.produced = {p: 0 for p in self.partitions}  # next sequence number per partition
        self.outstanding = {p: 0 for p in self.partitions}
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in self.partitions}  # (seq, offset)
        self.ack_times: dict[int, list[float]] = {p: [] for p in self.partitions}  # monotonic, in order
        self.failed: list[tuple[int, int, KafkaError]] = []  # (partition, seq, error)
        self.client_errors: list[KafkaError] = []
        self.stopping = threading.Event()
        self.flush_timeout = 120.0
        self.left: int | None = None
        self.thread = threading.Thread(target=self._run, name="fault-producer", daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        with self.cond:
            self.client_errors.append(err)

    def _on_delivery(self, p: int, seq: int, err: KafkaError | None, msg: Any) -> None:
        now = time.monotonic()
        self.outstanding[p] -= 1  # (delivery reports run in this producer's thread, in poll())
        with self.cond:
            if err is None:
                # librdkafka reports some records delivered without an offset: those of a request
                # that timed out when a later one of the same producer succeeded (they must be in
                # the log, before it). Kept as -1 and checked by their sequence number.
                offset = msg.offset()
                self.acked[p].append((seq, -1 if offset is None or offset < 0 else offset))
                self.ack_times[p].append(now)
            else:
                self.failed.append((p, seq, err))
            self.cond.notify_all()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= next_at:  # one record per partition every `interval`
                next_at = max(next_at + self.interval, now)
                for p in self.partitions:
                    if self.outstanding[p] < self.backlog:
                        seq = self.produced[p]
                        try:
                            self.producer.produce(self.topic, value=b"%010d" % seq, partition=p,
                                                  on_delivery=partial(self._on_delivery, p, seq))
                        except BufferError:
                            break
                        self.produced[p] += 1
                        self.outstanding[p] += 1
            # Serves the delivery reports (and returns early when it did: hence the schedule).
            self.producer.poll(min(max(0.0, next_at - time.monotonic()), 0.05))
        if self.flush_timeout <= 0:  # abandoning (a failed test): drop what is queued, now
            self.producer.purge()
        self.left = self.producer.flush(self.flush_timeout)

    def start(self) -> FaultProducer:
        self.thread.start()
        return self

    def stop(self, flush_timeout: float = 120.0) -> None:
        self.flush_timeout = flush_timeout
        self.stopping.set()
        self.thread.join(flush_timeout + 30)
        logging.getLogger(f"rdkafka.{self.topic}").removeHandler(self._log_handler)
        self._log_handler.close()

    @property
    def acked_count(self) -> int:
        with self.cond:
            return sum(len(v) for v in self.acked.values())

    def wait_acks(self, after: float, n: int, until: float) -> float | None:
        """Block until every partition has `n` acknowledgements later than `after` (monotonic),
        woken by the delivery reports; the time that happened, or None at `until`."""
        with self.cond:
            while True:
                if all(len(t) - bisect.bisect_right(t, after) >= n for t in self.ack_times.values()):
                    return time.monotonic()
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return None
                self.cond.wait(min(remaining, 0.5))

    def gaps(self, t0: float, end: float) -> dict[int, tuple[float, float]]:
        """Per partition, the longest time between consecutive acknowledgements in [t0, end]
        (from the last one before t0, and up to `end`) and when it began (monotonic)."""
        out: dict[int, tuple[float, float]] = {}
        with self.cond:
            for p, times in self.ack_times.items():
                i = bisect.bisect_right(times, t0)
                prev = times[i - 1] if i > 0 else t0
                best = (0.0, prev)
                for t in times[i:bisect.bisect_right(times, end)]:
                    if t - prev > best[0]:
                        best = (t - prev, prev)
                    prev = t
                if end - prev > best[0]:
                    best = (end - prev, prev)
                out[p] = best
        return out
