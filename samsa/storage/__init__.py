"""Storage: partition logs on disk in Kafka's layout (segments, indexes, checkpoints, recovery)."""

from samsa.storage.config import LogConfig
from samsa.storage.errors import (
    CorruptCheckpoint,
    CorruptIndex,
    InconsistentMetadata,
    OffsetOutOfRange,
    RecordBatchTooLarge,
    RecordTooLarge,
    StorageError,
    UnexpectedAppendOffset,
)
from samsa.storage.log import AppendResult, FileSlice, Log
from samsa.storage.log_manager import LogManager, parse_topic_partition

__all__ = [
    "AppendResult",
    "CorruptCheckpoint",
    "CorruptIndex",
    "FileSlice",
    "InconsistentMetadata",
    "Log",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "RecordBatchTooLarge",
    "RecordTooLarge",
    "StorageError",
    "UnexpectedAppendOffset",
    "parse_topic_partition",
]
