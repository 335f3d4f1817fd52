"""TxnOffsetCommit on a real broker, over TCP with raw requests: the offsets stay pending (OffsetFetch
shows the committed one; with require_stable, UNSTABLE_OFFSET_COMMIT) until the transaction's marker,
also across a kill -9; the marker, sent with WriteTxnMarkers, makes them committed for good.

The producer is a real transactional one (InitProducerId), and TxnOffsetCommit v5 adds the offsets
partition to its transaction (KIP-890's transaction version 2)."""

from __future__ import annotations

import time

from samsa.coordinator.records import partition_for
from samsa.protocol.errors import ErrorCode
from tests.brokerproc import BrokerProcess
from tests.groups.test_groups_clients import create
from tests.rawclient import RawClient

E = ErrorCode
OFFSETS_PARTITIONS = 3
CONFIG = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}


def commit(c: RawClient, group: str, topic: str, offset: int) -> None:
    r = c.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]}]})
    assert r.topics[0].partitions[0].error_code == 0


def txn_commit(c: RawClient, group: str, topic: str, offset: int, producer: tuple[int, int], version: int = 3) -> int:
    r = c.request(28, version, {"transactional_id": "txn-offsets-test", "group_id": group,
                                "producer_id": producer[0], "producer_epoch": producer[1],
                                "generation_id": -1, "member_id": "", "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": offset,
                                     "committed_metadata": "txn"}]}]})
    (t,) = r.topics
    (p,) = t.partitions
    return int(p.error_code)


def fetch(c: RawClient, group: str, topic: str, *, stable: bool) -> tuple[int, int]:
    """(committed offset, error code) of partition 0, OffsetFetch v8."""
    r = c.request(9, 8, {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
                         "require_stable": stable})
    (g,) = r.groups
    assert g.error_code == 0
    (p,) = g.topics[0].partitions
    return int(p.committed_offset), int(p.error_code)


def api_versions(c: RawClient) -> dict[int, tuple[int, int]]:
    r = c.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def test_txn_offsets_are_pending_until_the_marker_and_survive_kill9(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(**CONFIG)
    create(b, topic_name, 1)
    with RawClient(b.bootstrap) as c:
        assert api_versions(c)[28] == (0, 5)
        producer, version = producer_for(c)
        commit(c, "eos", topic_name, 5)
        assert txn_commit(c, "eos", topic_name, 10, producer, version) == 0
        assert fetch(c, "eos", topic_name, stable=False) == (5, 0)
        assert fetch(c, "eos", topic_name, stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        # An unknown partition is refused; the group's other answers are unchanged.
        r = c.request(28, 3, {"transactional_id": "t", "group_id": "eos", "producer_id": 9001, "producer_epoch": 0,
                              "generation_id": -1, "member_id": "", "group_instance_id": None,
                              "topics": [{"name": topic_name, "partitions": [
                                  {"partition_index": 7, "committed_offset": 1, "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    b.kill9()
    b.start()
    with RawClient(b.bootstrap) as c:  # replayed from the log: the transactional batch is still pending
        assert fetch(c, "eos", topic_name, stable=False) == (5, 0)
        assert fetch(c, "eos", topic_name, stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)


def producer_for(c: RawClient) -> tuple[tuple[int, int], int]:
    """A producer id and epoch (a transactional one when the broker grants it) and the
    TxnOffsetCommit version to use (v5 adds the offsets partition to the transaction itself)."""
    retriable = {E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                 E.CONCURRENT_TRANSACTIONS}
    deadline = time.monotonic() + 30
    while True:
        r = c.request(22, 4, {"transactional_id": "txn-offsets-test", "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        if r.error_code == 0:
            return (int(r.producer_id), int(r.producer_epoch)), 5
        if r.error_code not in retriable or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # (the coordinator loads __transaction_state: nothing on the wire to wait on)
    raise AssertionError(f"InitProducerId kept failing: {r.error_code}")


def write_marker(c: RawClient, producer: tuple[int, int], commit: bool, index: int) -> None:
    r = c.request(27, 1, {"markers": [{"producer_id": producer[0], "producer_epoch": producer[1],
                                       "transaction_result": commit, "coordinator_epoch": 0,
                                       "topics": [{"name": "__consumer_offsets", "partition_indexes": [index]}]}]})
    codes = [p.error_code for m in r.markers for t in m.topics for p in t.partitions]
    assert codes == [0], codes


def test_write_txn_markers_commits_pending_offsets_end_to_end(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b: BrokerProcess = broker_factory(**CONFIG)
    create(b, topic_name, 1)
    group = "eos-e2e"
    index = partition_for(group, OFFSETS_PARTITIONS)
    with RawClient(b.bootstrap) as c:
        producer, version = producer_for(c)
        commit(c, group, topic_name, 5)
        assert txn_commit(c, group, topic_name, 10, producer, version) == 0
        assert fetch(c, group, topic_name, stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        write_marker(c, producer, True, index)
        assert fetch(c, group, topic_name, stable=True) == (10, 0)
        # An aborted transaction leaves the committed offset as it was.
        assert txn_commit(c, group, topic_name, 20, producer, version) == 0
        write_marker(c, producer, False, index)
        assert fetch(c, group, topic_name, stable=True) == (10, 0)
    b.kill9()
    b.start()
    with RawClient(b.bootstrap) as c:  # replayed with its markers
        assert fetch(c, group, topic_name, stable=True) == (10, 0)
