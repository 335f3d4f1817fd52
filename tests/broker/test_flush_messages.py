"""flush.messages on a real broker: the log is flushed (in a worker thread, the event loop never
waits for the disk) before the produce is answered; the recovery point, checkpointed to the log
dir, follows each answer. A topic without it is not flushed."""

from __future__ import annotations

import time
from typing import Any

from samsa.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets
from tests.broker.test_bad_input import batch, create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

PRODUCE_V = 9


def produce(c: RawClient, topic: str, acks: int) -> Any:
    resp = c.request(0, PRODUCE_V, {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": bytes(batch(n=2))}]}]})
    return resp.responses[0].partition_responses[0]


def test_each_answer_comes_after_the_flush_that_flush_messages_asks_for(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory(**{"log.flush.offset.checkpoint.interval.ms": "50"})
    with RawClient(b.bootstrap) as c:
        create_topic(c, "every", configs={"flush.messages": "1"})
        create_topic(c, "never")
        for acks in (1, -1, 1, -1, 1):
            for topic in ("every", "never"):
                r = produce(c, topic, acks)
                assert r.error_code == 0, r
    deadline = time.monotonic() + 30
    while True:  # the checkpoint is written every 50 ms from the recovery points
        points = read_offsets(b.log_dir / RECOVERY_POINT_CHECKPOINT)
        if points.get(("every", 0)) == 10:
            break
        assert time.monotonic() < deadline, f"the recovery points checkpointed: {points}"
        time.sleep(0.05)
    assert points.get(("never", 0), 0) == 0  # (flush.messages unset: nothing flushed it)
    assert "Event loop stalled" not in b.log_text()
