"""The Prometheus endpoint of a real broker, scraped over HTTP and read with prometheus_client's
own parser after known traffic from real clients: the counters equal the data.

One broker with `prometheus.listener` serves the module; `traffic` drives it once (confluent-kafka
producing in many batches to two topics, a consumer reading one topic whole, a consumer group
reading part of the other and committing) and scrapes before, during and after.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from tests.brokerproc import BrokerProcess, free_port
from tests.promscrape import Scrape, scrape
from tests.rawclient import RawClient

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
N_A, N_B = 3000, 2000  # records produced to topics A (3 partitions) and B (2)
BTM = "kafka_server_brokertopicmetrics_"


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("metrics"), {"prometheus.listener": f"127.0.0.1:{port}"})
    b.start()
    yield b, port
    b.close()


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll a condition of another process (the broker offers no event to await)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> dict[str, Any]:
    """n records in many batches; librdkafka's own statistics once all are acknowledged."""
    stats: list[dict[str, Any]] = []
    import json

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 100,
                  "statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))})
    for i in range(n):
        p.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=i % partitions)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    wait_until(lambda: p.poll(0.1) is not None and stats and stats[-1]["txmsgs"] == n,
               "librdkafka's statistics show every record sent")
    last = stats[-1]
    return {"produce_requests": sum(b["req"].get("Produce", 0) for b in last["brokers"].values())}


def read_all(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            assert not m.error(), m.error()
            got += 1
    c.close()
    assert got == n


@pytest.fixture(scope="module")
def traffic(mbroker: tuple[BrokerProcess, int]) -> dict[str, Any]:
    b, port = mbroker
    a, bt = f"metrics-a-{uuid.uuid4().hex[:8]}", f"metrics-b-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic(a, 3, 1), NewTopic(bt, 2, 1)]).values():
        f.result(20)
    before = scrape(port)
    client = produce(b.bootstrap, a, N_A, 3)
    client_b = produce(b.bootstrap, bt, N_B, 2)
    produced = scrape(port)
    read_all(b.bootstrap, a, 3, N_A)
    # A consumer group reads part of B and commits what it read.
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([bt])
    seen: dict[int, int] = {}  # partition -> records read
    deadline = time.monotonic() + 30
    while (sum(seen.values()) < N_B // 3 or len(seen) < 2) and time.monotonic() < deadline:
        for m in c.consume(50, 0.5):
            assert not m.error(), m.error()
            seen[m.partition()] = seen.get(m.partition(), 0) + 1
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed([TopicPartition(bt, 0), TopicPartition(bt, 1)], 10)}
    high = {p: c.get_watermark_offsets(TopicPartition(bt, p), 10)[1] for p in (0, 1)}
    during = scrape(port)
    c.close()
    after = scrape(port)
    return {"a": a, "b": bt, "group": group, "before": before, "produced": produced, "during": during,
            "after": after, "committed": committed, "high": high,
            "produce_requests": client["produce_requests"] + client_b["produce_requests"]}


def test_messages_in_is_the_number_of_records_and_bytes_in_the_log_size(traffic: dict[str, Any]) -> None:
    s: Scrape = traffic["produced"]
    a, b = traffic["a"], traffic["b"]
    assert s.value(BTM + "messagesin_total", topic=a) == N_A
    assert s.value(BTM + "messagesin_total", topic=b) == N_B
    for topic, n, parts in ((a, N_A, 3), (b, N_B, 2)):
        sizes = s.by("kafka_log_log_size", "partition", topic=topic)
        assert len(sizes) == parts and all(v > 0 for v in sizes.values())
        assert s.value(BTM + "bytesin_total", topic=topic) == sum(sizes.values())
        assert sum(s.by("kafka_log_log_logendoffset", "partition", topic=topic).values()) == n
        assert all(v == 0 for v in s.by("kafka_log_log_logstartoffset", "partition", topic=topic).values())
    before: Scrape = traffic["before"]
    assert s.value(BTM + "messagesin_total") - before.value(BTM + "messagesin_total") == N_A + N_B


def test_every_topic_counter_sums_to_its_total(traffic: dict[str, Any]) -> None:
    for key in ("produced", "during", "after"):
        s: Scrape = traffic[key]
        families = [n for n in s.types if n.startswith(BTM)]
        assert len(families) == 9
        for name in families:
            per_topic = s.by(name, "topic")
            if per_topic:
                assert sum(per_topic.values()) == s.value(name), (key, name)


def test_produce_requests_are_those_the_client_sent(traffic: dict[str, Any]) -> None:
    before, s = traffic["before"], traffic["produced"]
    served = s.sum("kafka_network_requestmetrics_requests_total", request="Produce") - \
        before.sum("kafka_network_requestmetrics_requests_total", request="Produce")
    assert served == traffic["produce_requests"] > 10  # (many batches, many requests)
    assert s.sum("kafka_network_requestmetrics_errors_total", request="Produce") == \
        before.sum("kafka_network_requestmetrics_errors_total", request="Produce")
    partitions = sum(s.value(BTM + "totalproducerequests_total", topic=t) for t in (traffic["a"], traffic["b"]))
    assert served <= partitions <= 5 * served
    # Every request answered is timed: the histograms count them, bucket by bucket.
    count = s.value("kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert count == s.sum("kafka_network_requestmetrics_requests_total", request="Produce")
    buckets = sorted((float(ls["le"]), v) for ls, v in s.samples["kafka_network_requestmetrics_totaltimems_bucket"]
                     if ls["request"] == "Produce")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets) and buckets[-1] == (float("inf"), count)
    for part in ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems"):
        assert s.value(f"kafka_network_requestmetrics_{part}_count", request="Produce") == count
    assert s.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce") >= \
        s.value("kafka_network_requestmetrics_localtimems_sum", request="Produce") > 0


def test_bytes_out_is_what_the_consumer_was_served(traffic: dict[str, Any]) -> None:
    s: Scrape = traffic["after"]
    a = traffic["a"]
    assert s.value(BTM + "bytesout_total", topic=a) == sum(s.by("kafka_log_log_size", "partition", topic=a).values())
    fetches = s.sum("kafka_network_requestmetrics_requests_total", request="Fetch")
    consumer = s.sum("kafka_network_requestmetrics_requests_total", request="FetchConsumer")
    assert consumer > 0 and fetches == consumer + s.sum("kafka_network_requestmetrics_requests_total",
                                                        request="FetchFollower")
    assert s.value(BTM + "totalfetchrequests_total", topic=a) >= 3
    assert s.value(BTM + "replicationbytesout_total") == 0  # (no followers)


def test_the_group_lag_is_the_high_watermark_minus_the_committed_offset(traffic: dict[str, Any]) -> None:
    s: Scrape = traffic["after"]
    group, b = traffic["group"], traffic["b"]
    committed, high = traffic["committed"], traffic["high"]
    assert sum(committed.values()) >= N_B // 3 and all(v > 0 for v in committed.values())
    assert sum(high.values()) == N_B
    for p in (0, 1):
        labels = {"consumergroup": group, "topic": b, "partition": str(p)}
        assert s.value("kafka_consumergroup_current_offset", **labels) == committed[p]
        assert s.value("kafka_consumergroup_lag", **labels) == high[p] - committed[p]
    during: Scrape = traffic["during"]
    assert during.value("kafka_consumergroup_members", consumergroup=group) == 1
    assert during.value("kafka_server_groupmetadatamanager_numgroupsstable") >= 1
    assert s.value("kafka_consumergroup_members", consumergroup=group) == 0
    assert s.value("kafka_server_groupmetadatamanager_numgroupsempty") >= 1
    assert s.value("kafka_server_group_coordinator_metrics_group_completed_rebalance_count") >= 1
    assert s.value("kafka_server_groupmetadatamanager_numoffsets") >= 2
    classic = s.value("kafka_server_group_coordinator_metrics_group_count", protocol="classic")
    assert classic == s.value("kafka_server_groupmetadatamanager_numgroups") >= 1


def test_broker_state_gauges(traffic: dict[str, Any]) -> None:
    s: Scrape = traffic["after"]
    partitions = s.value("kafka_server_replicamanager_partitioncount")
    assert partitions == len(s.samples["kafka_log_log_size"]) >= 5
    assert s.value("kafka_server_replicamanager_leadercount") == partitions
    assert s.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert s.value("kafka_server_replicamanager_offlinereplicacount") == 0
    assert s.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert s.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert s.value("kafka_controller_kafkacontroller_globalpartitioncount") == partitions
    assert s.value("process_resident_memory_bytes") > 10 << 20
    assert s.value("process_open_fds") > 10
    assert 0 < time.time() - s.value("process_start_time_seconds") < 3600
    assert s.value("process_cpu_seconds_total") > 0
    assert s.value("samsa_eventloop_lag_seconds_count") > 0


def test_errors_are_counted_with_their_code(mbroker: tuple[BrokerProcess, int], traffic: dict[str, Any]) -> None:
    b, port = mbroker
    a = traffic["a"]
    strict = f"metrics-strict-{uuid.uuid4().hex[:8]}"
    with RawClient(b.bootstrap) as c:
        resp = c.request(19, 7, {"topics": [{"name": strict, "num_partitions": 1, "replication_factor": 1,
                                             "configs": [{"name": "min.insync.replicas", "value": "2"}]}],
                                 "timeout": 5000})
        assert resp.topics[0].error_code == 0
        wait_until(lambda: scrape(port).value("kafka_log_log_size", topic=strict, partition="0") == 0 and
                   f'topic="{strict}"' in scrape(port).text, "the new topic is served")
        before = scrape(port)

        def send(topic: str, partition: int, acks: int) -> int:
            records = bytes(build_batch([(b"k", b"v", [], int(time.time() * 1000))]))
            r = c.request(0, 9, {"acks": acks, "timeout": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
            return int(r.responses[0].partition_responses[0].error_code)

        assert send(a, 99, 1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert send(a, 99, 1) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert send(strict, 0, -1) == ErrorCode.NOT_ENOUGH_REPLICAS
    s = scrape(port)

    def delta(name: str, **labels: str) -> float:
        return s.value(name, **labels) - before.value(name, **labels)

    errors = "kafka_network_requestmetrics_errors_total"
    assert delta(errors, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 2
    assert delta(errors, request="Produce", error="NOT_ENOUGH_REPLICAS") == 1
    # Kafka's failed-produce count leaves out its known errors (an unknown partition), not the others.
    assert delta(BTM + "failedproducerequests_total", topic=a) == 0
    assert delta(BTM + "totalproducerequests_total", topic=a) == 2
    assert delta(BTM + "failedproducerequests_total", topic=strict) == 1
    assert delta(BTM + "failedproducerequests_total") == 1
    assert s.value(BTM + "messagesin_total", topic=strict) == 0
    assert s.value("kafka_server_replicamanager_underminisrpartitioncount") == 1


def test_the_connections_gauge_follows_the_clients(mbroker: tuple[BrokerProcess, int]) -> None:
    b, port = mbroker

    def count() -> float:
        return scrape(port).value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                                  networkProcessor="0")

    base = count()
    opened = scrape(port).value("kafka_server_socket_server_metrics_connection_creation_total",
                                listener="PLAINTEXT", networkProcessor="0")
    clients = [RawClient(b.bootstrap) for _ in range(4)]
    for c in clients:
        c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    s = scrape(port)
    assert s.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT",
                   networkProcessor="0") == base + 4
    assert s.value("kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT",
                   networkProcessor="0") == opened + 4
    for c in clients:
        c.close()
    wait_until(lambda: count() == base, "the broker has seen the clients close")


def test_bad_input_to_the_metrics_port_closes_that_connection_only(mbroker: tuple[BrokerProcess, int],
                                                                    traffic: dict[str, Any]) -> None:
    b, port = mbroker

    def raw(data: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(data)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
            return got

    assert raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(300) + b"\r\n\r\n").startswith(
        b"HTTP/1.1 400")  # a TLS client hello
    assert raw(b"GET /metrics HTTP/1.1\r\n" + b"Cookie: " + b"x" * 20_000 + b"\r\n\r\n").startswith(b"HTTP/1.1 431")
    assert raw(b"GET /admin HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert raw(b"DELETE /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405")
    # A slow client holds only its own connection: the others are served meanwhile.
    slow = socket.create_connection(("127.0.0.1", port), timeout=10)
    slow.sendall(b"GET /metr")
    try:
        s = scrape(port)
        with RawClient(b.bootstrap) as c:
            assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
        read_all(b.bootstrap, traffic["a"], 3, N_A)
    finally:
        slow.close()
    assert s.value("kafka_controller_kafkacontroller_activecontrollercount") == 1


def test_every_family_served_is_in_the_doc_table_and_no_other(traffic: dict[str, Any]) -> None:
    served = dict(traffic["after"].types)
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| (counter|gauge|histogram) \|", DOC.read_text(), re.M))
    assert served == documented


# Names kept as Kafka (and the JMX exporter) spell them, which Prometheus' own lint flags.
KAFKA_SPELLINGS = {
    "kafka_controller_controllerstats_leaderelectionrateandtimems_count",  # a Timer's Count
    "kafka_server_group_coordinator_metrics_consumer_group_count",  # Kafka Metrics attributes
    "kafka_server_group_coordinator_metrics_consumer_group_rebalance_count",
    "kafka_server_group_coordinator_metrics_group_completed_rebalance_count",
    "kafka_server_group_coordinator_metrics_group_count",
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_socket_server_metrics_connection_close_total",  # networkProcessor: Kafka's key
    "kafka_server_socket_server_metrics_connection_creation_total",
}


def test_promtool_finds_nothing_but_kafka_s_own_spellings(traffic: dict[str, Any]) -> None:
    assert shutil.which("promtool"), "promtool is missing: scripts/install-deps.sh installs Debian's prometheus package"
    lint = subprocess.run(["promtool", "check", "metrics"], input=traffic["after"].text.encode(), capture_output=True,
                          timeout=60)
    flagged = {line.split()[0] for line in (lint.stdout + lint.stderr).decode().splitlines() if line.strip()}
    assert flagged <= KAFKA_SPELLINGS, (lint.stdout + lint.stderr).decode()


def test_off_by_default_nothing_else_listens(broker: BrokerProcess) -> None:
    """The session's broker (no prometheus.listener) listens on its Kafka port alone."""
    assert broker.proc is not None
    pid = broker.proc.pid
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    assert ports == {broker.port}
    assert "Serving metrics" not in broker.log_text()


def test_a_bad_value_or_a_busy_port_stops_the_start_with_the_key_or_address(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    with pytest.raises(RuntimeError, match=r"invalid value 'localhost' for prometheus.listener: expected HOST:PORT"):
        broker_factory(prometheus_listener="localhost")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"prometheus.listener=127.0.0.1:{port}: cannot listen there: "
                                               r"[Aa]ddress already in use"):
            broker_factory(prometheus_listener=f"127.0.0.1:{port}")


def test_not_found_for_other_paths(mbroker: tuple[BrokerProcess, int]) -> None:
    _, port = mbroker
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
    assert e.value.code == 404
    e.value.close()


def test_an_ssl_listener_s_requests_and_bytes_are_counted_and_timed(tmp_path: Path) -> None:
    """Through TLS the answers are encrypted into the write queue (no sendfile): the time
    stamps follow the encrypted bytes, and the counters the records."""
    from tests.pki import make_pki

    pki = make_pki(tmp_path / "pki")
    port, mport = free_port(), free_port()
    b = BrokerProcess(tmp_path / "broker", {"listeners": f"SSL://127.0.0.1:{port}", "ssl.keystore.type": "PEM",
                                            "ssl.keystore.location": str(pki.keystore("server")),
                                            "prometheus.listener": f"127.0.0.1:{mport}"}, port=port).start()
    try:
        conf = {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
        topic = f"tls-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(conf)  # (kept: a collected AdminClient fails its futures)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
        p = Producer({**conf, "linger.ms": 5, "batch.num.messages": 50})
        for i in range(500):
            p.produce(topic, b"v%d" % i, partition=0)
        assert p.flush(30) == 0
        c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 500 and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(500, 0.5) if not m.error())
        c.close()
        assert got == 500
        s = scrape(mport)
        assert s.value(BTM + "messagesin_total", topic=topic) == 500
        size = s.value("kafka_log_log_size", topic=topic, partition="0")
        assert s.value(BTM + "bytesin_total", topic=topic) == size == s.value(BTM + "bytesout_total", topic=topic)
        produces = s.sum("kafka_network_requestmetrics_requests_total", request="Produce")
        assert produces >= 2
        assert s.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == produces
        assert s.value("kafka_network_requestmetrics_responsesendtimems_count", request="FetchConsumer") >= 1
        assert s.value("kafka_server_socket_server_metrics_connection_creation_total", listener="SSL",
                       networkProcessor="0") >= 2
    finally:
        b.stop()
