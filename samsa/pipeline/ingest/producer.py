"""The producer every ingest source shares: a confluent-kafka Producer with the settings a data
pipeline wants and delivery reports that are counted, logged and, on request, acted upon.

How it works:

* `acks=all` and `enable.idempotence=true`: librdkafka retries a failed request by itself
  (without duplicates or reordering) until `message.timeout.ms`; only then does a delivery
  *finally* fail. `partitioner=murmur2_random` places keys on the partitions Kafka's Java
  producer would.
* Every delivery report passes through `_report`: it counts `acked` / `failed`, logs the topic,
  partition and offset at DEBUG, and a summary at INFO every `summary_interval_s`. A final failure
  is logged with its reason (after the first few in an interval, only counted, so a broker outage
  at 20,000 records/s does not produce 20,000 lines a second).
* `send(..., resend=True)` (the http and file sources) keeps a finally-failed record in a resend
  queue, produced again by `poll()` after a growing pause: such records are never dropped,
  though a resent record lands after records sent in the meantime. `on_ack(msg)` is called once,
  for the delivery that succeeded.
* A fatal producer error (an idempotence state librdkafka cannot recover from) replaces the
  underlying Producer; records it still held come back as failed deliveries, so resend applies.

All methods are meant for one thread (the source's); the counters may be read from any thread.
"""

from __future__ import annotations

import collections
import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message, Producer

log = logging.getLogger("samsa.ingest.producer")

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

BASE_CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 20,
    "partitioner": "murmur2_random",
    "client.id": "samsa-ingest",
}

_LIBRDKAFKA_LOG = logging.getLogger("samsa.ingest.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False  # its events reach us through error_cb, in one line each

# Final-failure lines logged per summary interval before they are only counted.
_FAILURE_LINES_PER_INTERVAL = 10
# Pause before a finally-failed record is produced again: doubles per attempt, up to the cap.
RESEND_INITIAL_S = 1.0
RESEND_MAX_S = 30.0
# The same client error (e.g. "Connection refused") is logged at most once per this many seconds.
_ERROR_REPEAT_S = 30.0

OnAck = Callable[[Message], None]


class IngestError(Exception):
    """The producer cannot do its job (no broker reachable, fatal client error)."""


class Sender(Protocol):
    """What a source needs from a producer; `IngestProducer` is one, tests use fakes."""

    def send(
        self, topic: str, value: bytes | str, key: bytes | str | None = None, *,
        on_ack: OnAck | None = None, resend: bool = False,
    ) -> None: ...

    def poll(self, timeout: float = 0.0) -> None: ...

    def flush(self, timeout: float) -> int: ...

    def outstanding(self) -> int: ...


@dataclass(frozen=True)
class ProducerStats:
    sent: int  # produce() calls accepted, resends included
    acked: int  # deliveries the broker acknowledged
    failed: int  # deliveries that finally failed (a resent record may count more than once)
    resent: int  # records produced again after a final failure
    queued: int  # records not yet acknowledged or failed, waiting to be resent included


@dataclass
class _Resend:
    due: float
    attempt: int
    topic: str
    value: bytes | None
    key: bytes | None
    on_ack: OnAck | None


class IngestProducer:
    """A Producer for the ingest sources (see the module comment).

    `config` entries override `BASE_CONFIG`; `producer_factory` builds the client (tests inject a
    fake); `clock` is monotonic seconds.
    """

    def __init__(
        self,
        bootstrap: str = DEFAULT_BOOTSTRAP,
        config: dict[str, Any] | None = None,
        *,
        summary_interval_s: float = 10.0,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap = bootstrap
        self._conf: dict[str, Any] = {**BASE_CONFIG, **(config or {}), "bootstrap.servers": bootstrap}
        self._conf["error_cb"] = self._on_error
        self._conf["logger"] = _LIBRDKAFKA_LOG
        self._factory = producer_factory
        self._clock = clock
        self._producer = self._new_producer()
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.resent = 0
        self._resends: collections.deque[_Resend] = collections.deque()
        self._plain = functools.partial(self._report, None, False, 0)
        self._debug = log.isEnabledFor(logging.DEBUG)
        self._fatal: KafkaError | None = None
        self._last_error: str | None = None
        self._transport_error: str | None = None
        self._all_down_since: float | None = None
        self._quiet = False
        self._error_logged: dict[str, float] = {}
        self._last_delivery: tuple[str, int, int] | None = None
        self._summary_interval = summary_interval_s
        self._summary_at = clock() + summary_interval_s
        self._summary_acked = 0
        self._failure_lines = 0
        self._failures_unlogged = 0

    def _new_producer(self) -> Any:
        try:
            return self._factory(dict(self._conf))
        except (KafkaException, ValueError, TypeError) as e:
            raise IngestError(f"invalid producer configuration: {e}") from None

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | str,
        key: bytes | str | None = None,
        *,
        on_ack: OnAck | None = None,
        resend: bool = False,
    ) -> None:
        """Queue one record. Waits (serving delivery reports) while librdkafka's queue is full."""
        callback = self._plain if on_ack is None and not resend else functools.partial(self._report, on_ack, resend, 0)
        self._produce(topic, value, key, callback)

    def send_batch(self, topic: str, keys: Sequence[bytes | str | None], values: Sequence[bytes | str]) -> None:
        """Queue many records without resend or acknowledgement callbacks (the simulator's hot path)."""
        produce, callback = self._producer.produce, self._plain
        sent = 0
        try:
            for key, value in zip(keys, values):
                try:
                    produce(topic, value, key, on_delivery=callback)
                except (BufferError, KafkaException):  # queue full or a fatal error: the slow path
                    self._produce(topic, value, key, callback)
                    produce = self._producer.produce  # _produce may have replaced the producer
                    sent -= 1  # _produce counted it
                sent += 1
        finally:
            self.sent += sent

    def _produce(self, topic: str, value: Any, key: Any, callback: Callable[[Any, Any], None]) -> None:
        while True:
            try:
                self._producer.produce(topic, value, key, on_delivery=callback)
                self.sent += 1
                return
            except BufferError:
                self._producer.poll(0.05)  # local queue full: let deliveries drain
            except KafkaException as e:
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                if err is not None and err.fatal():
                    self._fatal = err
                    self._replace_producer()
                    continue
                raise IngestError(f"cannot produce to {topic}: {err.str() if err else e}") from None

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery reports, produce due resends, log the periodic summary."""
        self._producer.poll(timeout)
        if self._fatal is not None:
            self._replace_producer()
        if self._resends:
            self._send_due_resends()
        now = self._clock()
        if now >= self._summary_at:
            self._log_summary(now)

    def flush(self, timeout: float) -> int:
        """Wait up to `timeout` s until every record is acknowledged (resends included) or has
        finally failed without resend; returns how many are still outstanding."""
        deadline = self._clock() + timeout
        while True:
            self.poll(0)
            if self._resends:
                # Waiting to flush: resend now rather than after the usual pause.
                for r in self._resends:
                    r.due = min(r.due, self._clock())
                self._send_due_resends()
            remaining = deadline - self._clock()
            left = self._producer.flush(max(0.0, min(0.2, remaining)))
            if left == 0 and not self._resends:
                return 0
            if remaining <= 0:
                return int(left) + len(self._resends)

    def check_connection(self, timeout: float = 10.0) -> None:
        """Raise IngestError unless a broker answers a metadata request within `timeout` s (or
        sooner, once librdkafka has reported every broker down for a second)."""
        deadline = self._clock() + timeout
        self._quiet = True  # the outcome is reported once, by the exception
        try:
            self._await_metadata(deadline)
        finally:
            self._quiet = False
            self._error_logged.clear()

    def _await_metadata(self, deadline: float) -> None:
        while True:
            try:
                self._producer.list_topics(timeout=max(0.1, min(0.5, deadline - self._clock())))
                self._all_down_since = None
                return
            except KafkaException:
                pass
            self._producer.poll(0)  # error events arrive through poll
            now = self._clock()
            all_down = self._all_down_since is not None and now - self._all_down_since >= 1.0
            if all_down or now >= deadline:
                why = self._transport_error or self._last_error or "no response"
                raise IngestError(f"cannot connect to {self.bootstrap}: {why}")

    def outstanding(self) -> int:
        """Records in librdkafka's queue or waiting to be resent: sources read less while high."""
        return len(self._producer) + len(self._resends)

    def stats(self) -> ProducerStats:
        queued = self.sent - self.acked - self.failed + len(self._resends)
        return ProducerStats(self.sent, self.acked, self.failed, self.resent, max(0, queued))

    # -- delivery reports ----------------------------------------------------------------------

    def _report(
        self, on_ack: OnAck | None, resend: bool, attempt: int, err: KafkaError | None, msg: Message
    ) -> None:
        if err is None:
            self.acked += 1
            if self._debug:
                log.debug("delivered to %s [%d] @ %d", msg.topic(), msg.partition(), msg.offset())
            self._last_delivery = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
            if on_ack is not None:
                on_ack(msg)
            return
        self.failed += 1
        if resend:
            delay = min(RESEND_MAX_S, RESEND_INITIAL_S * 2**attempt)
            self._resends.append(_Resend(self._clock() + delay, attempt + 1, msg.topic() or "", msg.value(),
                                         msg.key(), on_ack))
        if self._failure_lines < _FAILURE_LINES_PER_INTERVAL:
            self._failure_lines += 1
            what = "will be sent again" if resend else "dropped"
            log.warning("delivery to %s failed: %s (%s)", msg.topic(), err.str(), what)
        else:
            self._failures_unlogged += 1

    def _send_due_resends(self) -> None:
        now = self._clock()
        # Keep the order records failed in; a resend whose pause has not passed blocks later ones.
        while self._resends and self._resends[0].due <= now:
            r = self._resends.popleft()
            # The attempt number rides along so the next failure of this record waits longer.
            callback = functools.partial(self._report, r.on_ack, True, r.attempt)
            try:
                self._producer.produce(r.topic, r.value, r.key, on_delivery=callback)
            except BufferError:
                self._resends.appendleft(r)
                return
            except KafkaException as e:
                self._resends.appendleft(r)
                r.due = now + RESEND_INITIAL_S
                log.warning("resending to %s failed: %s", r.topic, e)
                return
            self.sent += 1
            self.resent += 1

    def _on_error(self, err: KafkaError) -> None:
        # librdkafka's error events: transport problems, all brokers down, fatal errors.
        text = err.str()
        self._last_error = text
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            if self._all_down_since is None:
                self._all_down_since = self._clock()
        elif err.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE):
            # "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms ...)"
            self._transport_error = re.sub(r" \(after \d+ms.*\)$", "", text.split(": ", 1)[-1])
        if err.fatal():
            self._fatal = err
        now = self._clock()
        if not self._quiet and now - self._error_logged.get(text, -_ERROR_REPEAT_S) >= _ERROR_REPEAT_S:
            self._error_logged[text] = now
            log.warning("producer: %s", text)

    def _replace_producer(self) -> None:
        err, self._fatal = self._fatal, None
        log.error("producer failed (%s); starting a new one", err.str() if err else "fatal error")
        old = self._producer
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.poll(0)  # the purged records come back as failed deliveries
            old.flush(0)
        except (KafkaException, RuntimeError) as e:
            log.warning("discarding the failed producer: %s", e)
        self._producer = self._new_producer()

    def _log_summary(self, now: float) -> None:
        elapsed = now - (self._summary_at - self._summary_interval)
        self._summary_at = now + self._summary_interval
        fresh = self.acked - self._summary_acked
        self._summary_acked = self.acked
        if self._failures_unlogged:
            log.warning("%d more deliveries failed in the last %.0f s", self._failures_unlogged, elapsed)
        self._failure_lines = self._failures_unlogged = 0
        if fresh == 0 and not self._resends and self.sent == self.acked:
            return
        last = ""
        if self._last_delivery is not None:
            topic, partition, offset = self._last_delivery
            last = f" (last: {topic} [{partition}] @ {offset})"
        log.info(
            "acked %d (+%.0f/s), failed %d, resent %d, queued %d%s",
            self.acked, fresh / max(elapsed, 1e-9), self.failed, self.resent, self.stats().queued, last,
        )

    def close(self, timeout: float = 10.0) -> int:
        """Flush and report how many records were left undelivered."""
        left = self.flush(timeout)
        self._log_summary(self._clock())
        return left
