"""ApiVersions (18) v3-v5 on the wire, with the hand-written client of tests/compat/rawwire.py.

v5 (Kafka 4.4, KIP-1242) names the cluster and node the client means to reach: both or neither
(else INVALID_REQUEST); another cluster's id or another node's id is REBOOTSTRAP_REQUIRED, with
no API list. Below v4 a supported feature whose lowest level is 0 is left out (KAFKA-17492), and
from v3 the client software name and version must look like Kafka's pattern.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.compat.rawwire import Conn

NONE, INVALID_REQUEST, REBOOTSTRAP_REQUIRED = 0, 42, 129


def cluster_id(b: BrokerProcess) -> str:
    cid = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).cluster_id
    assert cid
    return str(cid)


def supported_features(tagged: dict[int, bytes]) -> dict[str, tuple[int, int]]:
    """Tagged field 0 of the response: SupportedFeatures, name -> (min, max)."""
    raw = tagged.get(0)
    if raw is None:
        return {}
    pos = 0

    def uvarint() -> int:
        nonlocal pos
        n = shift = 0
        while True:
            b = raw[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n
            shift += 7

    out = {}
    for _ in range(uvarint() - 1):
        size = uvarint() - 1
        name = raw[pos:pos + size].decode()
        pos += size
        lo, hi = int.from_bytes(raw[pos:pos + 2], "big", signed=True), int.from_bytes(raw[pos + 2:pos + 4], "big")
        pos += 4
        assert uvarint() == 0  # (no tagged fields of its own)
        out[name] = (lo, hi)
    return out


def test_v5_is_served_and_checks_the_cluster_and_node_meant(broker: BrokerProcess) -> None:
    cid = cluster_id(broker)
    with Conn(broker.bootstrap) as c:
        v4 = c.api_versions(4)
        plain = c.api_versions(5)  # (a client that knows neither yet, as at bootstrap)
        meant = c.api_versions(5, cluster_id=cid, node_id=0)
    assert v4.error_code == plain.error_code == meant.error_code == NONE
    assert plain.api_keys == meant.api_keys == v4.api_keys
    assert v4.api_keys[18] == (0, 5)
    assert plain.tagged_fields == v4.tagged_fields  # (the same features)

    for other_cluster, other_node in ((cid[::-1], 0), (cid, 1), ("", 0)):
        with Conn(broker.bootstrap) as c:
            wrong = c.api_versions(5, cluster_id=other_cluster, node_id=other_node)
        assert (wrong.error_code, wrong.api_keys) == (REBOOTSTRAP_REQUIRED, {}), (other_cluster, other_node)

    for half_cluster, half_node in ((cid, -1), (None, 0)):  # one without the other
        with Conn(broker.bootstrap) as c:
            half = c.api_versions(5, cluster_id=half_cluster, node_id=half_node)
        assert (half.error_code, half.api_keys) == (INVALID_REQUEST, {})


def test_client_software_name_and_version_are_checked_from_v3(broker: BrokerProcess) -> None:
    for software in (("bad name", "1.0"), ("samsa", "1.0 beta"), ("-samsa", "1"), ("samsa", "")):
        with Conn(broker.bootstrap) as c:
            got = c.api_versions(3, software=software)
        assert (got.error_code, got.api_keys) == (INVALID_REQUEST, {}), software
    with Conn(broker.bootstrap) as c:
        assert c.api_versions(3, software=("apache-kafka-java", "4.4.0")).error_code == NONE


def test_features_with_level_0_are_left_out_below_v4(broker: BrokerProcess) -> None:
    """transaction.version and group.version are supported from level 0: a v3 answer leaves
    them out (clients of that time fail to read a 0 there, KAFKA-17492), v4 and v5 list them;
    the finalized levels are in all three."""
    with Conn(broker.bootstrap) as c:
        got = {v: c.api_versions(v) for v in (3, 4, 5)}
    assert supported_features(got[3].tagged_fields) == {}
    assert supported_features(got[4].tagged_fields) == supported_features(got[5].tagged_fields) == {
        "transaction.version": (0, 2), "group.version": (0, 1)}
    assert all(2 in r.tagged_fields for r in got.values())  # FinalizedFeatures
