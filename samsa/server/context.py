"""What a request handler may use: its `RequestContext`.

A handler (`samsa/handlers/`, one module per API) is `handle(ctx: RequestContext, req)`, and
everything it uses of the broker comes through `ctx`: handlers import nothing else of
`samsa.server` but this module and the request-lifecycle types (`responses.Pending` and
`NO_RESPONSE`, the purgatory's `DelayedOperation` family, `fetch_sessions`). The layering
contract in pyproject.toml checks it.

Three lifetimes, three places:

* **The broker's services** (`BrokerServices`): the same for every request, built once by the
  broker when its storage and metadata are open, before the listeners accept: replicas, topics,
  cluster view, admin, groups, controller, producer ids, purgatory, fetch sessions, and the
  config in force (read at each use: dynamic broker configs replace it).
* **The connection's** (`ClientConnection`): the peer, the listener it came in on, the client
  id it last sent and the authenticated `principal`. The principal is a per-connection value:
  it lives on the connection (`network.Connection.principal`), `User:ANONYMOUS` (Kafka's name
  for an unauthenticated client) until a SASL authenticator sets it once the connection has
  authenticated; `ctx.principal` reads it there, so every request sees the connection's
  current one.
* **The request's** (`RequestContext`): the services, the connection and the request header.
  It is made for every request (10k+ a second on the produce and fetch paths), so it is three
  slots and nothing else; every other attribute is a property reading the services or the
  connection when a handler asks.

The types handlers meet through the context are re-exported here, so that a handler names them
without importing the modules that define them: `Topic` (`ctx.topics`), `Partition`
(`ctx.replicas`), `Controller` (`ctx.controller`), `ClientQuotas` (`ctx.quotas`);
`validate_topic_name`, Kafka's rule for topic names (`topics.py`); the ACL vocabulary
(`acls.py`: `Op`, `ResourceType`, ...); and what produce and fetch count in (`metrics.py`:
`TopicStats`, a topic's counters, reached through `ctx.replicas` or a `Partition`, and
`NOT_A_PRODUCE_FAILURE`).

Authorization: `ctx.authorize(op, resource type, name)` asks the broker's authorizer about the
connection's principal and address (always True when `authorizer.class.name` is unset), as
Kafka's handlers ask theirs; `ctx.authorizer` is the authorizer itself, for the ACL APIs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from samsa.config import BrokerConfig
from samsa.controller.controller import Controller
from samsa.protocol.messages import RequestHeader
from samsa.server.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPS,
    Binding,
    BindingFilter,
    Entry,
    Op,
    Pattern,
    PatternType,
    Permission,
    ResourceType,
    binding_problem,
)
from samsa.server.admin import AdminManager
from samsa.server.alter_log_dirs import ReplicaAlterLogDirsManager
from samsa.server.authorizer import Authorizer
from samsa.server.cluster import ClusterView
from samsa.server.entity_configs import EntityConfigs
from samsa.server.fetch_sessions import FetchSessionCache
from samsa.server.group_manager import GroupManager
from samsa.server.log_cleaner import LogCleaningState
from samsa.server.metrics import NOT_A_PRODUCE_FAILURE, TopicStats
from samsa.server.network import ANONYMOUS
from samsa.server.producer_ids import ProducerIdManager
from samsa.server.purgatory import Purgatory
from samsa.server.quotas import ClientQuotas
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.sasl import SaslAuthenticator, authenticated, begin_reauthentication
from samsa.server.topics import Topic, TopicIdIndex, validate_topic_name
from samsa.server.txn_manager import TransactionManager

__all__ = ["ANONYMOUS", "CLUSTER_NAME", "NOT_A_PRODUCE_FAILURE", "TopicStats",
           "Authorizer", "Binding", "BindingFilter", "BrokerServices",
           "ClientConnection", "ClientQuotas", "Controller", "Endpoint", "Entry", "Op", "Partition", "Pattern",
           "PatternType", "Permission", "RequestContext", "ResourceType", "Topic", "binding_problem",
           "validate_topic_name", "authenticated",
           "begin_reauthentication"]

# (node id, host, port, rack) of this broker on one listener, as Metadata describes a broker.
Endpoint = tuple[int, str, int, str | None]


class ClientConnection(Protocol):
    """What a handler sees of the connection a request came on (`network.Connection`)."""

    peer: Any  # (host, port) for TCP
    peer_str: str
    client_id: str | None
    principal: str  # ANONYMOUS until authenticated (a TLS client certificate, SASL)
    sasl: SaslAuthenticator | None  # on a SASL listener until authenticated
    sasl_mechanism: str | None  # the SASL mechanism it authenticated with
    session_expiry: float  # when its SASL session ends (monotonic; 0: never)

    @property
    def listener(self) -> str:
        """The name of the listener the client connected to (PLAINTEXT, SSL, ...)."""
        ...

    def close_after_reply(self) -> None:
        """Read nothing more; close once the reply is written (a refused authentication)."""
        ...


@dataclass(slots=True, eq=False)
class BrokerServices:
    """The broker's services, the same for every request: built once, at start-up."""

    node_id: int
    cluster_id: str
    current_config: Callable[[], BrokerConfig]  # dynamic broker configs replace the config whole: read per use
    topics: dict[str, Topic]  # the broker's own dict, kept current by the cluster view
    replicas: ReplicaManager
    cluster: ClusterView
    admin: AdminManager
    groups: GroupManager
    controller: Controller
    producer_ids: ProducerIdManager
    purgatory: Purgatory
    fetch_sessions: FetchSessionCache
    entity_configs: EntityConfigs  # users' and client-ids' configs (quotas, SCRAM credentials)
    quotas: ClientQuotas  # client quotas in force (from entity_configs; the dispatcher applies them)
    api_versions: list[tuple[int, int, int]]  # (api key, min version, max version), from the handler registry
    endpoints: Callable[[str], list[Endpoint]]  # this broker's endpoint on a listener ([] if it has none)
    topic_ready: Callable[[str], bool]  # the topic exists and each of its partitions has a leader
    auto_create_topic: Callable[[str], Awaitable[Topic]]  # with the broker's defaults (Metadata's auto-creation)
    # writes every log dir's checkpoints (log start offsets) as they are now, in a worker thread
    persist_log_start_offsets: Callable[[], asyncio.Future[None]]
    transactions: TransactionManager
    authorizer: Authorizer | None = None  # authorizer.class.name set: the ACL authorizer
    # the log dirs that failed (offline until a restart): DescribeLogDirs reports them
    offline_log_dirs: Callable[[], Collection[Path]] = lambda: ()
    # the log cleaner's state of each compacted log here (server/log_cleaner.py; {} without one)
    describe_log_cleaner: Callable[[], Mapping[tuple[str, int], LogCleaningState]] = dict
    # moves of replicas between this broker's log dirs (AlterReplicaLogDirs; None: not served)
    log_dir_moves: ReplicaAlterLogDirsManager | None = None
    topic_ids: TopicIdIndex | None = None  # over `topics`, made at first use (`RequestContext.topic_name`)

    @property
    def config(self) -> BrokerConfig:
        """The broker's config in force (with its dynamic broker configs)."""
        return self.current_config()


class RequestContext:
    """One request: the broker's services, its connection and its header (see the module doc)."""

    __slots__ = ("conn", "header", "services")

    def __init__(self, services: BrokerServices, conn: ClientConnection, header: RequestHeader) -> None:
        self.services = services
        self.conn = conn
        self.header = header

    # -- the request and its connection -----------------------------------------------------------

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def listener(self) -> str:
        return self.conn.listener

    @property
    def principal(self) -> str:
        return self.conn.principal

    @property
    def host(self) -> str:
        """The client's address, as ACLs name hosts."""
        peer = self.conn.peer
        return str(peer[0]) if isinstance(peer, tuple) else str(peer)

    # -- authorization ------------------------------------------------------------------------

    @property
    def authorizer(self) -> Authorizer | None:
        return self.services.authorizer

    def authorize(self, op: Op, rtype: ResourceType, name: str, log_denied: bool = True) -> bool:
        """May this connection's principal do `op` on the resource? (True without an authorizer.)
        `log_denied=False` for a check that only filters what is shown (Kafka's logIfDenied)."""
        auth = self.services.authorizer
        if auth is None:
            return True
        return auth.authorize(self.conn.principal, self.host, op, rtype, name, self.header.api_key, log_denied)

    def authorize_cluster(self, op: Op, log_denied: bool = True) -> bool:
        return self.authorize(op, ResourceType.CLUSTER, CLUSTER_NAME, log_denied)

    def authorize_any(self, op: Op, rtype: ResourceType) -> bool:
        """May the principal do `op` on some resource of the type? (Kafka's authorizeByResourceType.)"""
        auth = self.services.authorizer
        if auth is None:
            return True
        return auth.authorize_any(self.conn.principal, self.host, op, rtype, self.header.api_key)

    def authorized_operations(self, rtype: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field of a resource (every supported operation
        without an authorizer)."""
        auth = self.services.authorizer
        if auth is None:
            return sum(1 << int(op) for op in SUPPORTED_OPS[rtype])
        return auth.index.authorized_operations(self.conn.principal, self.host, rtype, name)

    # -- the broker's services ----------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.services.node_id

    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id

    @property
    def controller_id(self) -> int:
        """The active controller as this broker's view knows it (-1: none known)."""
        return self.services.cluster.controller_id

    @property
    def config(self) -> BrokerConfig:
        return self.services.current_config()

    @property
    def topics(self) -> dict[str, Topic]:
        return self.services.topics

    def topic_name(self, topic_id: bytes) -> str | None:
        """The name of the topic with this id (KIP-516), None when no topic has it."""
        index = getattr(self.services, "topic_ids", None)
        if index is None:
            index = self.services.topic_ids = TopicIdIndex(self.services.topics)
        return index.name(topic_id)

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def cluster(self) -> ClusterView:
        return self.services.cluster

    @property
    def admin(self) -> AdminManager:
        return self.services.admin

    @property
    def groups(self) -> GroupManager:
        return self.services.groups

    @property
    def controller(self) -> Controller:
        return self.services.controller

    @property
    def transactions(self) -> TransactionManager:
        return self.services.transactions

    @property
    def producer_ids(self) -> ProducerIdManager:
        return self.services.producer_ids

    @property
    def purgatory(self) -> Purgatory:
        return self.services.purgatory

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        return self.services.fetch_sessions

    @property
    def entity_configs(self) -> EntityConfigs:
        return self.services.entity_configs

    @property
    def quotas(self) -> ClientQuotas:
        return self.services.quotas

    @property
    def api_versions(self) -> list[tuple[int, int, int]]:
        return self.services.api_versions

    def endpoints(self, listener: str) -> list[Endpoint]:
        return self.services.endpoints(listener)

    def topic_ready(self, name: str) -> bool:
        return self.services.topic_ready(name)

    def persist_log_start_offsets(self) -> asyncio.Future[None]:
        return self.services.persist_log_start_offsets()

    def auto_create_topic(self, name: str) -> Awaitable[Topic]:
        return self.services.auto_create_topic(name)

    def offline_log_dirs(self) -> Collection[Path]:
        return self.services.offline_log_dirs()

    @property
    def log_dir_moves(self) -> ReplicaAlterLogDirsManager | None:
        return self.services.log_dir_moves
