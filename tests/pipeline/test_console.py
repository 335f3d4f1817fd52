"""The broker console against a real broker, from outside: /api/console, /api/console/configs and
/events?view=console carry what the cluster holds (records per partition, committed offsets, lag,
configs, sizes), follow it live, say when the broker is down, and cost the cluster nothing while
nobody watches."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from samsa.pipeline.dashboard import Dashboard
from tests.brokerproc import BrokerProcess, free_port
from tests.cli.helpers import one_line_error, samsa
from tests.pipeline.console_helpers import CLIENT_ID, COMMITTED, COMPACTED_COUNTS, PLAIN_COUNTS, Scenario
from tests.pipeline.test_dashboard import EventStream, _get


@pytest.fixture
def scenario(broker: BrokerProcess) -> Iterator[Scenario]:
    s = Scenario(broker.bootstrap)
    yield s
    s.close()


def topic(view: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((t for t in view["topics"] if t["name"] == name), None)


def group(view: dict[str, Any], group_id: str) -> dict[str, Any] | None:
    return next((g for g in view["groups"] if g["group_id"] == group_id), None)


def lags(view: dict[str, Any], group_id: str) -> dict[int, int | None]:
    g = group(view, group_id)
    return {} if g is None else {p["partition"]: p["lag"] for p in g["partitions"]}


def has_group(s: Scenario) -> Callable[[dict[str, Any]], bool]:
    return lambda v: v["state"] == "ok" and set(lags(v, s.group)) == {0, 1, 2}


def test_the_view_holds_what_the_cluster_holds(broker: BrokerProcess, scenario: Scenario) -> None:
    with Dashboard(broker.bootstrap, port=0, console_interval_s=0.5) as dash:
        view = dash.wait_console(has_group(scenario), 30)
        assert view["controller"] == 0 and view["cluster_id"]
        [b] = view["brokers"]
        assert (b["id"], b["host"], b["port"], b["up"], b["controller"]) == (0, "127.0.0.1", broker.port, True, True)
        assert b["log_dirs"][0]["path"] == str(broker.log_dir) and b["bytes"] > 0

        plain = topic(view, scenario.plain)
        assert plain is not None and not plain["internal"]
        assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"], p["high_watermark"])
                for p in plain["partitions"]] == [(i, 0, [0], [0], 0, n) for i, n in enumerate(PLAIN_COUNTS)]
        assert all(p["size"] > 0 for p in plain["partitions"]) and plain["size"] == sum(
            p["size"] for p in plain["partitions"])
        assert plain["records"] == sum(PLAIN_COUNTS) and plain["configs"] == []

        compacted = topic(view, scenario.compacted)
        assert compacted is not None
        assert [p["high_watermark"] for p in compacted["partitions"]] == list(COMPACTED_COUNTS)
        policy = [c for c in compacted["configs"] if c["name"] == "cleanup.policy"]
        assert policy == [{"name": "cleanup.policy", "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG",
                           "sensitive": False, "read_only": False}]
        cleaned = {(c["topic"], c["partition"]) for c in view["cleaner"] if c["broker"] == 0}
        assert {(scenario.compacted, 0), (scenario.compacted, 1)} <= cleaned
        assert (scenario.plain, 0) not in cleaned  # the cleaner only knows compacted logs

        offsets = topic(view, "__consumer_offsets")
        assert offsets is not None and offsets["internal"]
        assert view["topics"].index(offsets) > view["topics"].index(plain)  # internal ones last

        g = group(view, scenario.group)
        assert g is not None
        assert (g["state"], g["protocol"], g["coordinator"]) == ("Stable", "classic", 0)
        [member] = g["members"]
        assert member["client_id"] == CLIENT_ID and member["assignment"] == {scenario.plain: [0, 1, 2]}
        assert [(p["partition"], p["committed"], p["high_watermark"], p["lag"], p["client_id"])
                for p in g["partitions"]] == [
            (0, COMMITTED[0], PLAIN_COUNTS[0], PLAIN_COUNTS[0] - COMMITTED[0], CLIENT_ID),
            (1, COMMITTED[1], PLAIN_COUNTS[1], PLAIN_COUNTS[1] - COMMITTED[1], CLIENT_ID),
            (2, None, PLAIN_COUNTS[2], None, CLIENT_ID)]
        assert g["total_lag"] == 11
        assert view["summary"]["under_replicated"] == 0 and view["summary"]["offline"] == 0
        assert view["errors"] == []

        # Every config on demand; the view carries only the non-default ones.
        status, ctype, body = _get(dash.url + f"api/console/configs?topic={scenario.compacted}")
        assert (status, ctype) == (200, "application/json")
        every = json.loads(body)["configs"]
        assert len(every) == compacted["config_count"] > len(compacted["configs"])
        by_name = {c["name"]: c for c in every}
        assert by_name["cleanup.policy"]["value"] == "compact"
        assert by_name["min.insync.replicas"]["source"] == "DEFAULT_CONFIG"
        assert _get(dash.url + "api/console/configs?topic=nope")[0] == 404

        status, _, body = _get(dash.url + "api/console")
        assert status == 200 and topic(json.loads(body), scenario.plain) is not None


def test_a_kip_848_group_shows_with_its_protocol_members_and_offsets(broker: BrokerProcess,
                                                                      scenario: Scenario) -> None:
    """A group of the consumer protocol (group.protocol=consumer) is described with
    ConsumerGroupDescribe: its state, assignor, member and assignment, beside its offsets."""
    from confluent_kafka import Consumer, TopicPartition

    group_id = scenario.group + "-848"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id, "group.protocol": "consumer",
                  "client.id": "kip848-client", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([scenario.plain])
        deadline = time.monotonic() + 30
        while len(c.assignment()) < len(PLAIN_COUNTS):
            assert time.monotonic() < deadline, "the KIP-848 member got no assignment in 30 s"
            c.poll(0.2)  # heartbeats until the assignment arrives
        c.commit(offsets=[TopicPartition(scenario.plain, 0, 1)], asynchronous=False)
        with Dashboard(broker.bootstrap, port=0, console_interval_s=0.5) as dash:
            view = dash.wait_console(lambda v: (g := group(v, group_id)) is not None and bool(g["members"]), 30)
            g = group(view, group_id)
            assert g is not None
            assert (g["state"], g["protocol"], g["coordinator"], g["assignor"]) == ("Stable", "consumer", 0, "uniform")
            [member] = g["members"]
            assert member["client_id"] == "kip848-client" and member["assignment"] == {scenario.plain: [0, 1, 2]}
            assert [(p["partition"], p["committed"]) for p in g["partitions"]] == [(0, 1), (1, None), (2, None)]
            assert view["errors"] == []
    finally:
        c.close()


def test_the_stream_follows_the_lag_live(broker: BrokerProcess, scenario: Scenario) -> None:
    with Dashboard(broker.bootstrap, port=0, console_interval_s=0.3, min_event_interval_s=0.2) as dash:
        stream = EventStream(dash.url, "/events?view=console")
        try:
            assert stream.headers["content-type"].startswith("text/event-stream")
            deadline = time.monotonic() + 30
            while True:
                name, view, _ = stream.next_event(deadline)
                assert name == "console"
                if has_group(scenario)(view):
                    break
            assert lags(view, scenario.group) == {0: 6, 1: 5, 2: None}
            scenario.produce(scenario.plain, 0, 3)
            while True:
                name, view, _ = stream.next_event(deadline)
                if lags(view, scenario.group).get(0) == 9:
                    break
            assert group(view, scenario.group)["total_lag"] == 14  # type: ignore[index]
            assert topic(view, scenario.plain)["partitions"][0]["high_watermark"] == 13  # type: ignore[index]
        finally:
            stream.close()


def test_nobody_watching_means_no_polling(broker: BrokerProcess) -> None:
    with Dashboard(broker.bootstrap, port=0, console_interval_s=0.2) as dash:
        assert dash.console is not None
        dash.wait_until(lambda s: s["broker"]["state"] == "ok", 15)  # the pipeline side has talked to it
        assert dash.console.published.payload()[0] == 0 and dash.console_view()["state"] == "starting"
        status, _, body = _get(dash.url + "api/console")  # a one-off request waits for a first poll
        assert status == 200 and json.loads(body)["state"] == "ok"


def test_a_broker_that_goes_down_shows_as_down_then_back(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    with Dashboard(b.bootstrap, port=0, console_interval_s=0.3, console_request_timeout_s=1.0) as dash:
        dash.wait_console(lambda v: v["state"] == "ok", 20)
        b.kill9()
        view = dash.wait_console(lambda v: v["state"] == "unreachable", 20)
        assert view["error"] and "Traceback" not in view["error"]
        assert [(x["id"], x["up"]) for x in view["brokers"]] == [(0, False)]
        assert view["as_of"] is not None and view["summary"]["brokers_up"] == 0
        status, _, body = _get(dash.url + "api/console")
        assert status == 200 and json.loads(body)["state"] == "unreachable"
        b.start()
        view = dash.wait_console(lambda v: v["state"] == "ok", 30)
        assert [(x["id"], x["up"]) for x in view["brokers"]] == [(0, True)]


def test_a_cluster_that_never_answered(tmp_path: Any) -> None:
    with Dashboard(f"127.0.0.1:{free_port()}", port=0, console_interval_s=0.3, console_request_timeout_s=0.5) as dash:
        view = dash.wait_console(lambda v: v["state"] == "unreachable", 20)
        assert view["error"] and view["brokers"] == [] and view["as_of"] is None


def test_the_console_can_be_off(broker: BrokerProcess) -> None:
    with Dashboard(broker.bootstrap, port=0, console_interval_s=None) as dash:
        assert _get(dash.url + "api/console")[0] == 404
        assert _get(dash.url + "api/console/configs?topic=x")[0] == 404
        assert _get(dash.url + "events?view=console")[0] == 404
    assert "--console-interval" in one_line_error(samsa("dashboard", "--bootstrap-server", broker.bootstrap,
                                                        "--console-interval", "-1"), codes=(2,))
