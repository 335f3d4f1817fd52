"""A transaction's life on one broker, over the wire: fencing, the timeout abort of a dead
producer's transaction, __transaction_state replayed after a restart and after kill -9 in the
middle of a commit, and KIP-890's two transaction versions (raw requests, so each step is exact)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient
from tests.txn.txnclient import (
    add_partitions,
    describe_txn,
    end_txn,
    init_txn,
    init_txn_retrying,
    txn_batch,
    wait_state,
)


def produce_v(c: RawClient, topic: str, records: bytes, version: int, tid: str | None, partition: int = 0) -> Any:
    resp = c.request(0, version, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def offsets(c: RawClient, topic: str, isolation: int) -> int:
    resp = c.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return int(resp.topics[0].partitions[0].offset)


def wait_until(fn: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout_s
    while not fn():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.02)


def open_txn(c: RawClient, tid: str, topic: str, values: list[bytes], timeout_ms: int = 60000) -> tuple[int, int]:
    r = init_txn_retrying(c, tid, timeout_ms)
    assert r.error_code == 0, r
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_partitions(c, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
    assert produce_v(c, topic, txn_batch(pid, epoch, 0, values), 9, tid).error_code == 0
    return pid, epoch


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = open_txn(c, "tx-fence", topic_name, [b"zombie"])
        assert offsets(c, topic_name, 1) == 0  # open: the LSO holds at its first offset
        first = init_txn(c, "tx-fence")
        assert first.error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # its transaction is being aborted
        new = init_txn_retrying(c, "tx-fence")
        assert new.error_code == 0 and new.producer_id == pid and new.producer_epoch > epoch + 1
        assert wait_state(c, "tx-fence", "Empty").transaction_state == "Empty"
        # The zombie: its commit is fenced, its writes refused, nothing of it visible.
        assert end_txn(c, "tx-fence", pid, epoch, True).error_code == ErrorCode.PRODUCER_FENCED
        late = produce_v(c, topic_name, txn_batch(pid, epoch, 1, [b"late"]), 9, "tx-fence")
        assert late.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
        assert offsets(c, topic_name, 1) == offsets(c, topic_name, 0) == 2  # the record and the abort marker


def test_a_dead_producers_transaction_is_aborted_at_its_timeout(broker_factory: Callable[..., BrokerProcess],
                                                                topic_name: str) -> None:
    b = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms="100")
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = open_txn(c, "tx-dead", topic_name, [b"a", b"b"], timeout_ms=1000)
        assert offsets(c, topic_name, 1) == 0
        d = wait_state(c, "tx-dead", "CompleteAbort")
        assert d.transaction_state == "CompleteAbort" and d.producer_epoch == epoch + 1
        wait_until(lambda: offsets(c, topic_name, 1) == 3, what="the LSO passes the aborted transaction")
        assert end_txn(c, "tx-dead", pid, epoch, True).error_code == ErrorCode.PRODUCER_FENCED


def test_transaction_state_is_replayed_after_a_restart(broker_factory: Callable[..., BrokerProcess],
                                                       topic_name: str) -> None:
    b = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        pid, epoch = open_txn(c, "tx-replay", topic_name, [b"x"])
    b.restart()
    with RawClient(b.bootstrap) as c:
        d = describe_txn(c, "tx-replay")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic_name, [0])]
        assert offsets(c, topic_name, 1) == 0  # the open transaction still holds the LSO
        assert end_txn(c, "tx-replay", pid, epoch, True).error_code == 0
        wait_state(c, "tx-replay", "CompleteCommit")
        wait_until(lambda: offsets(c, topic_name, 1) == 2, what="the commit marker")


def test_kill9_in_the_middle_of_a_commit_completes_it_after_restart(broker_factory: Callable[..., BrokerProcess],
                                                                    topic_name: str) -> None:
    b = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name, partitions=1)
        pid, epoch = open_txn(c, "tx-crash", topic_name, [b"1", b"2", b"3"])
        assert end_txn(c, "tx-crash", pid, epoch, True).error_code == 0  # PrepareCommit is written
    b.kill9()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert wait_state(c, "tx-crash", "CompleteCommit").transaction_state == "CompleteCommit"
        # (a marker written before the kill is written again by the restarted coordinator: harmless,
        # as in Kafka; the transaction's records are then stable)
        wait_until(lambda: offsets(c, topic_name, 1) == offsets(c, topic_name, 0) >= 4,
                   what="the commit marker after the restart")


def test_transaction_version_2_adds_partitions_implicitly_and_bumps_epochs(broker: BrokerProcess,
                                                                          topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        r = init_txn(c, "tx-v2", version=5)
        pid, epoch = r.producer_id, r.producer_epoch
        # Produce v12: no AddPartitionsToTxn, the leader adds the partition.
        assert produce_v(c, topic_name, txn_batch(pid, epoch, 0, [b"v2"]), 12, "tx-v2").error_code == 0
        d = describe_txn(c, "tx-v2")
        assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == [topic_name]
        done = end_txn(c, "tx-v2", pid, epoch, True, version=5)
        assert (done.error_code, done.producer_id, done.producer_epoch) == (0, pid, epoch + 1)
        early = end_txn(c, "tx-v2", pid, epoch, True, version=5)  # a retry while the markers may still go out
        assert (early.error_code, early.producer_epoch) in ((0, epoch + 1), (ErrorCode.CONCURRENT_TRANSACTIONS, -1))
        wait_state(c, "tx-v2", "CompleteCommit")
        retry = end_txn(c, "tx-v2", pid, epoch, True, version=5)  # a retry, recognised by the old epoch
        assert (retry.error_code, retry.producer_epoch) == (0, epoch + 1)
        # The ended epoch is fenced at the partition by the marker's bumped epoch.
        stale = produce_v(c, topic_name, txn_batch(pid, epoch, 1, [b"stale"]), 12, "tx-v2")
        assert stale.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
        nxt = produce_v(c, topic_name, txn_batch(pid, epoch + 1, 0, [b"next"]), 12, "tx-v2")
        assert nxt.error_code == 0


def test_transaction_version_1_needs_the_partition_added_first(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        r = init_txn(c, "tx-v1")
        pid, epoch = r.producer_id, r.producer_epoch
        not_added = produce_v(c, topic_name, txn_batch(pid, epoch, 0, [b"x"]), 9, "tx-v1")
        assert not_added.error_code == ErrorCode.INVALID_TXN_STATE  # (before v11: not TRANSACTION_ABORTABLE)
        v11 = produce_v(c, topic_name, txn_batch(pid, epoch, 0, [b"x"]), 11, "tx-v1")
        assert v11.error_code == ErrorCode.TRANSACTION_ABORTABLE
        assert offsets(c, topic_name, 0) == 0  # nothing appended
        assert add_partitions(c, "tx-v1", pid, epoch, {topic_name: [0]}) == {(topic_name, 0): 0}
        assert produce_v(c, topic_name, txn_batch(pid, epoch, 0, [b"x"]), 9, "tx-v1").error_code == 0


def aborted_at(c: RawClient, topic: str, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
    """The aborted transactions a read_committed Fetch from `offset` reports: (producer id, first offset)."""
    resp = c.request(1, 11, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
                             "isolation_level": 1, "session_id": 0, "session_epoch": -1, "topics": [
                                 {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                  "fetch_offset": offset, "log_start_offset": -1,
                                                                  "partition_max_bytes": max_bytes}]}],
                             "forgotten_topics_data": [], "rack_id": ""})
    p = resp.responses[0].partitions[0]
    return [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or [])]


def test_end_txn_racing_the_timeout_has_one_outcome(broker_factory: Callable[..., BrokerProcess],
                                                    topic_name: str) -> None:
    """EndTxn(commit) sent around the moment the timeout abort fires: whichever wins, the client's
    answer, the coordinator's state and the partition's markers all say the same."""
    b = broker_factory(transaction_abort_timed_out_transaction_cleanup_interval_ms="10")
    outcomes = set()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        for i in range(12):
            tid = f"tx-race-{i}"
            start = offsets(c, topic_name, 0)
            pid, epoch = open_txn(c, tid, topic_name, [b"r%d" % i], timeout_ms=300)
            time.sleep(0.25 + 0.01 * i)  # (the race itself: the commit lands just before or after 300 ms)
            code = end_txn(c, tid, pid, epoch, True).error_code
            assert code in (ErrorCode.NONE, ErrorCode.PRODUCER_FENCED), code
            state = "CompleteCommit" if code == ErrorCode.NONE else "CompleteAbort"
            assert wait_state(c, tid, state).transaction_state == state
            wait_until(lambda: offsets(c, topic_name, 1) == offsets(c, topic_name, 0), what="the marker")
            aborted = (pid, start) in aborted_at(c, topic_name, start)
            assert aborted == (code != ErrorCode.NONE), (i, code, aborted)
            outcomes.add(state)
    assert outcomes  # (which ones occur depends on timing; each one is checked above)


def test_a_fetch_lists_only_the_aborted_transactions_in_what_it_returns(broker: BrokerProcess,
                                                                        topic_name: str) -> None:
    """Kafka's bound: the aborted transactions that overlap the fetched batches, not every one up to
    the LSO (a consumer far behind would otherwise get them all with every fetch)."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        big = b"x" * 4000
        first_pid, first_epoch = open_txn(c, "tx-bound-a", topic_name, [big] * 4)  # offsets 0-3, one batch
        assert end_txn(c, "tx-bound-a", first_pid, first_epoch, True).error_code == 0
        wait_until(lambda: offsets(c, topic_name, 1) == 5, what="the first commit")
        pid, epoch = open_txn(c, "tx-bound-b", topic_name, [b"doomed"])  # offset 5
        assert end_txn(c, "tx-bound-b", pid, epoch, False).error_code == 0
        wait_until(lambda: offsets(c, topic_name, 1) == 7, what="the abort marker")
        assert aborted_at(c, topic_name, 0, max_bytes=1000) == []  # only the first batch (min one batch)
        assert aborted_at(c, topic_name, 0) == [(pid, 5)]
        assert aborted_at(c, topic_name, 5) == [(pid, 5)]


def finalized_features(bootstrap: str) -> dict[str, tuple[int, int]]:
    with RawClient(bootstrap) as c:
        # (v4+: below it, features supported from level 0 are left out, as Kafka does: KAFKA-17492)
        r = c.request(18, 4, {"client_software_name": "samsa-tests", "client_software_version": "1"})
    assert r.error_code == 0
    assert {f.name: (f.min_version, f.max_version) for f in r.supported_features} == {
        "transaction.version": (0, 2), "group.version": (0, 1)}
    return {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features
            if f.name == "transaction.version"}


def test_finalized_transaction_version_is_the_broker_config(broker: BrokerProcess,
                                                            broker_factory: Callable[..., BrokerProcess]) -> None:
    """ApiVersions finalizes `transaction.version` at the config's level (2 by default); at 0 the
    feature is not listed, as Kafka lists none finalized at 0 (level 1 with Kafka's Java client:
    tests/compat/test_java_client.py)."""
    assert finalized_features(broker.bootstrap) == {"transaction.version": (2, 2)}
    assert finalized_features(broker_factory(transaction_version="0").bootstrap) == {}
