"""The dashboard's reader: one thread that keeps `LiveState` in step with the pipeline's topics.

It uses two confluent-kafka Consumers: one fetches the topics it was manually `assign`ed, the other
only asks for metadata and offsets, so those queries never queue behind a long-polling fetch (a
group.id is set because librdkafka insists, but no group is joined and nothing is committed). It
loops:

* every few seconds (every second while a topic is missing or the broker is down) it reads the
  cluster metadata and assigns partitions it has not seen yet, each from a bounded recent history:
  aggregates from the last `history_minutes` of record time (at least `MIN_AGGREGATES` records,
  at most `MAX_AGGREGATES`), the other topics from a fixed tail (`TAIL`). `sensor_readings` is
  read only to learn where sensors are; records of a sensor already placed are not parsed;
* it hands each consumed batch to the state;
* every `tick_s` it samples the (log start, log end) offsets of every pipeline topic, from which
  the state derives ingest rate, throughput, job lag and the DLQ count, and re-evaluates the
  job state.

Any broker failure marks the broker "unreachable" (with librdkafka's reason) and is retried; the
thread only ends when asked to.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from samsa.pipeline.dashboard.live import LiveState, wall_ms
from samsa.pipeline.dashboard.state import PipelineState, PipelineTopics

log = logging.getLogger(__name__)

_LIBRDKAFKA_LOG = logging.getLogger("samsa.pipeline.dashboard.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False

# Records read back from the end of each partition when it is first assigned, per role.
TAIL = {"alerts": 500, "status": 5, "dlq": 20, "readings": 2000}
MIN_AGGREGATES = 5_000
MAX_AGGREGATES = 300_000
CONSUMED = ("aggregates", "alerts", "status", "dlq", "readings")
_DOWN_CODES = (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE)


class PipelineReader:
    def __init__(
        self,
        bootstrap: str,
        topics: PipelineTopics,
        live: LiveState,
        *,
        history_minutes: float = 65.0,
        tick_s: float = 1.0,
        metadata_interval_s: float = 5.0,
        request_timeout_s: float = 2.0,
        consumer_config: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.topics = topics
        self.live = live
        self.history_ms = int(history_minutes * 60_000)
        self.tick_s = tick_s
        self.metadata_interval_s = metadata_interval_s
        self.request_timeout_s = request_timeout_s
        self._roles = topics.roles()
        self._extra_config = dict(consumer_config or {})
        self._partitions: dict[str, list[int]] = {}
        self._assigned: set[tuple[str, int]] = set()
        self._down_reason: str | None = None
        self._metadata_ok = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-reader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end and join it (at most one broker request timeout)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    # -- the loop ----------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": f"samsa-dashboard-{uuid.uuid4().hex[:8]}",  # never joined
            "client.id": "samsa-dashboard",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "queued.max.messages.kbytes": 16384,
            "error_cb": self._on_error,
            "logger": _LIBRDKAFKA_LOG,
        }
        conf.update(self._extra_config)
        return conf

    def _on_error(self, err: KafkaError) -> None:
        if err.code() in _DOWN_CODES:
            # "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused
            # (after 0ms in state CONNECT)": keep the part that does not change from try to try.
            self._down_reason = re.sub(r" \(after \d+ms in state \w+.*\)$", "", err.str())

    def _run(self) -> None:
        # Two clients: a broker answers a connection's requests in order, so offset and metadata
        # queries sent where fetches long-poll would each wait out a fetch (fetch.wait.max.ms).
        fetcher = Consumer(self._config())
        querier = Consumer(self._config())
        try:
            next_metadata = next_tick = 0.0
            while not self._stop.is_set():
                try:
                    now = time.monotonic()
                    if now >= next_metadata:
                        ok = self._refresh_metadata(querier, fetcher)
                        complete = ok and all(getattr(self.topics, r) in self._partitions for r in CONSUMED)
                        next_metadata = now + (self.metadata_interval_s if complete else 1.0)
                    self._consume(fetcher)
                    if time.monotonic() >= next_tick:
                        next_tick = time.monotonic() + self.tick_s
                        self._sample(querier)
                        querier.poll(0)  # serves its error callbacks; it has nothing assigned
                except KafkaException as e:
                    self._metadata_ok = False
                    self._unreachable(_reason(e))
                    next_metadata = time.monotonic()
                    self._stop.wait(min(1.0, self.tick_s))
                except Exception:  # noqa: BLE001 - the dashboard must outlive any bad surprise
                    log.exception("dashboard reader: unexpected error; continuing")
                    self._stop.wait(1.0)
        finally:
            fetcher.close()
            querier.close()

    def _consume(self, consumer: Consumer) -> None:
        batch = consumer.consume(num_messages=1000, timeout=0.2)
        records = []
        for msg in batch:
            err = msg.error()
            if err is not None:
                log.debug("dashboard reader: %s", err.str())
                continue
            role = self._roles.get(msg.topic() or "")
            if role is not None:
                records.append((role, msg.key(), msg.value(), msg.timestamp()[1]))
        if records:

            def apply(state: PipelineState) -> bool:
                changed = False
                for rec in records:
                    changed = state.apply(*rec) or changed
                return changed

            self.live.update(apply)

    def _refresh_metadata(self, querier: Consumer, fetcher: Consumer) -> bool:
        try:
            md = querier.list_topics(timeout=self.request_timeout_s)
        except KafkaException as e:
            self._metadata_ok = False
            querier.poll(0)  # its error callbacks carry the reason (e.g. "Connection refused")
            self._unreachable(_reason(e))
            return False
        self._metadata_ok = True
        partitions: dict[str, list[int]] = {}
        for name in self._roles:
            topic = md.topics.get(name)
            if topic is not None and topic.error is None and topic.partitions:
                partitions[name] = sorted(topic.partitions)
        self._partitions = partitions
        current = {(t, p) for t, ps in partitions.items() if self._roles[t] in CONSUMED for p in ps}
        gone = self._assigned - current
        if gone:
            fetcher.incremental_unassign([TopicPartition(t, p) for t, p in sorted(gone)])
            self._assigned -= gone
        new = sorted(current - self._assigned)
        if new:
            fetcher.incremental_assign(self._start_offsets(querier, new))
            self._assigned |= set(new)
        self._reachable()
        return True

    def _start_offsets(self, consumer: Consumer, tps: list[tuple[str, int]]) -> list[TopicPartition]:
        """Where to start reading each new partition: a bounded recent history."""
        ends = {tp: self._watermarks(consumer, *tp) for tp in tps}
        aggregates = [tp for tp in tps if self._roles[tp[0]] == "aggregates"]
        since: dict[tuple[str, int], int] = {}
        if aggregates:
            ts = wall_ms() - self.history_ms
            found = consumer.offsets_for_times(
                [TopicPartition(t, p, ts) for t, p in aggregates], timeout=self.request_timeout_s
            )
            since = {(tp.topic, tp.partition): tp.offset for tp in found}
        out = []
        for tp in tps:
            low, high = ends[tp]
            if self._roles[tp[0]] == "aggregates":
                by_time = since.get(tp, -1)
                by_time = high if by_time < 0 else by_time
                start = max(low, high - MAX_AGGREGATES, min(by_time, high - MIN_AGGREGATES))
            else:
                start = max(low, high - TAIL[self._roles[tp[0]]])
            out.append(TopicPartition(tp[0], tp[1], start))
        return out

    def _watermarks(self, consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.request_timeout_s, cached=False
        )
        return int(low), int(high)

    def _sample(self, consumer: Consumer) -> None:
        if not self._metadata_ok:
            self.live.update(lambda s: False)  # time moves on: re-evaluate the job state
            return
        offsets: dict[str, dict[int, tuple[int, int]]] = {}
        for topic, partitions in self._partitions.items():
            role = self._roles[topic]
            for p in partitions:
                offsets.setdefault(role, {})[p] = self._watermarks(consumer, topic, p)
        now_s = time.monotonic()

        def observe(state: PipelineState) -> bool:
            state.set_broker("ok")
            state.observe_offsets(now_s, offsets)
            return False  # the health figures it moves are compared by refresh()

        self._down_reason = None
        self.live.update(observe)

    def _reachable(self) -> None:
        self._down_reason = None
        self.live.update(lambda s: _set_broker(s, "ok", None))

    def _unreachable(self, reason: str) -> None:
        self.live.update(lambda s: _set_broker(s, "unreachable", self._down_reason or reason))


def _set_broker(state: PipelineState, name: str, error: str | None) -> bool:
    state.set_broker(name, error)
    return False


def _reason(e: KafkaException) -> str:
    err = e.args[0] if e.args else None
    return err.str() if isinstance(err, KafkaError) else str(e)
