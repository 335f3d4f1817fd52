"""The log side of transactions on a real broker, over raw requests: transactional batches
through Produce, markers through WriteTxnMarkers (API 27), and what read_committed and
read_uncommitted readers see (Fetch, ListOffsets), DescribeProducers, and a kill -9 with a
transaction open."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import decode_response, encode_request
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient
from tests.txnwire import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    all_values,
    committed_values,
    control_offsets,
    describe_producers,
    fetch,
    init_pid,
    list_offset,
    produce,
    txn_batch,
    write_markers,
)


def test_read_committed_stops_at_the_open_transaction_and_skips_aborted_ones(
        broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        (a, ea), (b, eb) = init_pid(c), init_pid(c)
        assert produce(c, topic_name, txn_batch(a, ea, 0, [b"a0", b"a1", b"a2"])).error_code == 0  # 0..2
        assert produce(c, topic_name, txn_batch(b, eb, 0, [b"b0", b"b1"])).error_code == 0  # 3..4
        # Both open: read_committed sees nothing, read_uncommitted everything; both told LSO 0.
        rc = fetch(c, topic_name, 0, READ_COMMITTED)
        assert (rc.error_code, rc.high_watermark, rc.last_stable_offset, len(rc.records)) == (0, 5, 0, 0)
        ru = fetch(c, topic_name, 0, READ_UNCOMMITTED)
        assert ru.last_stable_offset == 0 and ru.aborted_transactions is None
        assert all_values(ru.records) == [b"a0", b"a1", b"a2", b"b0", b"b1"]
        assert list_offset(c, topic_name, READ_COMMITTED) == 0
        assert list_offset(c, topic_name, READ_UNCOMMITTED) == 5

        assert write_markers(c, a, ea, False, {topic_name: [0]}) == {(topic_name, 0): 0}  # abort a: marker 5
        rc = fetch(c, topic_name, 0, READ_COMMITTED)
        assert rc.last_stable_offset == 3  # b's transaction still holds it
        assert [(t.producer_id, t.first_offset) for t in rc.aborted_transactions] == [(a, 0)]
        assert committed_values(rc.records, rc.aborted_transactions) == []
        assert list_offset(c, topic_name, READ_COMMITTED) == 3

        assert write_markers(c, b, eb, True, {topic_name: [0]}) == {(topic_name, 0): 0}  # commit b: marker 6
        rc = fetch(c, topic_name, 0, READ_COMMITTED)
        assert (rc.high_watermark, rc.last_stable_offset) == (7, 7)
        assert committed_values(rc.records, rc.aborted_transactions) == [b"b0", b"b1"]
        assert control_offsets(rc.records) == [5, 6]
        ru = fetch(c, topic_name, 0, READ_UNCOMMITTED)
        assert all_values(ru.records) == [b"a0", b"a1", b"a2", b"b0", b"b1"] and ru.last_stable_offset == 7
        # From past the aborted transaction's marker, it is not named any more.
        assert fetch(c, topic_name, 6, READ_COMMITTED).aborted_transactions == []
        assert list_offset(c, topic_name, READ_COMMITTED) == 7


def test_marker_refusals_and_produce_fencing(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = init_pid(c)
        assert write_markers(c, pid, epoch, True, {"no-such-topic-x": [0], topic_name: [7]}) == {
            ("no-such-topic-x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            (topic_name, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert produce(c, topic_name, txn_batch(pid, epoch, 0, [b"x"])).error_code == 0
        # A non-transactional batch while the transaction is open: refused, nothing appended.
        plain = produce(c, topic_name, txn_batch(pid, epoch, 1, [b"y"], transactional=False))
        assert plain.error_code == ErrorCode.INVALID_TXN_STATE
        # The coordinator aborts with a bumped epoch (fencing): the old epoch is refused after.
        assert write_markers(c, pid, epoch + 1, False, {topic_name: [0]}, coordinator_epoch=3) == {(topic_name, 0): 0}
        stale = produce(c, topic_name, txn_batch(pid, epoch, 1, [b"z"]))
        assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert write_markers(c, pid, epoch, True, {topic_name: [0]}, coordinator_epoch=3) == {
            (topic_name, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert write_markers(c, pid, epoch + 1, True, {topic_name: [0]}, coordinator_epoch=2) == {
            (topic_name, 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert list_offset(c, topic_name, READ_UNCOMMITTED) == 2  # the batch and the abort marker only
        # The new epoch starts at sequence 0, and its transaction commits.
        assert produce(c, topic_name, txn_batch(pid, epoch + 1, 0, [b"w"])).error_code == 0
        assert write_markers(c, pid, epoch + 1, True, {topic_name: [0]}, coordinator_epoch=3) == {(topic_name, 0): 0}
        rc = fetch(c, topic_name, 0, READ_COMMITTED)
        assert committed_values(rc.records, rc.aborted_transactions) == [b"w"]
        # A transactional batch needs a producer id.
        assert produce(c, topic_name, txn_batch(-1, -1, -1, [b"v"])).error_code == ErrorCode.INVALID_RECORD


def test_describe_producers_shows_the_open_transaction(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = init_pid(c)
        assert produce(c, topic_name, txn_batch(pid, epoch, 0, [b"1", b"2"], transactional=False)).error_code == 0
        assert produce(c, topic_name, txn_batch(pid, epoch, 2, [b"3"])).error_code == 0
        d = describe_producers(c, topic_name)
        assert d.error_code == 0
        (p,) = d.active_producers
        assert (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset) == (pid, epoch, 2, 2)
        assert p.last_timestamp > 0
        assert write_markers(c, pid, epoch, True, {topic_name: [0]}, coordinator_epoch=5) == {(topic_name, 0): 0}
        (p,) = describe_producers(c, topic_name).active_producers
        assert (p.current_txn_start_offset, p.coordinator_epoch) == (-1, 5)
        assert describe_producers(c, "no-such-topic-y").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_waiting_read_committed_fetch_is_answered_by_the_commit(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = init_pid(c)
        assert produce(c, topic_name, txn_batch(pid, epoch, 0, [b"t"])).error_code == 0
        # A long poll at the LSO (0): the data is there, but undecided.
        waiter = socket.create_connection((broker.host, broker.port), timeout=30)
        body = {"replica_id": -1, "max_wait": 25000, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": READ_COMMITTED, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": topic_name, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        waiter.sendall(bytes(encode_request(1, 12, 1, "waiter", body)))
        # Not answered while the transaction is undecided (the records are there): it waits.
        waiter.settimeout(0.5)
        try:
            early = waiter.recv(1)
        except TimeoutError:
            early = b""
        assert early == b"", "a read_committed fetch was answered before the commit"
        waiter.settimeout(30)
        start = time.monotonic()
        assert write_markers(c, pid, epoch, True, {topic_name: [0]}) == {(topic_name, 0): 0}
        head = _read_exact(waiter, 4)
        _, resp = decode_response(1, 12, _read_exact(waiter, int.from_bytes(head, "big")))
        waited = time.monotonic() - start
        waiter.close()
        p = resp.responses[0].partitions[0]
        assert p.last_stable_offset == 2 and committed_values(p.records, p.aborted_transactions) == [b"t"]
        assert waited < 10, f"answered after {waited:.1f} s: not woken by the marker"


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return bytes(buf)


def test_an_open_transaction_survives_kill9_across_segments(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    """The transaction opens in an early segment, many segments roll after it (snapshots), the
    broker is killed: after the restart the LSO still holds at its first offset, an abort
    before the kill is still indexed, and the transaction can still be committed."""
    b = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name, configs={"segment.bytes": "1024"})
        (a, ea), (o, eo), (x, ex) = init_pid(c), init_pid(c), init_pid(c)
        assert produce(c, topic_name, txn_batch(x, ex, 0, [b"x" * 100])).error_code == 0  # 0: aborted below
        assert produce(c, topic_name, txn_batch(o, eo, 0, [b"open"])).error_code == 0  # 1: stays open
        assert write_markers(c, x, ex, False, {topic_name: [0]}) == {(topic_name, 0): 0}  # 2
        for i in range(30):  # ~30 segments of idempotent data after it
            assert produce(c, topic_name, txn_batch(a, ea, i, [b"%d" % i + b"." * 300],
                                                    transactional=False)).error_code == 0
        end = list_offset(c, topic_name, READ_UNCOMMITTED)
        assert end == 33 and list_offset(c, topic_name, READ_COMMITTED) == 1
    snapshots = sorted(p.name for p in (b.log_dir / f"{topic_name}-0").glob("*.snapshot"))
    assert len(snapshots) > 10, snapshots
    b.kill9()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert list_offset(c, topic_name, READ_COMMITTED) == 1
        (p, *_) = [p for p in describe_producers(c, topic_name).active_producers if p.producer_id == o]
        assert p.current_txn_start_offset == 1
        # The idempotence window came back too: the last batch again is a duplicate.
        again = produce(c, topic_name, txn_batch(a, ea, 29, [b"29" + b"." * 300], transactional=False))
        assert (again.error_code, again.base_offset) == (0, 32)
        assert write_markers(c, o, eo, True, {topic_name: [0]}) == {(topic_name, 0): 0}
        assert list_offset(c, topic_name, READ_COMMITTED) == 34
        rc = fetch(c, topic_name, 0, READ_COMMITTED)
        assert [(t.producer_id, t.first_offset) for t in rc.aborted_transactions] == [(x, 0)]
        seen = committed_values(rc.records, rc.aborted_transactions)  # (one segment's worth)
        assert seen[0] == b"open" and b"x" * 100 not in seen and len(seen) > 1
    # A clean restart, too (the snapshot written at close).
    b.stop()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert list_offset(c, topic_name, READ_COMMITTED) == 34
        assert all(p.current_txn_start_offset == -1 for p in describe_producers(c, topic_name).active_producers)
    assert "Traceback" not in b.log_text()
