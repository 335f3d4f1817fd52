"""The transaction coordinator over the wire: FindCoordinator, InitProducerId, AddPartitionsToTxn,
EndTxn, DescribeTransactions, ListTransactions, with Kafka's errors."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient
from tests.txn.txnclient import add_partitions, describe_txn, end_txn, find_txn_coordinator, init_txn, wait_state


def test_find_coordinator_names_this_broker_for_a_transactional_id(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        found = find_txn_coordinator(c, "tx-find")
        assert found.error_code == 0 and found.port == broker.port
        empty = c.request(10, 4, {"key_type": 1, "coordinator_keys": [""]}).coordinators[0]
        assert empty.error_code == ErrorCode.INVALID_REQUEST
        other = c.request(10, 4, {"key_type": 7, "coordinator_keys": ["x"]}).coordinators[0]
        assert other.error_code == ErrorCode.INVALID_REQUEST


def test_init_producer_id_creates_then_bumps_the_epoch(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        first = init_txn(c, "tx-init")
        assert first.error_code == 0 and first.producer_id >= 0 and first.producer_epoch == 0
        second = init_txn(c, "tx-init")
        assert (second.error_code, second.producer_id, second.producer_epoch) == (0, first.producer_id, 1)
        d = describe_txn(c, "tx-init")
        assert (d.error_code, d.transaction_state, d.producer_id, d.producer_epoch) == (0, "Empty", first.producer_id, 1)


def test_transaction_timeout_above_the_maximum_is_refused(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = init_txn(c, "tx-timeout", timeout_ms=900001)
        assert resp.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert describe_txn(c, "tx-timeout").error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_add_partitions_starts_a_transaction_and_errors_are_kafkas(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, partitions=2)
        r = init_txn(c, "tx-add")
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(c, "tx-add", pid, epoch, {topic_name: [0, 1]}) == {(topic_name, 0): 0, (topic_name, 1): 0}
        d = describe_txn(c, "tx-add")
        assert d.transaction_state == "Ongoing" and d.transaction_start_time > 0
        assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [(topic_name, [0, 1])]
        # An unknown partition: its own error, the others not attempted, nothing added.
        got = add_partitions(c, "tx-add", pid, epoch, {topic_name: [0, 9]})
        assert got == {(topic_name, 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                       (topic_name, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # A stale epoch is fenced; an unknown producer id is not mapped.
        assert add_partitions(c, "tx-add", pid, epoch + 5, {topic_name: [0]}) == {(topic_name, 0): ErrorCode.PRODUCER_FENCED}
        assert add_partitions(c, "tx-add", pid, epoch, {topic_name: [0]}, version=1) == {(topic_name, 0): 0}
        assert add_partitions(c, "tx-add", pid + 1, epoch, {topic_name: [0]}) == {
            (topic_name, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert add_partitions(c, "tx-unknown", pid, epoch, {topic_name: [0]}) == {
            (topic_name, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        # Before v2 PRODUCER_FENCED is INVALID_PRODUCER_EPOCH.
        assert add_partitions(c, "tx-add", pid, epoch + 5, {topic_name: [0]}, version=1) == {
            (topic_name, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        # The transaction the refusals left open still aborts.
        assert end_txn(c, "tx-add", pid, epoch, False).error_code == 0
        d = wait_state(c, "tx-add", "CompleteAbort")
        assert d.transaction_state == "CompleteAbort" and not d.topics


def test_end_txn_errors(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        r = init_txn(c, "tx-end")
        pid, epoch = r.producer_id, r.producer_epoch
        assert end_txn(c, "tx-end", pid, epoch, True).error_code == ErrorCode.INVALID_TXN_STATE  # nothing open
        assert end_txn(c, "tx-end", pid, epoch + 1, True).error_code == ErrorCode.PRODUCER_FENCED
        assert end_txn(c, "tx-end", pid + 1, epoch, True).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_list_transactions_filters(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        r = init_txn(c, "tx-list-a")
        add_partitions(c, "tx-list-a", r.producer_id, r.producer_epoch, {topic_name: [0]})
        init_txn(c, "tx-list-b")

        def listed(**filters: object) -> dict[str, str]:
            body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
            body.update(filters)
            resp = c.request(66, 1, body)
            assert resp.error_code == 0
            return {t.transactional_id: t.transaction_state for t in resp.transaction_states
                    if t.transactional_id.startswith("tx-list-")}

        assert listed() == {"tx-list-a": "Ongoing", "tx-list-b": "Empty"}
        assert listed(state_filters=["Ongoing"]) == {"tx-list-a": "Ongoing"}
        assert listed(producer_id_filters=[r.producer_id]) == {"tx-list-a": "Ongoing"}
        assert listed(duration_filter=3_600_000) == {}
        resp = c.request(66, 1, {"state_filters": ["Nonsense"], "producer_id_filters": [], "duration_filter": -1})
        assert list(resp.unknown_state_filters) == ["Nonsense"] and not resp.transaction_states
