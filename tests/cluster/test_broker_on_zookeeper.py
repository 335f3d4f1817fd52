"""A broker with `zookeeper.connect` keeps its metadata in a real ZooKeeper, in Kafka's layout."""

from __future__ import annotations

import json
import subprocess
import sys
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
    out = subprocess.run([sys.executable, "-m", "samsa", "broker", "start", str(twin.config_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "broker.id 0 is already registered" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_start_up_waits_for_zookeeper_within_the_connection_timeout(broker_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A broker started before its ZooKeeper retries until it is there (within
    zookeeper.connection.timeout.ms), then starts as usual."""
    import threading
    import time

    from tests.zk.conftest import free_port, launcher_cmd, serving, write_zoo_cfg

    port = free_port()
    d = tmp_path / "late-zk"
    d.mkdir()
    cfg = write_zoo_cfg(d, port)
    b = BrokerProcess(tmp_path / "b", {"zookeeper.connect": f"127.0.0.1:{port}/samsa-late",
                                       "zookeeper.connection.timeout.ms": "30000",
                                       "zookeeper.session.timeout.ms": "6000"})
    zk_proc: list[subprocess.Popen[bytes]] = []

    def start_zookeeper_late() -> None:
        # Once the broker has tried and failed at least once (its log says it retries).
        deadline = time.monotonic() + 30
        while "retrying for up to" not in b.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(d / "zk.out", "wb") as out:
            zk_proc.append(subprocess.Popen(launcher_cmd("start", str(cfg)), stdout=out, stderr=subprocess.STDOUT))

    t = threading.Thread(target=start_zookeeper_late)
    t.start()
    try:
        b.start(timeout=60)
        t.join()
        assert serving(port)
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
        assert 0 in md.brokers
        assert "ZooKeeper unreachable while connecting" in b.log_text()
        assert b.stop() == 0
    finally:
        t.join()
        b.close()
        for p in zk_proc:
            p.terminate()
            p.wait(10)


def test_start_up_gives_up_on_zookeeper_with_one_clear_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.zk.conftest import free_port

    b = BrokerProcess(tmp_path / "b", {"zookeeper.connect": f"127.0.0.1:{free_port()}",
                                       "zookeeper.connection.timeout.ms": "1500"})
    out = subprocess.run([sys.executable, "-m", "samsa", "broker", "start", str(b.config_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "zookeeper.connection.timeout.ms=1500" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
