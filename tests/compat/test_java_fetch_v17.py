"""Kafka's Java consumer (kafka-clients 4.4) fetches with the newest Fetch version the broker
offers: v17 here, topics named by id (KIP-516) in fetch sessions; its producer sends Produce
v13, topics by id too. The broker's request log
(`samsa broker start --request-log`, Kafka's kafka.request.logger) shows the versions it got,
and the records come back whole, through a session, over a rebalance of a consumer group.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.handlers import fetch
from tests.brokerproc import BrokerProcess
from tests.compat.helpers import make_records
from tests.compat.test_java_client import run_java

REQUEST = re.compile(r"Received (\w+) v(\d+) from \S+ \(client id ([^,]*),")


@pytest.fixture(scope="module")
def logged_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker-request-log"), args=["--request-log"])
    b.start()
    yield b
    b.close()


def versions(log_path: Path, api: str) -> Counter[tuple[str, int]]:
    """(client id, version) of each `api` request in the broker's request log."""
    return Counter((m.group(3), int(m.group(2))) for m in REQUEST.finditer(log_path.read_text())
                   if m.group(1) == api)


def test_the_java_consumer_fetches_at_v17_by_topic_id(logged_broker: BrokerProcess, topic_name: str,
                                                      java_client: list[str]) -> None:
    assert fetch.MAX_VERSION == 17
    recs = make_records("v17", 50, 1_700_000_000_000)
    out, _ = run_java(java_client, {
        "scenario": "produce-consume", "bootstrap": logged_broker.bootstrap, "topic": topic_name, "codec": "lz4",
        "records": [{"key": r.key, "value": r.value, "timestamp": r.timestamp, "headers": dict(r.headers)}
                    for r in recs],
        "queryTimestamps": []})
    assert [r["offset"] for r in out["records"]] == list(range(50))
    assert [r["value"] for r in out["records"]] == [r.value for r in recs]
    fetches = versions(logged_broker.log_path, "fetch")
    assert fetches and {v for _, v in fetches} == {17}, fetches
    # and the other newest versions it speaks: Produce v13 (topic ids), Metadata v13, ListOffsets v11
    for api, version in (("produce", 13), ("metadata", 13), ("list_offsets", 11)):
        assert {v for _, v in versions(logged_broker.log_path, api)} == {version}, api


def test_a_java_group_rebalances_over_fetch_sessions_by_topic_id(logged_broker: BrokerProcess, topic_name: str,
                                                                 java_client: list[str]) -> None:
    """Two members, a partition moving between them: each member's fetch session adds and
    forgets partitions by topic id; nothing is lost or read twice."""
    before = versions(logged_broker.log_path, "fetch")
    out, _ = run_java(java_client, {
        "scenario": "group-rebalance", "bootstrap": logged_broker.bootstrap, "topic": topic_name,
        "group": f"{topic_name}-g", "partitions": 4, "perPhase": 40, "groupProtocol": "classic"})
    consumed = out["consumed"]
    seen = Counter((r["partition"], r["offset"]) for r in consumed)
    assert len(consumed) == 120 and max(seen.values()) == 1
    assert set(seen) == {(p, o) for p in range(4) for o in range(30)}
    new = versions(logged_broker.log_path, "fetch") - before
    assert sum(new.values()) > 4 and {v for _, v in new} == {17}, new
