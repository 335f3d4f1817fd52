"""The transaction coordinator's broker side (stub while the coordinator is being built).

`TransactionManager` is what the rest of the broker uses of the transaction coordinator:

* `verify(...)`: a partition leader asks, before the first transactional append of a
  producer to a partition (KIP-890 part 1), whether the producer's transaction holds that
  partition; with `add=True` (transaction version 2: Produce v12, TxnOffsetCommit v5) the
  coordinator adds it. Answers an ErrorCode.
"""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode


class TransactionManager:
    def __init__(self, broker: object) -> None:
        self.broker = broker

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int,
                     *, add: bool = False) -> ErrorCode:
        """NONE if `topic`-`partition` is (or, with `add`, now is) in the ongoing transaction of
        `transactional_id` at `producer_id`/`producer_epoch`; else the error to answer the
        producer with (INVALID_TXN_STATE, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
        return ErrorCode.NONE
