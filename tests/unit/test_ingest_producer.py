"""IngestProducer against a scripted librdkafka stand-in: counters, resend, fatal errors, config."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from confluent_kafka import KafkaError

from samsa.pipeline.ingest import producer as ingest_producer
from samsa.pipeline.ingest.producer import IngestProducer
from tests.pipeline.ingest_fakes import FakeKafkaProducer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock | None = None, conf: dict[str, Any] | None = None) -> tuple[IngestProducer, FakeKafkaProducer]:
    FakeKafkaProducer.made.clear()
    p = IngestProducer("h:1", conf, producer_factory=FakeKafkaProducer, clock=clock or Clock())
    return p, FakeKafkaProducer.made[-1]


TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT)


def test_pipeline_settings_and_overrides() -> None:
    _, fake = make(conf={"linger.ms": "50"})
    assert fake.conf["acks"] == "all"
    assert fake.conf["enable.idempotence"] is True
    assert fake.conf["partitioner"] == "murmur2_random"
    assert fake.conf["bootstrap.servers"] == "h:1"
    assert fake.conf["linger.ms"] == "50"
    assert callable(fake.conf["error_cb"])


def test_counts_acks_and_failures_and_logs_offsets(caplog: pytest.LogCaptureFixture) -> None:
    p, fake = make()
    fake.outcomes.extend([None, TIMED_OUT, None])
    acked: list[Any] = []
    with caplog.at_level(logging.DEBUG, "samsa.ingest"):
        p._debug = True
        p.send("t", b"a", b"k")
        p.send("t", b"b", b"k")
        p.send("t", b"c", b"k", on_ack=acked.append)
        p.poll()
    st = p.stats()
    assert (st.sent, st.acked, st.failed, st.resent, st.queued) == (3, 2, 1, 0, 0)
    assert [m.value() for m in acked] == [b"c"]
    assert "delivered to t [0] @ 0" in caplog.text
    assert "delivery to t failed: Local: Message timed out (dropped)" in caplog.text


def test_a_finally_failed_record_is_resent_after_a_pause_until_acknowledged() -> None:
    clock = Clock()
    p, fake = make(clock)
    fake.outcomes.extend([TIMED_OUT, TIMED_OUT])  # fails twice, then succeeds
    acked: list[Any] = []
    p.send("t", b"v", b"k", on_ack=acked.append, resend=True)
    p.poll()
    assert fake.produced == [("t", b"v", b"k")] and p.stats().queued == 1
    clock.now += ingest_producer.RESEND_INITIAL_S - 0.01
    p.poll()
    assert len(fake.produced) == 1, "resent before its pause"
    clock.now += 0.02
    p.poll()  # resent, fails again: the next pause doubles
    p.poll()
    assert len(fake.produced) == 2
    clock.now += ingest_producer.RESEND_INITIAL_S * 2 - 0.01
    p.poll()
    assert len(fake.produced) == 2
    clock.now += 0.02
    p.poll()
    p.poll()
    assert fake.produced == [("t", b"v", b"k")] * 3
    assert [m.value() for m in acked] == [b"v"]
    st = p.stats()
    assert (st.sent, st.acked, st.failed, st.resent, st.queued) == (3, 1, 2, 2, 0)


def test_without_resend_a_failure_is_not_sent_again() -> None:
    clock = Clock()
    p, fake = make(clock)
    fake.outcomes.append(TIMED_OUT)
    p.send("t", b"v")
    p.poll()
    clock.now += 100
    p.poll()
    assert len(fake.produced) == 1 and p.stats().failed == 1 and p.stats().queued == 0


def test_flush_resends_without_waiting_for_the_pause() -> None:
    p, fake = make()
    fake.outcomes.append(TIMED_OUT)
    acked: list[Any] = []
    p.send("t", b"v", on_ack=acked.append, resend=True)
    assert p.flush(1.0) == 0
    assert len(fake.produced) == 2 and len(acked) == 1


def test_a_full_queue_is_waited_out_in_send_and_send_batch() -> None:
    p, fake = make()
    fake.buffer_full = 2
    p.send("t", b"a")
    fake.buffer_full = 1
    p.send_batch("t", [b"k1", b"k2", b"k3"], [b"1", b"2", b"3"])
    assert [v for _, v, _ in fake.produced] == [b"a", b"1", b"2", b"3"]
    assert p.stats().sent == 4


def test_a_fatal_error_replaces_the_producer_and_resends_what_it_held() -> None:
    p, first = make()
    acked: list[Any] = []
    first.stalled = True
    p.send("t", b"v", on_ack=acked.append, resend=True)
    first.conf["error_cb"](KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    p.poll()  # replaces the producer; the purged record failed and waits to be resent
    assert first.purged and len(FakeKafkaProducer.made) == 2
    assert p.flush(1.0) == 0
    second = FakeKafkaProducer.made[-1]
    assert second.produced == [("t", b"v", None)] and len(acked) == 1


def test_check_connection_reports_the_transport_error() -> None:
    clock = Clock()
    p, fake = make(clock)

    def down(topic: Any = None, timeout: float = 0.0) -> Any:
        from confluent_kafka import KafkaException

        fake.conf["error_cb"](KafkaError(KafkaError._TRANSPORT, "h:1/bootstrap: Connect to ipv4#1.2.3.4:1 failed: "
                                         "Connection refused (after 0ms in state CONNECT)"))
        fake.conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
        clock.now += 0.6
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    fake.list_topics = down  # type: ignore[method-assign]
    with pytest.raises(ingest_producer.IngestError, match=r"cannot connect to h:1: Connect to ipv4#1.2.3.4:1 failed: "
                       r"Connection refused$"):
        p.check_connection(timeout=10)
