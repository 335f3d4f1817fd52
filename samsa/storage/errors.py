"""Storage-layer exceptions.

Each carries `kafka_error`, the Kafka error name a request handler should answer with when
the exception escapes a storage call made on behalf of a client (None: not a client error).
"""

from __future__ import annotations

import errno

# OSErrors that say nothing about the disk's health: it is full (space may come back: answered
# KAFKA_STORAGE_ERROR per request and retried), or the process ran out of something else.
_TRANSIENT = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN,
                        errno.EINTR})


def is_log_dir_failure(e: BaseException) -> bool:
    """Whether `e`, met in a log dir, means the dir itself failed (Kafka's LogDirFailureChannel):
    an I/O error, a read-only or vanished file system, and the like. A full disk does not: Kafka
    takes the dir offline then too (until a restart), Samsa answers KAFKA_STORAGE_ERROR until
    space is back and goes on without one."""
    return isinstance(e, OSError) and e.errno is not None and e.errno not in _TRANSIENT


class StorageError(Exception):
    """Base class of everything samsa.storage raises on purpose."""

    kafka_error: str | None = "KAFKA_STORAGE_ERROR"


class OffsetOutOfRange(StorageError):
    """A read asked for an offset below the log start offset or above the log end offset."""

    kafka_error = "OFFSET_OUT_OF_RANGE"


class RecordTooLarge(StorageError):
    """One batch is larger than max.message.bytes."""

    kafka_error = "MESSAGE_TOO_LARGE"


class RecordBatchTooLarge(StorageError):
    """One append is larger than segment.bytes, so it cannot fit in any segment."""

    kafka_error = "RECORD_LIST_TOO_LARGE"


class UnexpectedAppendOffset(StorageError):
    """A follower append does not start at the log end offset, or its offsets go backwards."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class CorruptSegment(StorageError):
    """A segment's bytes do not parse as batches where a read needs them (a damaged length, a
    torn or overwritten region): the read fails rather than skip what it cannot parse."""

    kafka_error = "KAFKA_STORAGE_ERROR"

    def __init__(self, path: object, position: int, why: str) -> None:
        super().__init__(f"{path}: no valid batch at position {position} ({why})")
        self.path = path
        self.position = position


class CorruptIndex(StorageError):
    """An .index/.timeindex file fails its sanity check (the loader rebuilds it)."""

    kafka_error = None


class CorruptCheckpoint(StorageError):
    """A checkpoint file cannot be parsed; the caller decides whether to start from scratch."""

    kafka_error = None


class InconsistentMetadata(StorageError):
    """meta.properties in a log dir disagrees with this broker's broker.id or cluster.id."""

    kafka_error = None
