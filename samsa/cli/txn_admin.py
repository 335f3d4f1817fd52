"""The admin calls behind `samsa transactions`, as Kafka's Admin makes them, with Samsa's own codec.

confluent-kafka has no binding for DescribeProducers, WriteTxnMarkers or ListTransactions'
filters, so every request goes over `client.raw_request` (one connection each, with the tool's
TLS/SASL properties):

    brokers, leaders   Metadata v12 from the first bootstrap server that answers
    list_transactions  ListTransactions v1 to every broker
    describe           FindCoordinator v4 (key_type 1), then DescribeTransactions v0 to the coordinator
    describe_producers DescribeProducers v0 to each partition's leader (or to one broker named)
    abort              WriteTxnMarkers v1 with an ABORT marker to the partition's leader

Before the first request of an API to a broker its ApiVersions are read, so a broker that does
not serve the API fails as Kafka's client does ("The node does not support ..."), not with a
garbled answer. Errors Kafka's Admin retries (a coordinator loading or moving, a leader being
elected or moved) are retried here too, with fresh metadata, until the tool's timeout
(`default.api.timeout.ms` of --command-config, else 10 s). The others become `AdminError`,
carrying the text of Kafka's exception; the command adds its own context as Kafka's tool does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from samsa.cli import client as cl
from samsa.cli.common import CliError, bootstrap_servers
from samsa.cli.txn_tables import (
    API_NAMES,
    ProducerState,
    TopicPartition,
    TxnDescription,
    abort_error,
    describe_producers_error,
    describe_txn_error,
    find_coordinator_error,
    kafka_message,
    list_txn_error,
    tp_text,
)
from samsa.protocol.errors import ErrorCode

T = TypeVar("T")
_E = ErrorCode
_BACKOFF_S = 0.1
# WriteTxnMarkers waits for the marker's replication (Kafka: request.timeout.ms, 30 s) before answering.
_MARKER_WAIT_S = 30.0


class AdminError(Exception):
    """A failed admin call; the message is Kafka's exception's."""


class _Retry(Exception):
    """A retriable answer: try again (with fresh metadata) until the deadline; `why` if it passes."""

    def __init__(self, why: str) -> None:
        super().__init__(why)


class Node(NamedTuple):
    node_id: int
    host: str
    port: int


class Partitions(NamedTuple):
    """Metadata of some partitions: their leaders (-1: none) and replicas, the topics' errors and
    the cluster's brokers."""

    brokers: dict[int, Node]
    leaders: dict[TopicPartition, int]
    replicas: dict[TopicPartition, list[int]]
    topic_errors: dict[str, int]

    def leader(self, tp: TopicPartition) -> Node:
        """The partition's leader; AdminError in Kafka's words (PartitionLeaderStrategy) when the
        topic or partition is unknown or may not be described, _Retry while it has no leader."""
        code = self.topic_errors.get(tp[0], 0)
        if code == _E.UNKNOWN_TOPIC_OR_PARTITION:
            raise AdminError(f"Failed to fetch metadata for partition {tp_text(tp)} because metadata for topic "
                             f"`{tp[0]}` could not be found")
        if code == _E.TOPIC_AUTHORIZATION_FAILED:
            raise AdminError(f"Failed to fetch metadata for partition {tp_text(tp)} due to topic authorization "
                             "failure")
        if code == _E.INVALID_TOPIC_EXCEPTION:
            raise AdminError(f"Failed to fetch metadata for partition {tp_text(tp)} due to invalid topic `{tp[0]}`")
        if code and code not in (_E.LEADER_NOT_AVAILABLE, _E.BROKER_NOT_AVAILABLE):
            raise AdminError(f"Failed to fetch metadata for partition {tp_text(tp)} due to unexpected error for "
                             f"topic `{tp[0]}`")
        if tp not in self.leaders and not code:
            raise AdminError(f"Failed to fetch metadata for partition {tp_text(tp)}: "
                             f"{kafka_message(_E.UNKNOWN_TOPIC_OR_PARTITION)}")
        node = self.brokers.get(self.leaders.get(tp, -1))
        if node is None:
            raise _Retry(f"No leader for partition {tp_text(tp)}: {kafka_message(_E.LEADER_NOT_AVAILABLE)}")
        return node


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (IPv6 hosts in brackets); Kafka's ConfigException text otherwise."""
    return bootstrap_servers(text)


class TxnAdmin:
    def __init__(self, bootstrap: str, props: dict[str, str], timeout: float) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.props = props
        self.timeout = timeout
        self._versions: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}

    # --- plumbing ---------------------------------------------------------------------------
    def _send(self, host: str, port: int, api_key: int, version: int, body: dict[str, Any],
              wait: float | None = None) -> Any:
        versions = self._versions.get((host, port))
        if versions is None:
            resp = cl.raw_request(host, port, 18, 3, {"client_software_name": "samsa-transactions",
                                                      "client_software_version": "1"}, self.timeout, self.props)
            versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self._versions[(host, port)] = versions
        lo, hi = versions.get(api_key, (0, -1))
        if not lo <= version <= hi:
            raise AdminError(f"The node does not support {API_NAMES.get(api_key, api_key)}")
        return cl.raw_request(host, port, api_key, version, body, wait or self.timeout, self.props)

    def _retrying(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return call()
            except _Retry as e:
                if time.monotonic() + _BACKOFF_S >= deadline:
                    raise AdminError(f"{e} (still so after {self.timeout:g} s)") from None
            time.sleep(_BACKOFF_S)  # a coordinator or leader is moving: ask again shortly

    def _metadata(self, topics: Sequence[str] | None) -> Any:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        failure: CliError | None = None
        for host, port in self.bootstrap:
            try:
                return cl.raw_request(host, port, 3, 12, body, self.timeout, self.props)
            except CliError as e:
                failure = e
        assert failure is not None
        raise failure

    # --- metadata -------------------------------------------------------------------------------
    def partitions(self, topics: Sequence[str] | None) -> Partitions:
        """Brokers and the partitions of `topics` (None: every topic, internal ones included)."""
        md = self._metadata(topics)
        brokers = {b.node_id: Node(b.node_id, b.host, b.port) for b in md.brokers}
        leaders: dict[TopicPartition, int] = {}
        replicas: dict[TopicPartition, list[int]] = {}
        errors: dict[str, int] = {}
        for t in md.topics:
            if t.error_code:
                errors[t.name] = t.error_code
            for p in t.partitions:
                leaders[(t.name, p.partition_index)] = p.leader_id
                replicas[(t.name, p.partition_index)] = list(p.replica_nodes)
        return Partitions(brokers, leaders, replicas, errors)

    def brokers(self) -> dict[int, Node]:
        return self.partitions([]).brokers

    def _broker(self, broker_id: int) -> Node:
        node = self.brokers().get(broker_id)
        if node is None:
            raise AdminError(f"Broker {broker_id} is not in the cluster's metadata")
        return node

    # --- ListTransactions -------------------------------------------------------------------------
    def list_transactions(self, duration_filter: int = -1,
                          producer_ids: Sequence[int] = ()) -> dict[int, list[tuple[str, int, str]]]:
        """Per broker id: (transactional id, producer id, state) of the transactions it coordinates."""
        out: dict[int, list[tuple[str, int, str]]] = {}
        body = {"state_filters": [], "producer_id_filters": list(producer_ids), "duration_filter": duration_filter}
        for node in sorted(self.brokers().values()):
            def one(node: Node = node) -> list[tuple[str, int, str]]:
                resp = self._send(node.host, node.port, 66, 1, body)
                if resp.error_code == _E.COORDINATOR_LOAD_IN_PROGRESS:
                    raise _Retry(kafka_message(resp.error_code))
                if resp.error_code:
                    raise AdminError(list_txn_error(resp.error_code, node.node_id))
                return [(s.transactional_id, s.producer_id, s.transaction_state) for s in resp.transaction_states]
            out[node.node_id] = self._retrying(one)
        return out

    # --- FindCoordinator + DescribeTransactions -----------------------------------------------------
    def describe_transaction(self, tid: str) -> TxnDescription | None:
        """The transactional id's state at its coordinator; None when the id is unknown there."""
        return self._retrying(lambda: self._describe_once(tid))

    def _describe_once(self, tid: str) -> TxnDescription | None:
        found = self._any_broker(10, 4, {"key_type": 1, "coordinator_keys": [tid]}).coordinators[0]
        if found.error_code in (_E.COORDINATOR_NOT_AVAILABLE, _E.COORDINATOR_LOAD_IN_PROGRESS):
            raise _Retry(kafka_message(found.error_code))
        if found.error_code:
            raise AdminError(find_coordinator_error(found.error_code, tid))
        resp = self._send(found.host, found.port, 65, 0, {"transactional_ids": [tid]})
        s = next((s for s in resp.transaction_states if s.transactional_id == tid), None)
        if s is None:
            raise AdminError(f"DescribeTransactions response from broker {found.node_id} left out "
                             f"transactionalId `{tid}`")
        if s.error_code in (_E.NOT_COORDINATOR, _E.COORDINATOR_NOT_AVAILABLE, _E.COORDINATOR_LOAD_IN_PROGRESS):
            raise _Retry(kafka_message(s.error_code))
        if s.error_code == _E.TRANSACTIONAL_ID_NOT_FOUND:
            return None
        if s.error_code:
            raise AdminError(describe_txn_error(s.error_code, tid))
        return TxnDescription(found.node_id, tid, s.transaction_state, s.producer_id, s.producer_epoch,
                              s.transaction_timeout, s.transaction_start_time,
                              frozenset((t.topic, p) for t in s.topics for p in t.partitions))

    def _any_broker(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        failure: CliError | None = None
        for host, port in self.bootstrap:
            try:
                return self._send(host, port, api_key, version, body)
            except CliError as e:
                failure = e
        assert failure is not None
        raise failure

    # --- DescribeProducers --------------------------------------------------------------------------
    def describe_producers(self, partitions: Sequence[TopicPartition],
                           broker_id: int | None = None) -> dict[TopicPartition, list[ProducerState]]:
        """The producers of each partition, from its leader (or from broker `broker_id`, whose
        NOT_LEADER_OR_FOLLOWER is then an error rather than a reason to look for the leader)."""
        return self._retrying(lambda: self._describe_producers_once(partitions, broker_id))

    def _describe_producers_once(self, partitions: Sequence[TopicPartition],
                                 broker_id: int | None) -> dict[TopicPartition, list[ProducerState]]:
        by_node: dict[Node, list[TopicPartition]] = {}
        if broker_id is not None:
            by_node[self._broker(broker_id)] = list(partitions)
        else:
            md = self.partitions(sorted({t for t, _ in partitions}))
            for tp in partitions:
                by_node.setdefault(md.leader(tp), []).append(tp)
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node, tps in by_node.items():
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            resp = self._send(node.host, node.port, 61, 0,
                              {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            for t in resp.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    if p.error_code == _E.NOT_LEADER_OR_FOLLOWER and broker_id is not None:
                        raise AdminError(f"Failed to describe active producers for partition {tp_text(tp)} on "
                                         f"brokerId {broker_id}")
                    if p.error_code in (_E.NOT_LEADER_OR_FOLLOWER, _E.LEADER_NOT_AVAILABLE):
                        raise _Retry(f"{kafka_message(p.error_code)} ({tp_text(tp)} on broker {node.node_id})")
                    if p.error_code:
                        raise AdminError(describe_producers_error(p.error_code, tp, p.error_message))
                    out[tp] = [ProducerState(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                             a.coordinator_epoch, a.current_txn_start_offset)
                               for a in p.active_producers]
        missing = [tp for tp in partitions if tp not in out]
        if missing:
            raise AdminError(f"DescribeProducers response left out partition {tp_text(missing[0])}")
        return out

    # --- WriteTxnMarkers ------------------------------------------------------------------------------
    def abort(self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int,
              spec: str) -> None:
        """Write an ABORT marker for the producer's transaction in the partition, at its leader
        (Kafka's Admin.abortTransaction)."""
        def once() -> None:
            node = self.partitions([tp[0]]).leader(tp)
            body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                                 "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                                 "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}]}]}
            resp = self._send(node.host, node.port, 27, 1, body, wait=self.timeout + _MARKER_WAIT_S)
            codes = [p.error_code for m in resp.markers if m.producer_id == producer_id
                     for t in m.topics if t.name == tp[0] for p in t.partitions if p.partition_index == tp[1]]
            if len(codes) != 1:
                raise AdminError(f"WriteTxnMarkers response did not hold exactly one entry for {tp_text(tp)} "
                                 f"and producerId {producer_id}")
            code = codes[0]
            if code in (_E.NOT_LEADER_OR_FOLLOWER, _E.REPLICA_NOT_AVAILABLE, _E.BROKER_NOT_AVAILABLE,
                        _E.UNKNOWN_TOPIC_OR_PARTITION):
                raise _Retry(f"{kafka_message(code)} ({tp_text(tp)} on broker {node.node_id})")
            if code:
                raise AdminError(abort_error(code, spec, coordinator_epoch))
        self._retrying(once)
