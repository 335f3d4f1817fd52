"""The broker console's view from hand-made observations: liveness, under-replicated and offline
partitions, sizes, configs and lag, by table (no broker, no clock)."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.pipeline.dashboard.console import (
    CleanerLog,
    ConfigInfo,
    GroupInfo,
    LogDirInfo,
    MemberInfo,
    Observation,
    PartitionInfo,
    TopicInfo,
    build_view,
    lag,
    offline,
    starting_view,
    under_replicated,
    unreachable_view,
)


def part(p: int, leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionInfo:
    return PartitionInfo(p, leader, replicas, isr)


@pytest.mark.parametrize(("leader", "replicas", "isr", "urp", "is_offline"), [
    (0, (0, 1, 2), (0, 1, 2), False, False),
    (0, (0, 1, 2), (0, 1), True, False),
    (1, (0, 1, 2), (1,), True, False),
    (-1, (0, 1, 2), (0,), True, True),  # no leader: offline, and under-replicated as well
    (-1, (2,), (2,), False, True),
    (0, (0,), (0,), False, False),
])
def test_under_replicated_and_offline(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...], urp: bool,
                                      is_offline: bool) -> None:
    p = part(0, leader, replicas, isr)
    assert (under_replicated(p), offline(p)) == (urp, is_offline)


@pytest.mark.parametrize(("committed", "hw", "expected"), [
    (10, 25, 15),
    (25, 25, 0),
    (0, 0, 0),
    (None, 25, None),  # nothing committed
    (-1, 25, None),  # OffsetFetch's "no offset"
    (10, None, None),  # the high watermark unknown (ListOffsets failed)
    (30, 25, -5),  # as kafka-consumer-groups.sh: not clamped (a truncated log)
])
def test_lag(committed: int | None, hw: int | None, expected: int | None) -> None:
    assert lag(committed, hw) == expected


def three_brokers() -> Observation:
    obs = Observation(polled_ms=1_000, cluster_id="c1", controller=1,
                      brokers={0: ("h", 9092), 1: ("h", 9093)})  # 2 is missing from Metadata
    obs.topics = {
        "orders": TopicInfo("orders", False, (
            part(0, 0, (0, 1, 2), (0, 1)),  # 2 out of the ISR
            part(1, 1, (1, 2, 0), (1, 0)),
            part(2, -1, (2,), (2,)),  # its only replica is down
        )),
        "__consumer_offsets": TopicInfo("__consumer_offsets", True, (part(0, 1, (1, 0, 2), (1, 0, 2)),)),
    }
    obs.log_start_offsets = {("orders", 0): 5, ("orders", 1): 0, ("__consumer_offsets", 0): 0}
    obs.high_watermarks = {("orders", 0): 105, ("orders", 1): 40, ("__consumer_offsets", 0): 7}
    obs.log_dirs = {
        0: [LogDirInfo("/d0", None, {("orders", 0): 1000, ("orders", 1): 400, ("__consumer_offsets", 0): 70})],
        1: [LogDirInfo("/d1a", None, {("orders", 0): 990}),
            LogDirInfo("/d1b", "KAFKA_STORAGE_ERROR", {("orders", 1): 410, ("__consumer_offsets", 0): 71})],
    }
    obs.configs = {"orders": [ConfigInfo("cleanup.policy", "delete", "DEFAULT_CONFIG"),
                              ConfigInfo("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"),
                              ConfigInfo("segment.bytes", "1048576", "STATIC_BROKER_CONFIG"),
                              ConfigInfo("secret", "s3cr3t", "DYNAMIC_TOPIC_CONFIG", sensitive=True)]}
    return obs


def by(rows: list[dict[str, Any]], key: str) -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in rows}


def test_brokers_up_down_controller_and_counts() -> None:
    obs = three_brokers()
    known: dict[int, tuple[str, int] | None] = {0: ("h", 9092), 1: ("h", 9093), 2: ("h", 9094), 3: ("h", 9095)}
    view = build_view(obs, known, 3.0)
    brokers = by(view["brokers"], "id")
    assert [(b, r["up"], r["controller"]) for b, r in brokers.items()] == [
        (0, True, False), (1, True, True), (2, False, False), (3, False, False)]
    assert (brokers[2]["host"], brokers[2]["port"]) == ("h", 9094)  # known from an earlier poll
    assert [brokers[b]["leaders"] for b in range(4)] == [1, 2, 0, 0]
    assert [brokers[b]["replicas"] for b in range(4)] == [3, 3, 4, 0]
    assert [brokers[b]["under_replicated"] for b in range(4)] == [1, 1, 0, 0]  # of those it leads
    assert brokers[0]["bytes"] == 1470 and brokers[1]["bytes"] == 990 + 410 + 71 and brokers[2]["bytes"] is None
    assert brokers[1]["log_dirs"] == [{"path": "/d1a", "error": None, "bytes": 990},
                                      {"path": "/d1b", "error": "KAFKA_STORAGE_ERROR", "bytes": 481}]
    assert view["summary"] == {"brokers": 4, "brokers_up": 2, "topics": 2, "partitions": 4, "under_replicated": 2,
                               "offline": 1, "groups": 0, "total_lag": 0}


def test_a_replica_never_seen_in_metadata_is_listed_down_without_an_address() -> None:
    obs = Observation(polled_ms=0, controller=0, brokers={0: ("h", 1)})
    obs.topics = {"t": TopicInfo("t", False, (part(0, 0, (0, 7), (0,)),))}
    brokers = by(build_view(obs, {}, 1.0)["brokers"], "id")
    assert brokers[7] == {"id": 7, "host": None, "port": None, "up": False, "controller": False, "leaders": 0,
                          "replicas": 1, "under_replicated": 0, "bytes": None, "log_dirs": None}


def test_topics_sizes_offsets_and_configs() -> None:
    view = build_view(three_brokers(), {}, 3.0)
    assert [t["name"] for t in view["topics"]] == ["orders", "__consumer_offsets"]  # internal ones last
    orders, offsets = view["topics"]
    assert (orders["internal"], offsets["internal"]) == (False, True)
    assert (orders["replication_factor"], orders["under_replicated"], orders["offline"]) == (3, 2, 1)
    parts = by(orders["partitions"], "partition")
    assert parts[0] == {"partition": 0, "leader": 0, "replicas": [0, 1, 2], "isr": [0, 1], "log_start_offset": 5,
                        "high_watermark": 105, "size": 1000, "error": None}
    assert parts[1]["size"] == 410  # the leader's copy (broker 1's), not broker 0's 400
    assert parts[2]["size"] is None and parts[2]["high_watermark"] is None  # offline: nothing known
    assert orders["size"] == 1410 and orders["records"] == 100 + 40
    assert orders["configs"] == [
        {"name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": False,
         "read_only": False},
        {"name": "segment.bytes", "value": "1048576", "source": "STATIC_BROKER_CONFIG", "sensitive": False,
         "read_only": False},
        {"name": "secret", "value": None, "source": "DYNAMIC_TOPIC_CONFIG", "sensitive": True, "read_only": False},
    ]
    assert orders["config_count"] == 4
    assert offsets["configs"] is None and offsets["config_count"] is None  # DescribeConfigs gave nothing


def test_offline_partition_size_falls_back_to_the_largest_copy() -> None:
    obs = Observation(polled_ms=0, brokers={0: ("h", 1), 1: ("h", 2)})
    obs.topics = {"t": TopicInfo("t", False, (part(0, -1, (0, 1), (0,)),))}
    obs.log_dirs = {0: [LogDirInfo("/a", None, {("t", 0): 50})], 1: [LogDirInfo("/b", None, {("t", 0): 80})]}
    assert build_view(obs, {}, 1.0)["topics"][0]["partitions"][0]["size"] == 80


def test_group_lag_per_partition_and_total() -> None:
    obs = three_brokers()
    obs.groups = [
        GroupInfo("billing", "Stable", "consumer", "uniform", 1,
                  (MemberInfo("m-2", "worker-b", "/10.0.0.2", (("orders", 1),)),
                   MemberInfo("m-1", "worker-a", "/10.0.0.1", (("orders", 0), ("orders", 2)), "static-1")),
                  {("orders", 0): 60, ("orders", 1): 40}),
        GroupInfo("audit", "Empty", "classic", "", 0, (), {("orders", 0): 5}),
    ]
    view = build_view(obs, {}, 3.0)
    groups = by(view["groups"], "group_id")
    assert list(groups) == ["audit", "billing"]
    billing = groups["billing"]
    assert billing["partitions"] == [
        {"topic": "orders", "partition": 0, "committed": 60, "high_watermark": 105, "lag": 45, "client_id": "worker-a"},
        {"topic": "orders", "partition": 1, "committed": 40, "high_watermark": 40, "lag": 0, "client_id": "worker-b"},
        {"topic": "orders", "partition": 2, "committed": None, "high_watermark": None, "lag": None,
         "client_id": "worker-a"},
    ]
    assert billing["total_lag"] == 45
    assert billing["members"] == [
        {"member_id": "m-1", "client_id": "worker-a", "host": "/10.0.0.1", "group_instance_id": "static-1",
         "assignment": {"orders": [0, 2]}},
        {"member_id": "m-2", "client_id": "worker-b", "host": "/10.0.0.2", "group_instance_id": None,
         "assignment": {"orders": [1]}},
    ]
    assert (billing["state"], billing["protocol"], billing["assignor"], billing["coordinator"]) == (
        "Stable", "consumer", "uniform", 1)
    assert groups["audit"]["members"] == [] and groups["audit"]["total_lag"] == 100
    assert view["summary"]["groups"] == 2 and view["summary"]["total_lag"] == 145


def test_cleaner_rows() -> None:
    obs = Observation(polled_ms=0)
    obs.cleaner = {1: [CleanerLog("c", 1, 7, 0.123456, 2, 900, 4096, False, "CorruptRecordException at 3"),
                       CleanerLog("c", 0, 10, 0.5, 3, -1, 0, True, None)],
                   0: [CleanerLog("c", 0, 10, 0.0, 0, -1, 0, False, None)]}
    rows = build_view(obs, {}, 1.0)["cleaner"]
    assert [(r["broker"], r["partition"], r["state"]) for r in rows] == [(0, 0, "ok"), (1, 0, "cleaning"),
                                                                         (1, 1, "uncleanable")]
    assert rows[2] == {"broker": 1, "topic": "c", "partition": 1, "first_dirty_offset": 7, "dirty_ratio": 0.1235,
                       "cleans": 2, "last_clean_ms": 900, "bytes_reclaimed": 4096, "state": "uncleanable",
                       "reason": "CorruptRecordException at 3"}
    assert rows[0]["last_clean_ms"] is None


def test_unreachable_keeps_the_last_view_with_every_broker_down() -> None:
    last = build_view(three_brokers(), {}, 3.0)
    view = unreachable_view(last, "Connect to ipv4#127.0.0.1:9092 failed: Connection refused", 5_000, 3.0)
    assert (view["state"], view["error"], view["polled_at"], view["as_of"]) == (
        "unreachable", "Connect to ipv4#127.0.0.1:9092 failed: Connection refused", 5_000, 1_000)
    assert [b["up"] for b in view["brokers"]] == [False, False, False] and view["summary"]["brokers_up"] == 0
    assert view["controller"] == -1 and not any(b["controller"] for b in view["brokers"])
    assert view["topics"] == last["topics"]
    assert last["state"] == "ok" and last["brokers"][0]["up"]  # the last view itself is untouched

    never = unreachable_view(None, "no route", 5_000, 3.0)
    assert (never["state"], never["as_of"], never["brokers"], never["topics"]) == ("unreachable", None, [], [])
    assert set(never) == set(starting_view(3.0)) | {"as_of"}
