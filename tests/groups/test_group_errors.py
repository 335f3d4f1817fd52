"""Bad group requests over TCP get Kafka's error codes, and the group keeps working."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


def join(c: RawClient, group: str, member_id: str = "", session_ms: int = 10000) -> object:
    return c.request(11, 7, {"group_id": group, "session_timeout": session_ms, "rebalance_timeout": 10000,
                             "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00"}]})


def joined_member(c: RawClient, group: str) -> tuple[str, int]:
    first = join(c, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED  # KIP-394: v4+ asks new members to rejoin
    resp = join(c, group, first.member_id)
    assert resp.error_code == 0 and resp.leader == resp.member_id
    sync = c.request(14, 5, {"group_id": group, "generation_id": resp.generation_id, "member_id": resp.member_id,
                             "protocol_type": "consumer", "protocol_name": "range",
                             "assignments": [{"member_id": resp.member_id, "assignment": b"A"}]})
    assert sync.error_code == 0 and sync.assignment == b"A"
    return resp.member_id, resp.generation_id


def test_fencing_errors_and_the_group_keeps_working(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        member, gen = joined_member(c, topic_name)
        hb = lambda g, m: c.request(12, 4, {"group_id": topic_name, "generation_id": g, "member_id": m}).error_code  # noqa: E731
        assert hb(gen, member) == 0
        assert hb(gen + 5, member) == ErrorCode.ILLEGAL_GENERATION
        assert hb(gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        unknown = c.request(12, 4, {"group_id": "no-such-group-" + topic_name, "generation_id": 1, "member_id": "m"})
        assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        bad_timeout = join(c, topic_name + "-x", session_ms=1)
        assert bad_timeout.error_code == ErrorCode.INVALID_SESSION_TIMEOUT

        def commit(partition: int, metadata: str = "", g: int = gen, m: str = member) -> int:
            r = c.request(8, 8, {"group_id": topic_name, "generation_id_or_member_epoch": g, "member_id": m,
                                 "topics": [{"name": topic_name, "partitions": [
                                     {"partition_index": partition, "committed_offset": 5,
                                      "committed_metadata": metadata}]}]})
            return int(r.topics[0].partitions[0].error_code)

        assert commit(7) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert commit(0, metadata="m" * 5000) == ErrorCode.OFFSET_METADATA_TOO_LARGE
        assert commit(0, g=gen + 1) == ErrorCode.ILLEGAL_GENERATION
        assert commit(0) == 0  # and the member's own commit still works
        assert hb(gen, member) == 0
        fetched = c.request(9, 7, {"group_id": topic_name, "topics": [{"name": topic_name, "partition_indexes": [0]}]})
        assert fetched.topics[0].partitions[0].committed_offset == 5


def test_delete_of_an_active_group_is_refused(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        member, gen = joined_member(c, topic_name)
        r = c.request(42, 2, {"groups_names": [topic_name, "missing-" + topic_name]})
        codes = {x.group_id: x.error_code for x in r.results}
        assert codes[topic_name] == ErrorCode.NON_EMPTY_GROUP
        assert codes["missing-" + topic_name] == ErrorCode.GROUP_ID_NOT_FOUND
        leave = c.request(13, 5, {"group_id": topic_name, "members": [{"member_id": member, "group_instance_id": None}]})
        assert leave.error_code == 0
        r = c.request(42, 2, {"groups_names": [topic_name]})
        assert r.results[0].error_code == 0
