"""Kafka's Java client 4.4 (kafka-clients) beyond transactions: the idempotent producer with each
codec, the consumer reading back and looking offsets up by time, consumer groups rebalancing
(classic with the cooperative sticky assignor, and KIP-848's consumer protocol) and the Admin
client, through the scenarios of compat/java/ (see tests/compat/test_java_client.py for how the
program is run).

What the Java client raises is checked by exception class: those are what an application
catches, and they come from the error codes the broker answers, so a wrong code shows here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import CODECS, Rec, base_timestamp_ms, make_records, stored_codecs, timestamp_queries
from tests.compat.test_java_client import run_java

ERR = "org.apache.kafka.common.errors."


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_producer_codec_roundtrip_and_offsets_by_time(
    broker: BrokerProcess, topic_name: str, codec: str, java_client: list[str]
) -> None:
    """30 keyed records with a header and explicit timestamps, in two batches: offsets 0..29,
    read back equal, the codec stored, and every offset look-up the consumer and the admin
    have (KafkaConsumer.offsetsForTimes / beginningOffsets / endOffsets, Admin.listOffsets
    with forTimestamp / earliest / latest / maxTimestamp)."""
    n = 30
    base = base_timestamp_ms()
    recs = make_records(codec, n, base)
    queries = timestamp_queries(recs)
    out, _ = run_java(java_client, {
        "scenario": "produce-consume", "bootstrap": broker.bootstrap, "topic": topic_name, "codec": codec,
        "records": [{"key": r.key, "value": r.value, "timestamp": r.timestamp, "headers": dict(r.headers)}
                    for r in recs],
        "queryTimestamps": list(queries)})
    assert out["producedOffsets"] == list(range(n))
    # idempotent (the 4.x default): a producer id, and the leader holds its sequence
    pid = out["clientProducerId"]
    assert pid >= 0
    assert out["producers"] == [{"producerId": pid, "producerEpoch": 0, "lastSequence": n - 1}]
    got = out["records"]
    assert [r["offset"] for r in got] == list(range(n))
    assert [Rec(r["key"], r["value"], r["timestamp"], tuple(r["headers"].items())) for r in got] == recs
    assert {r["timestampType"] for r in got} == {"CreateTime"}
    assert stored_codecs(broker.bootstrap, topic_name) == {codec}

    assert (out["beginningOffsets"], out["endOffsets"]) == (0, n)
    admin = out["adminListOffsets"]
    assert admin["earliest"] == [0, -1] and admin["latest"] == [n, -1]
    assert admin["maxTimestamp"] == [n - 1, recs[-1].timestamp]
    for ts, want in queries.items():
        expect = None if want < 0 else [want, recs[want].timestamp]
        assert out["offsetsForTimes"][str(ts)] == expect, f"offsetsForTimes({ts})"
        # the admin reports "none" as offset -1, timestamp -1 (ListOffsets' own answer)
        assert admin["forTimestamp"][str(ts)] == (expect or [-1, -1]), f"listOffsets forTimestamp({ts})"


def partitions_of(events: list[dict[str, Any]], member: str, kind: str) -> list[list[str]]:
    """The non-empty partition sets of one member's callbacks of one kind, in order."""
    return [e["partitions"] for e in events if e["member"] == member and e["kind"] == kind and e["partitions"]]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_members_rebalance_incrementally_without_loss_or_duplicates(
    broker: BrokerProcess, topic_name: str, protocol: str, java_client: list[str]
) -> None:
    """Member a reads a 4-partition topic alone; b joins; b leaves. `classic` uses the
    CooperativeStickyAssignor, `consumer` KIP-848 (the broker's uniform assignor). Both are
    incremental: a gives up only the partitions that move to b (never all of them, never
    "lost"), b hands back exactly those when it leaves, and with commitSync after each poll and
    in onPartitionsRevoked every record is read exactly once."""
    parts = [f"{topic_name}-{p}" for p in range(4)]
    per_phase = 40
    out, _ = run_java(java_client, {
        "scenario": "group-rebalance", "bootstrap": broker.bootstrap, "topic": topic_name,
        "group": f"{topic_name}-g", "partitions": 4, "perPhase": per_phase, "groupProtocol": protocol})
    alone, shared, again = out["phases"]
    assert alone["a"] == parts and again["a"] == parts
    moved = shared["b"]
    assert len(moved) == 2 and sorted(shared["a"] + moved) == parts  # balanced, every partition owned once

    events = out["events"]
    assert not [e for e in events if e["kind"] == "lost"]
    # a: everything at first, then only what b takes is revoked, then it gets exactly that back
    assert partitions_of(events, "a", "assigned") == [parts, moved]
    assert partitions_of(events, "a", "revoked")[:-1] == [moved]
    assert partitions_of(events, "a", "revoked")[-1] == parts  # (its own close)
    # b: gets the moved partitions, gives them back when it leaves
    assert partitions_of(events, "b", "assigned") == [moved]
    assert partitions_of(events, "b", "revoked") == [moved]
    # order: a revokes before b is assigned; b revokes before a gets them back
    order = [(e["member"], e["kind"]) for e in events if e["partitions"]]
    assert order.index(("a", "revoked")) < order.index(("b", "assigned"))
    assert order.index(("b", "revoked")) < len(order) - 1 - order[::-1].index(("a", "assigned"))

    consumed = out["consumed"]
    assert len(consumed) == 3 * per_phase
    seen = Counter((r["partition"], r["offset"]) for r in consumed)
    assert max(seen.values()) == 1  # no duplicates
    assert set(seen) == {(p, o) for p in range(4) for o in range(3 * per_phase // 4)}  # nothing lost
    assert {r["value"] for r in consumed} == {f"p{k}-{i}" for k in (1, 2, 3) for i in range(per_phase)}
    # b read only its partitions; the group's committed offsets are the ends
    assert {f"{topic_name}-{r['partition']}" for r in consumed if r["member"] == "b"} <= set(moved)
    assert out["committed"] == {p: 3 * per_phase // 4 for p in parts}


def test_admin_topics_configs_partitions_records_groups(
    broker: BrokerProcess, topic_name: str, java_client: list[str]
) -> None:
    """Kafka's Admin client, call by call, and the exception class of each call that fails
    (the ones it raises against Kafka)."""
    out, _ = run_java(java_client, {"scenario": "admin", "bootstrap": broker.bootstrap, "topic": topic_name})

    def err(name: str) -> str:
        return f"{ERR}{name}"

    cluster = out["describeCluster"]
    assert cluster["clusterId"] and cluster["controller"] == 0
    assert cluster["nodes"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port}]

    # topics
    assert out["createValidateOnly"] == {"numPartitions": 3}
    assert out["describeValidateOnlyTopic"] == {"error": err("UnknownTopicOrPartitionException")}  # (not created)
    assert out["create"] == {"numPartitions": 2, "replicationFactor": 1, "topicIdSet": True,
                             "retention.ms": "3600000", "max.message.bytes": "200000"}
    assert out["createExisting"] == {"error": err("TopicExistsException")}
    assert out["createInvalidConfigValue"] == {"error": err("InvalidConfigurationException")}
    assert out["createUnknownConfig"] == {"error": err("InvalidConfigurationException")}
    assert out["createBadReplicationFactor"] == {"error": err("InvalidReplicationFactorException")}
    assert out["createBadPartitions"] == {"error": err("InvalidPartitionsException")}
    assert out["createBadName"] == {"error": err("InvalidTopicException")}
    desc = out["describe"]
    assert desc["name"] == topic_name and desc["internal"] is False and desc["topicIdSet"] is True
    assert desc["partitions"] == [{"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in (0, 1)]
    assert out["describeMissing"] == {"error": err("UnknownTopicOrPartitionException")}
    assert out["listTopicsHas"] is True

    # configs: the topic's own values are DYNAMIC_TOPIC_CONFIG, the rest defaults
    def entry(value: str, source: str) -> dict[str, Any]:
        return {"value": value, "source": source, "default": source == "DEFAULT_CONFIG", "readOnly": False,
                "sensitive": False}

    configs = out["configs"]
    assert configs["retention.ms"] == entry("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["max.message.bytes"] == entry("200000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"] == entry("delete", "DEFAULT_CONFIG")
    assert configs["segment.bytes"] == entry("1073741824", "DEFAULT_CONFIG")
    assert out["alterValidateOnly"] == "ok" and out["alter"] == "ok"
    after = out["configsAfterAlter"]  # SET retention.ms, DELETE max.message.bytes, APPEND cleanup.policy
    assert after["retention.ms"] == entry("7200000", "DYNAMIC_TOPIC_CONFIG")  # (not the validate-only 1)
    assert after["max.message.bytes"] == entry("1048588", "DEFAULT_CONFIG")
    assert after["cleanup.policy"] == entry("delete,compact", "DYNAMIC_TOPIC_CONFIG")
    assert out["alterInvalidValue"] == {"error": err("InvalidConfigurationException")}
    assert out["alterUnknownConfig"] == {"error": err("InvalidConfigurationException")}
    assert out["alterMissingTopic"] == {"error": err("UnknownTopicOrPartitionException")}
    assert out["describeConfigsMissingTopic"] == {"error": err("UnknownTopicOrPartitionException")}

    # partitions
    assert out["createPartitions"] == "ok"
    assert [p["partition"] for p in out["describeAfterCreatePartitions"]["partitions"]] == [0, 1, 2, 3]
    assert out["createPartitionsFewer"] == {"error": err("InvalidPartitionsException")}
    assert out["createPartitionsMissingTopic"] == {"error": err("UnknownTopicOrPartitionException")}

    # records: 10 in partition 0, everything before offset 4 deleted
    assert out["deleteRecords"] == 4
    assert out["earliestAfterDeleteRecords"] == [4, -1]
    assert out["deleteRecordsBeyondEnd"] == {"error": err("OffsetOutOfRangeException")}

    # groups: a classic member read partition 0's 6 records and committed
    parts = [f"{topic_name}-{p}" for p in range(4)]
    assert out["groupRead"] == 6
    assert out["listGroupsWhileActive"] == {"type": "Classic", "protocol": "consumer", "state": "Stable",
                                            "simpleConsumerGroup": False}
    active = out["describeGroupWhileActive"]
    assert (active["state"], active["type"], active["assignor"], active["coordinator"]) == (
        "Stable", "Classic", "range", 0)
    assert [m["assignment"] for m in active["members"]] == [parts]
    assert out["alterOffsetsWhileActive"] == {"error": err("UnknownMemberIdException")}
    assert out["deleteOffsetsWhileSubscribed"] == {"error": err("GroupSubscribedToTopicException")}
    assert out["deleteGroupWhileActive"] == {"error": err("GroupNotEmptyException")}
    assert out["listGroupsEmpty"]["state"] == "Empty"
    assert out["describeGroupEmpty"]["state"] == "Empty" and out["describeGroupEmpty"]["members"] == []
    assert out["groupOffsets"] == {parts[0]: [10, ""], parts[1]: [0, ""], parts[2]: [0, ""], parts[3]: [0, ""]}
    assert out["alterOffsets"] == "ok"
    assert out["groupOffsetsAfterAlter"][parts[0]] == [7, "seven"]
    assert out["deleteOffsets"] == "ok"
    assert parts[0] not in out["groupOffsetsAfterDelete"] and parts[1] in out["groupOffsetsAfterDelete"]
    assert out["describeMissingGroup"] == {"error": err("GroupIdNotFoundException")}
    assert out["groupOffsetsMissingGroup"] == {}
    assert out["deleteGroup"] == "ok"
    assert out["listGroupsAfterDelete"] == "absent"
    assert out["deleteMissingGroup"] == {"error": err("GroupIdNotFoundException")}

    # topic deletion
    assert out["deleteTopic"] == "ok"
    assert out["describeDeleted"] == {"error": err("UnknownTopicOrPartitionException")}
    assert out["deleteMissingTopic"] == {"error": err("UnknownTopicOrPartitionException")}


NETWORK_CLIENT_LOGGER = "org.apache.kafka.clients.NetworkClient"


def cluster_id_of(broker: BrokerProcess) -> str:
    """The broker's cluster id, from the meta.properties of its log dir."""
    for line in (broker.log_dir / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1]
    raise AssertionError("no cluster.id in meta.properties")


def api_versions_requests(log: str) -> list[tuple[str, str, str]]:
    """(version, node, request data) of each ApiVersions request the clients sent, from
    NetworkClient's debug log."""
    out = []
    for line in log.splitlines():
        if "Sending API_VERSIONS request" in line:
            version = line.split("apiVersion=", 1)[1].split(",", 1)[0]
            node, data = line.split(" to node ", 1)[1].split(": ", 1)
            out.append((version, node, data))
    return out


def test_api_versions_v5_names_the_cluster_and_node_and_is_answered_at_once(
    broker: BrokerProcess, topic_name: str, java_client: list[str]
) -> None:
    """Kafka 4.4's client opens every connection with ApiVersions v5 (KIP-1242), naming the
    cluster and node it expects once it knows them: Samsa serves v5, so each connection takes
    one ApiVersions (no UNSUPPORTED_VERSION and retry at v4)."""
    recs = make_records("v5", 4, base_timestamp_ms())
    _, log = run_java(java_client, {
        "scenario": "produce-consume", "bootstrap": broker.bootstrap, "topic": topic_name, "codec": "none",
        "records": [{"key": r.key, "value": r.value, "timestamp": r.timestamp, "headers": dict(r.headers)}
                    for r in recs],
        "queryTimestamps": [], "debugLoggers": [NETWORK_CLIENT_LOGGER]})
    sent = api_versions_requests(log)
    assert sent and {v for v, _, _ in sent} == {"5"}
    assert log.count("Received API_VERSIONS response") == len(sent)
    assert "UNSUPPORTED_VERSION" not in log and "Rebootstrap" not in log
    named = [data for _, node, data in sent if f"clusterId='{cluster_id_of(broker)}', nodeId=0" in data]
    assert named and all(node == "0" for _, node, data in sent if data in named)
    # (to the bootstrap address it knows neither)
    assert all("clusterId=null, nodeId=-1" in data for _, node, data in sent if node.startswith("-"))


def test_misrouted_connection_is_refused_and_the_client_rebootstraps(
    broker_factory: Any, topic_name: str, java_client: list[str]
) -> None:
    """Broker `a` advertises itself at broker `b`'s address (another cluster): a Java producer
    bootstrapped at a learns "node 0 of a's cluster" (the partition leader) at b's address and
    names both in its ApiVersions v5 there; b answers REBOOTSTRAP_REQUIRED, so the producer
    goes back to its bootstrap server instead of writing to the wrong cluster, and its record
    times out rather than landing in b."""
    b = broker_factory()
    a = broker_factory(advertised_listeners=f"PLAINTEXT://127.0.0.1:{b.port}")
    out, log = run_java(java_client, {
        "scenario": "produce-one", "bootstrap": a.bootstrap, "topic": topic_name, "timeoutMs": 6000,
        "debugLoggers": [NETWORK_CLIENT_LOGGER]})
    a_id = cluster_id_of(a)
    assert a_id != cluster_id_of(b)
    assert f"Rebootstrap requested by server due to cluster metadata mismatch for cluster {a_id} and node 0" in log
    assert out["send"] == {"error": f"{ERR}TimeoutException"}
    assert not (b.log_dir / f"{topic_name}-0").exists()  # (nothing reached b)
