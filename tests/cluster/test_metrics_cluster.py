"""The metrics of three brokers on ZooKeeper, each scraped at its own prometheus.listener: one
active controller, and under-replicated partitions that go up when a broker is killed and back
to 0 when it returns."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

import pytest

from tests.brokerproc import free_port
from tests.cluster.cluster import Cluster, produce_sync
from tests.promscrape import scrape

pytestmark = pytest.mark.slow

PARTITIONS = 4


def test_under_replicated_partitions_follow_a_broker_s_death_and_return(cluster: Callable[..., Cluster]) -> None:
    c = cluster(3, start=False)
    ports = [free_port() for _ in range(3)]
    for b, port in zip(c.brokers, ports):
        with open(b.config_path, "a") as f:
            f.write(f"prometheus.listener=127.0.0.1:{port}\n")
    c.start_all()
    topic = f"urp-{uuid.uuid4().hex[:8]}"
    c.create_topic(topic, partitions=PARTITIONS, rf=3)
    for p in range(PARTITIONS):
        produce_sync(c.bootstrap, topic, [b"x"] * 5, partition=p)

    def total(name: str, brokers: Iterable[int]) -> float:
        return sum(scrape(ports[i]).value(name) for i in brokers)

    urp = "kafka_server_replicamanager_underreplicatedpartitions"
    assert total(urp, range(3)) == 0
    assert total("kafka_controller_kafkacontroller_activecontrollercount", range(3)) == 1
    # Every broker holds a replica of each partition; the leaders' counters say what was appended.
    assert total("kafka_server_replicamanager_leadercount", range(3)) >= PARTITIONS
    assert sum(scrape(ports[i]).value("kafka_server_brokertopicmetrics_messagesin_total", topic=topic)
               for i in range(3)) == 5 * PARTITIONS
    ends = [scrape(ports[i]).by("kafka_log_log_logendoffset", "partition", topic=topic) for i in range(3)]
    assert all(sum(e.values()) == 5 * PARTITIONS for e in ends)

    victim = 2
    c.kill9(victim)
    left = [i for i in range(3) if i != victim]
    c.wait_for(lambda: total(urp, left) == PARTITIONS, 60,
               lambda: f"every partition under-replicated on brokers {left} (now {total(urp, left)})")
    assert total("kafka_controller_kafkacontroller_activecontrollercount", left) == 1
    assert total("kafka_controller_kafkacontroller_offlinepartitionscount", left) == 0
    assert total("kafka_server_replicamanager_leadercount", left) >= PARTITIONS

    c.start(victim)
    c.wait_for(lambda: total(urp, range(3)) == 0, 60,
               lambda: f"no partition under-replicated any more (now {total(urp, range(3))})")
    assert total("kafka_server_replicamanager_isrexpands_total", range(3)) >= PARTITIONS
