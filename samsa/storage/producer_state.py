"""Producer state: idempotent-producer bookkeeping for one partition, from batch headers only.

Kafka's ProducerStateManager unit. On disk: nothing. Kafka writes `<offset>.snapshot` files
beside the segments; Samsa rebuilds the state after a restart or a truncation from the batch
headers of the log's tail (`Partition.load_producer_state`), which is enough for the window
below: a producer only ever retries its last five batches.

For each producer id the partition remembers its epoch and the last few batches it appended
(first sequence, last sequence, first offset, last offset), with Kafka's five-batch window.
A new batch from that producer is:

* a duplicate of a remembered batch (same sequence range): answered with the original offsets,
  not appended again -- this is what makes a retried produce safe;
* the next in sequence (first sequence = last sequence + 1, wrapping at 2**31): appended;
* anything else: OUT_OF_ORDER_SEQUENCE_NUMBER;
* from an older epoch: INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0.

`check` is a pure decision; `record` is called once the batch is in the log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from samsa.protocol.batch import BatchHeader
from samsa.protocol.errors import ErrorCode

WINDOW = 5
INT32_WRAP = 1 << 31


@dataclass
class _BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=WINDOW))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class Duplicate(Exception):
    def __init__(self, first_offset: int, last_offset: int) -> None:
        super().__init__("duplicate batch")
        self.first_offset = first_offset
        self.last_offset = last_offset


class SequenceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, h: BatchHeader) -> None:
        """Raise Duplicate or SequenceError if the batch must not be appended."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            if h.base_sequence != 0:
                raise SequenceError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {h.producer_id} is new here but starts at sequence {h.base_sequence}",
                )
            return
        if h.producer_epoch < entry.epoch:
            raise SequenceError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}",
            )
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise SequenceError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {h.producer_epoch} must start at sequence 0, not {h.base_sequence}",
                )
            return
        last_seq = h.last_sequence
        for b in entry.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                raise Duplicate(b.first_offset, b.last_offset)
        expected = (entry.last_seq + 1) % INT32_WRAP
        if h.base_sequence != expected:
            raise SequenceError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {h.producer_id} sent sequence {h.base_sequence}, expected {expected}",
            )

    def ongoing_txn(self, producer_id: int) -> tuple[int, int] | None:
        """(epoch, first offset) of the producer's open transaction here (none tracked yet)."""
        return None

    def record(self, h: BatchHeader, first_offset: int) -> None:
        """Remember a batch that was appended at `first_offset`."""
        if h.producer_id < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = ProducerEntry(h.producer_epoch)
            self.producers[h.producer_id] = entry
        if h.base_sequence >= 0:
            entry.batches.append(
                _BatchMeta(h.base_sequence, h.last_sequence, first_offset, first_offset + h.last_offset_delta)
            )
