"""A consumer's fetch waiting at the end of a partition is answered from the append that wakes
it (samsa/handlers/fetch.py, `DelayedFetch`, with samsa/protocol/fetch_tail.py's
`FetchTailFrame`): the frame must be byte for byte the one the
general path (`_read` + `encode_response`) makes, and the general path must still answer
whenever the appended bytes are not exactly what `_read` would return.

These run the real handler on a real `Partition` over a real `Log` in a temporary directory;
only the broker around them is a stand-in (its partition lookup, topics, event loop and the
purgatory the waiting fetch is watched in).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.config import BrokerConfig
from samsa.handlers import fetch
from samsa.metadata.zkdata import PartitionState
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_codec,
)
from samsa.protocol.records import build_batch, scan_batches
from samsa.protocol.schema import Out
from samsa.server import network
from samsa.server.context import RequestContext
from samsa.server.purgatory import Purgatory
from samsa.server.quotas import ClientQuotas
from samsa.server.replica_manager import Partition
from samsa.server.responses import Pending
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

VERSIONS = range(fetch.MIN_VERSION, fetch.MAX_VERSION + 1)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def topic_id(topic: str) -> uuid.UUID:
    """The stand-in topics' ids (Fetch v13+ names topics by id)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, topic)


def leader(tmp_path: Path, topic: str = "t") -> Partition:
    log = Log.open(tmp_path / f"{topic}-0", LogConfig(segment_bytes=1 << 20, retention_ms=-1))
    p = Partition(topic, 0, topic_id(topic), log, node_id=0)
    p.apply_state(PartitionState(leader=0, leader_epoch=3, isr=[0]), [0])
    return p


def broker_of(partition: Partition, loop: asyncio.AbstractEventLoop, *more: Partition) -> Any:
    """A stand-in for the broker's services (`BrokerServices`) the fetch handler uses."""
    by_name = {p.topic: p for p in (partition, *more)}

    def get(topic: str, index: int) -> Partition | None:
        return by_name.get(topic) if index == 0 else None
    purgatory = partition.purgatory = Purgatory(loop)
    for p in more:
        p.purgatory = purgatory
    config = BrokerConfig({"broker.id": "0"})
    topics = {t: SimpleNamespace(name=t, topic_id=p.topic_id, partitions={0: [0]}) for t, p in by_name.items()}
    return SimpleNamespace(replicas=SimpleNamespace(get=get), topics=topics, cluster=SimpleNamespace(brokers={0}),
                           loop=loop, purgatory=purgatory, current_config=lambda: config, quotas=ClientQuotas(),
                           authorizer=None)


def fetch_request(version: int, partitions: list[tuple[str, int, int]], *, partition_max_bytes: int = 1 << 20,
                  max_bytes: int = 50 << 20, min_bytes: int = 1) -> tuple[Any, Any]:
    """(header, request) as the broker decodes them from the wire."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, index, offset in partitions:
        topics.setdefault(topic, []).append({
            "partition": index, "current_leader_epoch": 3, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": partition_max_bytes, "last_fetched_epoch": -1})
    body = {"replica_id": -1, "max_wait": 5000, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "topic_id": topic_id(t).bytes, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [], "rack_id": ""}
    frame = bytes(encode_request(fetch.API_KEY, version, 99, "test", body))[4:]
    header, start = decode_request_header(frame, request_codec(fetch.API_KEY, version).flexible)
    return header, decode_request_body(fetch.API_KEY, version, frame, start)


def append(partition: Partition, n: int, value_size: int = 30) -> None:
    buf = bytearray(build_batch([(b"k%d" % i, bytes(value_size), [], 1_700_000_000_000 + i) for i in range(n)]))
    out = partition.append(buf, scan_batches(buf, verify_crc=True), False)
    assert out.error == ErrorCode.NONE


def general_answer(broker: Any, header: Any, req: Any) -> bytes:
    """The general path's frame: `_read` now, encoded, with its file slices read in."""
    if header.api_version >= fetch.FIRST_TOPIC_ID_VERSION:
        req = fetch._by_topic_id(req)
    responses, _, _, _, _, leaders = fetch._read(context(broker, header), req)
    out = encode_response(fetch.API_KEY, header.api_version, header.correlation_id,
                          fetch._response(responses, leaders=leaders))
    return network._inline(out)


def context(services: Any, header: Any) -> RequestContext:
    return RequestContext(services, SimpleNamespace(peer=("127.0.0.1", 1)), header)  # type: ignore[arg-type]


def wait(broker: Any, header: Any, req: Any) -> Any:
    result = fetch.handle(context(broker, header), req)
    assert isinstance(result, Pending) and not result.done, "the fetch should wait for data"
    answers: list[Any] = []

    def done(value: Any, error: BaseException | None) -> None:
        assert error is None
        # the general path completes with the response body, which dispatch then encodes
        answers.append(value if isinstance(value, Out) else
                       encode_response(fetch.API_KEY, header.api_version, header.correlation_id, value))
    result.on_done(done)
    return answers


@pytest.mark.parametrize("version", VERSIONS)
def test_waiting_fetch_is_answered_from_the_append_with_the_general_paths_bytes(
        tmp_path: Path, loop: asyncio.AbstractEventLoop, version: int) -> None:
    p = leader(tmp_path, "topic-with-a-longer-name" * 3)
    broker = broker_of(p, loop)
    append(p, 5)
    header, req = fetch_request(version, [(p.topic, 0, 5)])
    answers = wait(broker, header, req)
    append(p, 7, value_size=200)  # over 127 bytes: a two-byte length in flexible versions
    assert len(answers) == 1, "the append that brings data answers the waiting fetch"
    out = answers[0]
    assert isinstance(out, Out) and not out.slices, "answered from memory, not by reading the file back"
    assert bytes(out) == general_answer(broker, header, req)


def test_the_answer_carries_the_new_high_watermark_and_log_start(tmp_path: Path,
                                                               loop: asyncio.AbstractEventLoop) -> None:
    p = leader(tmp_path)
    broker = broker_of(p, loop)
    append(p, 3)
    p.log.delete_records_before(2)
    header, req = fetch_request(11, [("t", 0, 3)])
    answers = wait(broker, header, req)
    append(p, 4)
    assert bytes(answers[0]) == general_answer(broker, header, req)
    cid, msg = decode_response(fetch.API_KEY, 11, bytes(answers[0])[4:])
    part = msg.responses[0].partitions[0]
    assert (cid, part.high_watermark, part.last_stable_offset, part.log_start_offset) == (99, 7, 7, 2)
    assert part.error_code == 0 and part.preferred_read_replica == -1


@pytest.mark.parametrize("limit", ["partition_max_bytes", "max_bytes"])
def test_a_batch_over_the_fetch_limits_takes_the_general_path(tmp_path: Path, loop: asyncio.AbstractEventLoop,
                                                              limit: str) -> None:
    p = leader(tmp_path)
    broker = broker_of(p, loop)
    header, req = fetch_request(12, [("t", 0, 0)], **{limit: 100})
    answers = wait(broker, header, req)
    append(p, 10)  # ~500 bytes: over the limit, so the general path applies KIP-74 (first batch whole)
    out = answers[0]
    assert isinstance(out, Out) and out.slices, "the general path answered (a file slice)"
    assert network._inline(out) == general_answer(broker, header, req)


def test_min_bytes_above_the_batch_is_left_to_the_general_path(tmp_path: Path,
                                                               loop: asyncio.AbstractEventLoop) -> None:
    p = leader(tmp_path)
    broker = broker_of(p, loop)
    header, req = fetch_request(12, [("t", 0, 0)], min_bytes=100_000)
    answers = wait(broker, header, req)
    append(p, 2)
    out = answers[0]
    assert isinstance(out, Out) and out.slices, "the general path decided (a file slice)"
    assert network._inline(out) == general_answer(broker, header, req)


def test_a_fetch_of_several_partitions_takes_the_general_path(tmp_path: Path,
                                                              loop: asyncio.AbstractEventLoop) -> None:
    a, b = leader(tmp_path / "a", "a"), leader(tmp_path / "b", "b")
    broker = broker_of(a, loop, b)
    header, req = fetch_request(12, [("a", 0, 0), ("b", 0, 0)])
    answers = wait(broker, header, req)
    append(b, 3)
    out = answers[0]
    assert out.slices, "two partitions: the general path"
    assert network._inline(out) == general_answer(broker, header, req)


def test_the_appended_bytes_are_not_kept_after_the_append(tmp_path: Path) -> None:
    p = leader(tmp_path)
    append(p, 3)
    assert p.just_appended is None


def many(tmp_path: Path, loop: asyncio.AbstractEventLoop, n: int) -> tuple[list[Partition], Any]:
    parts = [leader(tmp_path / f"p{i}", f"p{i}") for i in range(n)]
    return parts, broker_of(parts[0], loop, *parts[1:])


@pytest.mark.parametrize("version", [12, 17])  # (by name, by topic id)
def test_an_append_to_one_of_many_waiting_partitions_costs_one_read(tmp_path: Path, loop: asyncio.AbstractEventLoop,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   version: int) -> None:
    """A fetch waiting on many partitions (a fetch session's are thousands) is checked, at an
    append to one of them, by looking at that partition alone: appends that bring nothing
    read nothing, and the one that brings data completes it with one read, the answer's."""
    parts, broker = many(tmp_path, loop, 30)
    header, req = fetch_request(version, [(p.topic, 0, 0) for p in parts])
    answers = wait(broker, header, req)
    reads: list[int] = []
    real = fetch._read
    monkeypatch.setattr(fetch, "_read", lambda *a, **kw: reads.append(1) or real(*a, **kw))
    for p in parts:  # a check with no news, as a role or high-watermark change brings
        broker.purgatory.check_and_complete(p)
    assert not answers and not reads
    append(parts[17], 3)
    assert len(answers) == 1 and len(reads) == 1, (len(answers), len(reads))
    monkeypatch.setattr(fetch, "_read", real)
    assert network._inline(answers[0]) == general_answer(broker, header, req)


def test_min_bytes_over_many_partitions_is_summed_by_the_general_read(tmp_path: Path,
                                                                      loop: asyncio.AbstractEventLoop) -> None:
    parts, broker = many(tmp_path, loop, 5)
    header, req = fetch_request(12, [(p.topic, 0, 0) for p in parts], min_bytes=600)
    answers = wait(broker, header, req)
    append(parts[1], 2)  # ~140 bytes: not enough
    append(parts[3], 2)
    assert not answers
    append(parts[4], 10)  # now over 600 in all
    assert len(answers) == 1
    assert network._inline(answers[0]) == general_answer(broker, header, req)
