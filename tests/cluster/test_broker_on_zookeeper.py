"""A broker with `zookeeper.connect` keeps its metadata in a real ZooKeeper, in Kafka's layout."""

from __future__ import annotations

import json
import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.brokerproc import BrokerProcess


def test_broker_registers_and_keeps_topics_in_zookeeper(zk_server, broker_factory) -> None:  # type: ignore[no-untyped-def]
    chroot = f"/samsa-{uuid.uuid4().hex[:8]}"
    b: BrokerProcess = broker_factory(**{"zookeeper.connect": zk_server.hosts + chroot, "broker.id": "7"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("zk-topic", 3, 1, config={"retention.ms": "60000"})])["zk-topic"].result(10)

    zk = KazooClient(hosts=zk_server.hosts + chroot)
    zk.start(timeout=10)
    try:
        reg = json.loads(zk.get("/brokers/ids/7")[0])
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}"]
        assert zk.exists("/brokers/ids/7").ephemeralOwner != 0
        assert json.loads(zk.get("/controller")[0])["brokerid"] == 7
        assignment = json.loads(zk.get("/brokers/topics/zk-topic")[0])
        assert assignment["partitions"] == {"0": [7], "1": [7], "2": [7]}
        state = json.loads(zk.get("/brokers/topics/zk-topic/partitions/0/state")[0])
        assert (state["leader"], state["isr"]) == (7, [7])
        assert json.loads(zk.get("/config/topics/zk-topic")[0])["config"] == {"retention.ms": "60000"}

        assert b.stop() == 0
        assert zk.exists("/brokers/ids/7") is None  # the session ended with the broker
        b.start()
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics("zk-topic", timeout=10)
        assert sorted(md.topics["zk-topic"].partitions) == [0, 1, 2]  # read back from ZooKeeper
        assert int(zk.get("/controller_epoch")[0]) == 2
    finally:
        zk.stop()
        zk.close()


def test_duplicate_broker_id_is_refused(zk_server, broker_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    chroot = f"/samsa-{uuid.uuid4().hex[:8]}"
    broker_factory(**{"zookeeper.connect": zk_server.hosts + chroot})
    twin = BrokerProcess(tmp_path / "twin", {"zookeeper.connect": zk_server.hosts + chroot})
    twin.proc = None
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "samsa", "broker", "start", str(twin.config_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "broker.id 0 is already registered" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
