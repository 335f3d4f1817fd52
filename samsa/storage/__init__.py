"""Storage: partition logs on disk in Kafka's layout (segments, indexes, checkpoints, recovery),
behind the PartitionLog protocol (partition_log.py), with a null engine for benchmarks."""

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
from samsa.storage.log import Log
from samsa.storage.log_manager import LogManager, parse_topic_partition
from samsa.storage.partition_log import AppendResult, FileSlice, LogSlice, MemorySlice, PartitionLog

__all__ = [
    "AppendResult",
    "CorruptCheckpoint",
    "CorruptIndex",
    "FileSlice",
    "InconsistentMetadata",
    "Log",
    "LogConfig",
    "LogManager",
    "LogSlice",
    "MemorySlice",
    "OffsetOutOfRange",
    "PartitionLog",
    "RecordBatchTooLarge",
    "RecordTooLarge",
    "StorageError",
    "UnexpectedAppendOffset",
    "parse_topic_partition",
]
