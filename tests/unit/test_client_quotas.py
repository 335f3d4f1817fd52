"""Client quotas' decisions, without a broker (`samsa/server/quotas.py`): Kafka's windowed rate,
its throttle-time formula, the 8-level precedence and who shares a rate, with a fake clock."""

from __future__ import annotations

import pytest

from samsa.server.quotas import (
    DEFAULT,
    ClientQuotaManager,
    ClientQuotas,
    Rate,
    client_throttles,
    quota_user,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_counts_at_least_n_minus_1_whole_windows() -> None:
    # Kafka's Rate: 11 samples of 1 s; a first burst is measured over 10 s, not over 0 ms.
    r = Rate(11, 1000.0)
    r.record(1000.0, 0.0)
    assert r.measure(0.0) == (100.0, 10000.0)
    r.record(1000.0, 5500.0)  # 5.5 s later: 5 whole windows seen, 5 more assumed
    assert r.measure(5500.0) == (2000.0 / 10.5, 10500.0)
    # After 12.5 s the span is the real one: the oldest sample starts at 0 and is still within
    # 11 windows of its last event (Kafka keeps overlapping samples).
    r.record(0.0, 10_999.0)
    rate, span = r.measure(10_999.0)
    assert span == 10_999.0 and rate == pytest.approx(2000.0 / 10.999)
    # 11 s after its last event a sample no longer counts: the first one's 1000 are gone.
    rate, span = r.measure(16_400.0)
    assert span == 10_900.0 and rate == pytest.approx(1000.0 / 10.9)


def test_rate_reuses_its_samples_in_a_ring() -> None:
    r = Rate(2, 1000.0)
    for t in range(0, 10_000, 500):
        r.record(1.0, float(t))
    assert len(r.starts) == 3  # samples + 1, Kafka's "overlapping" placeholder included


def test_throttle_time_is_kafkas_formula() -> None:
    # X = (O - T) / T * W: 2000 bytes measured over 10 s is 200 B/s; a 100 B/s bound wants
    # 10 s more.
    clock = Clock()
    m = ClientQuotaManager("Produce", "producer_byte_rate", clock=clock)
    m.update(None, DEFAULT, 100.0)
    assert m.record("User:ANONYMOUS", "app", 1000) == 0  # exactly at the bound: 100 B/s
    assert m.record("User:ANONYMOUS", "app", 1000) == 10_000
    # The request quota's throttle is capped at one window (ClientRequestQuotaManager).
    q = ClientQuotas(clock=clock)
    q.on_entity_config("clients/<default>", {"request_percentage": "1"})
    assert q.request.record("User:ANONYMOUS", "app", 500.0) == 1000


def test_unrecord_takes_a_value_back() -> None:
    clock = Clock()
    m = ClientQuotaManager("Fetch", "consumer_byte_rate", clock=clock)
    m.update(None, DEFAULT, 100.0)
    assert m.record("User:a", "c", 5000) > 0
    m.unrecord("User:a", "c", 5000)
    assert m.record("User:a", "c", 500) == 0


# (configured entities) -> which bound user "alice" with client-id "app" gets
PRECEDENCE = [
    ({("alice", "app"): 1, ("alice", DEFAULT): 2, ("alice", None): 3, (DEFAULT, "app"): 4, (DEFAULT, DEFAULT): 5,
      (DEFAULT, None): 6, (None, "app"): 7, (None, DEFAULT): 8}, 1),
    ({("alice", DEFAULT): 2, ("alice", None): 3, (DEFAULT, "app"): 4, (DEFAULT, DEFAULT): 5, (DEFAULT, None): 6,
      (None, "app"): 7, (None, DEFAULT): 8}, 2),
    ({("alice", None): 3, (DEFAULT, "app"): 4, (DEFAULT, DEFAULT): 5, (DEFAULT, None): 6, (None, "app"): 7,
      (None, DEFAULT): 8}, 3),
    ({(DEFAULT, "app"): 4, (DEFAULT, DEFAULT): 5, (DEFAULT, None): 6, (None, "app"): 7, (None, DEFAULT): 8}, 4),
    ({(DEFAULT, DEFAULT): 5, (DEFAULT, None): 6, (None, "app"): 7, (None, DEFAULT): 8}, 5),
    ({(DEFAULT, None): 6, (None, "app"): 7, (None, DEFAULT): 8}, 6),
    ({(None, "app"): 7, (None, DEFAULT): 8}, 7),
    ({(None, DEFAULT): 8}, 8),
    ({("bob", None): 9, (None, "other"): 10}, None),
]


@pytest.mark.parametrize(("configured", "expected"), PRECEDENCE)
def test_precedence_is_kafkas(configured: dict[tuple[str | None, str | None], float], expected: int | None) -> None:
    m = ClientQuotaManager("Produce", "producer_byte_rate")
    for (user, client), bound in configured.items():
        m.update(user, client, float(bound))
    assert m.quota("User:alice", "app") == expected


def test_who_shares_a_rate() -> None:
    m = ClientQuotaManager("Produce", "producer_byte_rate", clock=Clock())
    m.update("alice", None, 100.0)  # a user's quota: one rate for all its client-ids
    m.update(DEFAULT, None, 50.0)  # the default user's: one rate per user
    m.record("User:alice", "a", 10)
    m.record("User:alice", "b", 10)
    m.record("User:bob", "a", 10)
    m.record("User:carol", "a", 10)
    assert set(m.sensors) == {("alice", ""), ("bob", ""), ("carol", "")}
    assert m.sensors[("alice", "")].bound == 100.0 and m.sensors[("bob", "")].bound == 50.0
    # A changed bound reaches the rates in use; a removed one drops them.
    m.update(DEFAULT, None, 70.0)
    assert m.sensors[("bob", "")].bound == 70.0
    m.update(DEFAULT, None, None)
    assert set(m.sensors) == {("alice", "")}
    assert m.record("User:bob", "a", 10**9) == 0  # no quota: never throttled
    m.update("alice", None, None)
    assert not m.enabled and m.sensors == {}


def test_client_id_quota_is_shared_across_users_and_names_are_sanitized() -> None:
    m = ClientQuotaManager("Produce", "producer_byte_rate", clock=Clock())
    m.update(None, "app 1", 100.0)
    m.update("CN%3Dx%20y", None, 7.0)  # as stored in ZooKeeper
    m.record("User:a", "app 1", 10)
    m.record("User:b", "app 1", 10)
    assert set(m.sensors) == {("", "app 1")}
    assert m.quota("User:CN=x y", "z") == 7.0


def test_idle_sensors_expire_after_an_hour() -> None:
    clock = Clock()
    m = ClientQuotaManager("Produce", "producer_byte_rate", clock=clock)
    m.update(None, DEFAULT, 100.0)
    m.record("User:a", "old", 1)
    clock.now += 1800
    m.record("User:a", "recent", 1)
    clock.now += 1900  # "old" idle 3700 s, "recent" 1900 s
    m.record("User:a", "new", 1)  # a new sensor triggers the purge
    assert set(m.sensors) == {("", "recent"), ("", "new")}


def test_entity_configs_feed_the_managers() -> None:
    q = ClientQuotas()
    assert not q.enabled
    q.on_entity_config("users/alice/clients/app%201", {"producer_byte_rate": "1024", "SCRAM-SHA-256": "x"})
    q.on_entity_config("clients/<default>", {"consumer_byte_rate": "2048", "request_percentage": "12.5"})
    assert q.enabled
    assert q.produce.quota("User:alice", "app 1") == 1024.0
    assert q.fetch.quota("User:bob", "x") == 2048.0 and q.request.quota("User:bob", "x") == 12.5
    q.on_entity_config("users/alice/clients/app%201", {})
    q.on_entity_config("clients/<default>", {"consumer_byte_rate": "-5", "controller_mutation_rate": "10"})
    assert not q.enabled  # (a bad value written by another tool is ignored, and logged)


@pytest.mark.parametrize(("api", "version", "expected"), [
    (0, 5, False), (0, 6, True), (1, 7, False), (1, 8, True), (3, 5, False), (3, 6, True),
    (48, 1, False), (60, 0, False), (44, 0, True),
])
def test_which_versions_throttle_themselves(api: int, version: int, expected: bool) -> None:
    assert client_throttles(api, version) is expected


def test_quota_user_is_the_principals_name() -> None:
    assert quota_user("User:alice") == "alice"
    assert quota_user("User:CN=a,O=b") == "CN=a,O=b"
    assert quota_user("User:ANONYMOUS") == "ANONYMOUS"
