"""Apache Kafka's own Java client (kafka-clients 4.4) against a real Samsa broker, through
compat/java/SamsaJavaClient.java (a JSON spec in, a JSON result as the last line of stdout).

The Java client is the reference: it is stricter than librdkafka about versions and error
codes, and it is the one client that knows transaction version 2 (KIP-890 part 2), which Samsa
finalizes in ApiVersions. Each test runs one scenario of the program and checks what it
observed: the records read_committed and read_uncommitted consumers get, the producer epochs
the coordinator (DescribeTransactions), the partition leaders (DescribeProducers) and the
producer itself hold, the consumer group's committed offsets (Admin.listConsumerGroupOffsets),
and the exception a fenced producer gets.

Each transaction test runs twice: on the session's broker, which finalizes transaction.version
at 2, and on one started with `transaction.version=1`, where the same client uses version 1
(AddPartitionsToTxn, AddOffsetsToTxn, no epoch bump at EndTxn). The client has no setting of its
own for this: it follows the broker's finalized level.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess

TXN_MANAGER_LOGGER = "org.apache.kafka.clients.producer.internals.TransactionManager"


@pytest.fixture(scope="module")
def tv1_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker finalizing transaction.version at 1."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker-tv1"), {"transaction.version": "1"})
    b.start()
    yield b
    b.close()


@pytest.fixture(params=[2, 1], ids=["tv2", "tv1"])
def txn_broker(request: pytest.FixtureRequest) -> tuple[BrokerProcess, int]:
    """(a broker, the transaction version it finalizes)."""
    level: int = request.param
    return request.getfixturevalue("broker" if level == 2 else "tv1_broker"), level


def sent_requests(log: str) -> list[str]:
    """The transactional requests the producer queued, from its TransactionManager's debug log."""
    return [line.split("Enqueuing transactional request ", 1)[1].split("(", 1)[0]
            for line in log.splitlines() if "Enqueuing transactional request " in line]


def run_java(cmd: list[str], spec: dict[str, Any], timeout: float = 240) -> tuple[dict[str, Any], str]:
    """Run one scenario; its result and the client's log (stderr)."""
    proc = subprocess.run(cmd + [json.dumps(spec)], capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"the Java client printed nothing (rc {proc.returncode}): {proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert proc.returncode == 0 and "error" not in out, f"Java client: {out.get('error')}\n{proc.stderr[-4000:]}"
    return out, proc.stderr


def values(records: list[dict[str, Any]], partition: int) -> list[str]:
    return [r["value"] for r in records if r["partition"] == partition]


def offsets(records: list[dict[str, Any]], partition: int) -> list[int]:
    return [r["offset"] for r in records if r["partition"] == partition]


def test_commit_abort_commit_and_isolation_levels(txn_broker: tuple[BrokerProcess, int], topic_name: str,
                                                  java_client: list[str]) -> None:
    """Three transactions of 10 records over 2 partitions (5 each): commit, abort, commit."""
    broker, _ = txn_broker
    out, _ = run_java(java_client, {"scenario": "txn-commit-abort", "bootstrap": broker.bootstrap,
                                    "topic": topic_name, "count": 10, "partitions": 2})
    for p in (0, 1):
        mine = range(p, 10, 2)
        committed = [f"c1-{i}" for i in mine] + [f"c3-{i}" for i in mine]
        assert values(out["committed"], p) == committed
        assert values(out["uncommitted"], p) == [f"c1-{i}" for i in mine] + [f"a2-{i}" for i in mine] + [
            f"c3-{i}" for i in mine]
        # each transaction's marker takes one offset (5, 11, 17), and no consumer sees it
        assert offsets(out["committed"], p) == [0, 1, 2, 3, 4, 12, 13, 14, 15, 16]
        assert offsets(out["uncommitted"], p) == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16]


def test_the_transaction_version_the_broker_finalizes_is_used(txn_broker: tuple[BrokerProcess, int],
                                                              topic_name: str, java_client: list[str]) -> None:
    """KIP-890 part 2. At transaction.version 2 the client adds partitions by producing (no
    AddPartitionsToTxn) and every EndTxn (v5) bumps the epoch, which the coordinator, the client
    and the partition leaders then agree on. At 1 it sends AddPartitionsToTxn and keeps its
    epoch."""
    broker, level = txn_broker
    out, log = run_java(java_client, {"scenario": "txn-commit-abort", "bootstrap": broker.bootstrap,
                                      "topic": topic_name, "count": 4, "partitions": 2,
                                      "debugLoggers": [TXN_MANAGER_LOGGER]})
    v2 = level >= 2
    assert out["transactionV2"] is v2
    assert f"Updating isTV2 enabled to {str(v2).lower()}" in log
    txns = out["transactions"]
    assert [t["step"] for t in txns] == ["init", "commit", "abort", "commit"]
    pid, e0 = txns[0]["producerId"], txns[0]["producerEpoch"]
    assert txns[0]["state"] == "Empty"
    bump = 1 if v2 else 0
    epochs = [e0, e0 + bump, e0 + 2 * bump, e0 + 3 * bump]
    assert [t["producerEpoch"] for t in txns] == epochs  # the coordinator's
    assert [t["clientProducerEpoch"] for t in txns] == epochs  # the client's (EndTxn v5's answer)
    assert {t["producerId"] for t in txns} == {t["clientProducerId"] for t in txns} == {pid}
    outcomes = [t["state"].removeprefix("Prepare").removeprefix("Complete") for t in txns[1:]]
    assert outcomes == ["Commit", "Abort", "Commit"]  # (PrepareCommit until the markers are written)
    # the last markers carry the last epoch; no transaction open anywhere
    assert out["producers"] == {
        f"{topic_name}-{p}": [{"producerId": pid, "producerEpoch": epochs[-1], "currentTransactionStartOffset": -1}]
        for p in (0, 1)}
    sent = sent_requests(log)
    assert sent.count("EndTxnRequestData") == 3, sent
    if v2:
        assert "AddPartitionsToTxnRequestData" not in sent
    else:  # (one a transaction, and again when the previous one's markers were still being written)
        assert sent.count("AddPartitionsToTxnRequestData") >= 3, sent


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_consume_transform_produce_with_send_offsets(
    txn_broker: tuple[BrokerProcess, int], topic_name: str, java_client: list[str], group_protocol: str
) -> None:
    """sendOffsetsToTransaction(offsets, consumer.groupMetadata()) in each transaction (7
    records a poll): the group's committed offsets are the input's ends afterwards, and the
    output holds every record once. `consumer` is KIP-848's group protocol."""
    broker, level = txn_broker
    n = 30
    group = f"{topic_name}-g"
    out, log = run_java(java_client, {
        "scenario": "txn-consume-transform-produce", "bootstrap": broker.bootstrap,
        "input": f"{topic_name}-in", "output": f"{topic_name}-out", "group": group, "count": n,
        "partitions": 2, "maxPollRecords": 7, "groupProtocol": group_protocol,
        "debugLoggers": [TXN_MANAGER_LOGGER]})
    assert out["copied"] == n
    assert out["transactions"] >= 5  # (at most 7 records a poll)
    assert out["groupOffsets"] == {f"{topic_name}-in-0": n // 2, f"{topic_name}-in-1": n // 2}
    got = sorted((r["partition"], r["value"]) for r in out["output"])
    assert got == sorted((i % 2, f"out-in-{i}") for i in range(n))
    assert out["transactionV2"] is (level >= 2)
    sent = sent_requests(log)
    assert "TxnOffsetCommitRequestData" in sent
    if level >= 2:  # the offsets go straight to the group coordinator (TxnOffsetCommit v5)
        assert "AddOffsetsToTxnRequestData" not in sent and "AddPartitionsToTxnRequestData" not in sent, sent
    else:
        # one a transaction, and its retries: a transaction begun while the last one's markers are
        # still being written gets CONCURRENT_TRANSACTIONS, and the client sends it again
        assert sent.count("AddOffsetsToTxnRequestData") >= out["transactions"], sent


FENCED = ("org.apache.kafka.common.errors.ProducerFencedException",
          "org.apache.kafka.common.errors.InvalidProducerEpochException")


@pytest.mark.parametrize("send_after_fence", [False, True], ids=["commit", "send-then-commit"])
def test_second_producer_fences_the_first(
    txn_broker: tuple[BrokerProcess, int], topic_name: str, java_client: list[str], send_after_fence: bool
) -> None:
    """Producer 1 writes 10 records in an open transaction; producer 2 with the same
    transactional id calls initTransactions: 1's transaction is aborted, its commit fails, and
    only producer 2's records are committed. A record producer 1 sends after being fenced is
    refused by the partition leader (INVALID_PRODUCER_EPOCH, as Kafka answers a fenced
    producer's Produce) and never written."""
    broker, _ = txn_broker
    out, _ = run_java(java_client, {"scenario": "txn-fencing", "bootstrap": broker.bootstrap, "topic": topic_name,
                                    "count": 10, "partitions": 2, "sendAfterFence": send_after_fence})
    assert out["firstCommit"] in FENCED
    if send_after_fence:
        assert out["lateSend"] in FENCED
    first, second = out["first"], out["second"]
    assert second["producerId"] == first["producerId"]
    assert second["producerEpoch"] > first["producerEpoch"]
    assert second["state"] == "Empty"  # (the first's transaction was aborted before the second began)
    for p in (0, 1):
        mine = range(p, 10, 2)
        assert values(out["committed"], p) == [f"p2-{i}" for i in mine]
        # producer 1's records reached the log and stay there, aborted
        assert values(out["uncommitted"], p) == [f"p1-{i}" for i in mine] + [f"p2-{i}" for i in mine]
