"""LogConfig: the per-topic log settings, under Kafka's topic-level config names.

`LogConfig.from_topic_configs({"segment.bytes": "1048576", ...})` reads Kafka topic configs
(as CreateTopics/AlterConfigs carry them); `from_broker_configs` reads the `log.*` defaults
of server.properties (`log.retention.hours`, `log.segment.bytes`, ...).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    # How far a CreateTime may be from the broker's clock (KIP-937; the "after" default is
    # Kafka 4's one hour); the deprecated difference.max.ms, when set, bounds both.
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    message_timestamp_difference_max_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"
    # Compaction (cleaner.py): how long a tombstone or an emptied transaction's marker outlives
    # the clean that first saw it; how old a record must be before a clean may remove what it
    # supersedes, and how old the dirty part may grow before a clean is due whatever its ratio;
    # the dirty fraction of the cleanable bytes that makes a log worth cleaning.
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5

    def __post_init__(self) -> None:
        if self.segment_bytes < 14 or self.segment_bytes > 2**31 - 1:
            raise ValueError(f"segment.bytes out of range: {self.segment_bytes}")
        if self.segment_index_bytes < 12:
            raise ValueError(f"segment.index.bytes out of range: {self.segment_index_bytes}")
        if self.segment_ms < 1 or self.index_interval_bytes < 0 or self.max_message_bytes < 0:
            raise ValueError("segment.ms, index.interval.bytes and max.message.bytes must be positive")
        if self.flush_messages < 1 or self.flush_ms < 0 or self.file_delete_delay_ms < 0:
            raise ValueError("flush.messages, flush.ms and file.delete.delay.ms must be positive")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError("retention.ms and retention.bytes must be >= -1")
        if min(self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms,
               self.message_timestamp_difference_max_ms) < 0:
            raise ValueError("message.timestamp.{before,after,difference}.max.ms must be >= 0")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"message.timestamp.type must be one of {TIMESTAMP_TYPES}")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise ValueError("delete.retention.ms and min.compaction.lag.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError(f"max.compaction.lag.ms must be >= 1: {self.max_compaction_lag_ms}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:  # (also refuses NaN)
            raise ValueError(f"min.cleanable.dirty.ratio must be between 0 and 1: {self.min_cleanable_dirty_ratio}")
        policies = set(self.cleanup_policy.replace(" ", "").split(","))
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"cleanup.policy must be delete and/or compact: {self.cleanup_policy!r}")

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def replace(self, **changes: Any) -> LogConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """`base` (default: Kafka's defaults) overridden by the Kafka topic configs given.

        Keys this class does not know are ignored (other layers own them); bad values raise
        ValueError naming the key.
        """
        changes: dict[str, Any] = {}
        for key, value in configs.items():
            field = TOPIC_CONFIG_FIELDS.get(key)
            if field is not None and value is not None:
                changes[field] = _convert(key, field, value)
        return (base or cls()).replace(**changes)

    @classmethod
    def from_broker_configs(cls, props: Mapping[str, str]) -> LogConfig:
        """Broker-wide defaults from server.properties `log.*` keys (ms beats minutes beats hours)."""
        topic: dict[str, str] = {}
        for key, topic_key in BROKER_CONFIG_KEYS.items():
            if key in props:
                topic[topic_key] = props[key]
        for unit_ms, suffix in ((3600000, "hours"), (60000, "minutes"), (1, "ms")):
            if f"log.retention.{suffix}" in props:
                topic["retention.ms"] = str(_scaled(props[f"log.retention.{suffix}"], unit_ms))
            if f"log.roll.{suffix}" in props:
                topic["segment.ms"] = str(_scaled(props[f"log.roll.{suffix}"], unit_ms))
        return cls.from_topic_configs(topic)

    def to_topic_configs(self) -> dict[str, str]:
        """Kafka topic config names and string values (for DescribeConfigs)."""
        return {key: str(getattr(self, field)) for key, field in TOPIC_CONFIG_FIELDS.items()}


TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "message.timestamp.difference.max.ms": "message_timestamp_difference_max_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
}

BROKER_CONFIG_KEYS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleanup.policy": "cleanup.policy",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
}

_STR_FIELDS = {"message_timestamp_type", "cleanup_policy"}
_FLOAT_FIELDS = {"min_cleanable_dirty_ratio"}


def _convert(key: str, field: str, value: str) -> Any:
    if field in _STR_FIELDS:
        return str(value).strip()
    if field in _FLOAT_FIELDS:
        try:
            return float(str(value).strip())
        except ValueError:
            raise ValueError(f"invalid value for {key}: {value!r}") from None
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"invalid value for {key}: {value!r}") from None


def _scaled(value: str, unit_ms: int) -> int:
    n = int(value.strip())
    return -1 if n < 0 else min(n * unit_ms, LONG_MAX)
