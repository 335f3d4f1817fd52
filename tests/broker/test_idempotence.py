"""The idempotent producer: a retried batch is stored once, a sequence gap is refused."""

from __future__ import annotations

import time

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from tests.broker.test_bad_input import create_topic, latest_offset, produce
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


def init_producer_id(c: RawClient) -> tuple[int, int]:
    resp = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def seq_batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, b"r%d" % (seq + i), [], now) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_retried_batch_is_stored_once_and_gaps_are_refused(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = init_producer_id(c)
        first = produce(c, topic_name, seq_batch(pid, epoch, 0))
        assert (first.error_code, first.base_offset) == (0, 0)
        retry = produce(c, topic_name, seq_batch(pid, epoch, 0))  # the same batch again, as after a lost ack
        assert (retry.error_code, retry.base_offset) == (0, 0)
        assert latest_offset(c, topic_name) == 2
        second = produce(c, topic_name, seq_batch(pid, epoch, 2))
        assert (second.error_code, second.base_offset) == (0, 2)
        gap = produce(c, topic_name, seq_batch(pid, epoch, 7))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert latest_offset(c, topic_name) == 4
        # After a fatal sequence error the producer bumps its epoch (itself, KIP-360) and
        # restarts at sequence 0; InitProducerId naming its id and epoch gets a new id, as in Kafka.
        resp = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000,
                                 "producer_id": pid, "producer_epoch": epoch})
        assert resp.error_code == 0 and resp.producer_id not in (-1, pid) and resp.producer_epoch == 0
        assert produce(c, topic_name, seq_batch(pid, epoch + 1, 0)).error_code == 0
        stale = produce(c, topic_name, seq_batch(pid, epoch, 4))
        assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert latest_offset(c, topic_name) == 6


def test_producer_ids_are_unique(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        ids = {init_producer_id(c)[0] for _ in range(5)}
    assert len(ids) == 5


def test_duplicate_detected_after_restart(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = init_producer_id(c)
        assert produce(c, topic_name, seq_batch(pid, epoch, 0)).error_code == 0
    b.kill9()
    b.start()
    with RawClient(b.bootstrap) as c:
        retry = produce(c, topic_name, seq_batch(pid, epoch, 0))
        assert (retry.error_code, retry.base_offset) == (0, 0)
        assert latest_offset(c, topic_name) == 2
        assert init_producer_id(c)[0] != pid  # ids are never handed out twice
