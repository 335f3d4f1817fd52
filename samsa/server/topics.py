"""Topics as the broker sees them, and Kafka's rules for topic names."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from samsa.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


_VALID_SEEN: set[str] = set()


def validate_topic_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION for a name Kafka would refuse."""
    if name in _VALID_SEEN:
        return
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'",
        )
    if len(_VALID_SEEN) < 100_000:
        _VALID_SEEN.add(name)


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    configs: dict[str, str] = field(default_factory=dict)
    compression_type: str = "producer"  # the topic's compression.type in force
    min_insync_replicas: int = 1  # the topic's min.insync.replicas in force

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.partitions.values()), []))


class TopicIdIndex:
    """Topic id (the 16 bytes) -> name, over the broker's own topics dict (KIP-516 requests name
    topics by id: Fetch v13+). Built on first use and rebuilt when a lookup misses or finds a
    name that now belongs to another id (a topic deleted, created or re-created), so it never
    needs telling about changes: a hit costs two dict lookups, a miss one pass over the topics."""

    __slots__ = ("_names", "_topics")

    def __init__(self, topics: dict[str, Topic]) -> None:
        self._topics = topics
        self._names: dict[bytes, str] = {}

    def name(self, topic_id: bytes) -> str | None:
        """The topic's name, None for an id no topic has."""
        name = self._names.get(topic_id)
        if name is not None:
            topic = self._topics.get(name)
            if topic is not None and topic.topic_id.bytes == topic_id:
                return name
        self._names = {t.topic_id.bytes: n for n, t in self._topics.items()}
        return self._names.get(topic_id)
