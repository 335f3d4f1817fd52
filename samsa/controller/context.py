"""What the controller uses of the broker it runs in: a typed seam instead of `broker: Any`.

The controller reads and writes the metadata store, reads this broker's view of the cluster
(partition states as the store last delivered them, broker endpoints) and a few configs.
Tests hand it a context of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.controller.event_queue import EventQueue
from samsa.metadata.store import MetadataStore
from samsa.metadata.zkdata import PartitionState, TopicAssignment

TP = tuple[str, int]
Decide = Callable[[str, int, list[int], "PartitionState | None"], "PartitionState | None"]


class ClusterState(Protocol):
    def state(self, topic: str, partition: int) -> PartitionState | None: ...
    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None: ...
    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool: ...
    async def wait_loaded(self, timeout_s: float) -> bool: ...  # True once it holds every state there was
    def was_seen(self, node_id: int) -> bool: ...  # registered at some point since this broker started


@dataclass
class ControllerContext:
    node_id: int
    store: MetadataStore
    view: ClusterState
    config: Callable[[str], Any]  # broker config values, read when used (dynamic configs apply)
    topic_config: Callable[[str, str], object]  # (topic, key) -> the topic's effective value
    inter_broker_listener: str


class ControllerCore(Protocol):
    """What the controller's operations (operations.py) use of the controller itself."""

    ctx: ControllerContext
    active: bool
    live: set[int] | None
    shutting_down: set[int]
    assignments: dict[str, TopicAssignment]
    events: EventQueue

    @property
    def store(self) -> MetadataStore: ...

    async def update_states(self, keys: Iterable[TP], decide: Decide,
                            fresh: set[TP] | frozenset[TP] = frozenset()) -> dict[TP, PartitionState]: ...
    def all_partitions(self) -> list[TP]: ...
    async def elect_offline(self, keys: Iterable[TP], why: str, fresh: set[TP] | frozenset[TP] = frozenset(), *,
                            mark_offline: bool = False) -> dict[TP, PartitionState]: ...
