"""The transaction coordinator's state machine and its `__transaction_state` records, as pure
functions (coordinator/transactions.py, coordinator/txn_records.py)."""

from __future__ import annotations

import pytest

from samsa.coordinator import transactions as tx
from samsa.coordinator.transactions import TxnMetadata, TxnShard, TxnState
from samsa.coordinator.txn_records import (
    TxnLogValue,
    TxnRecordDecodeError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from samsa.protocol.errors import ErrorCode

T0 = 1_700_000_000_000


def ongoing(tid: str = "t", epoch: int = 3, tv: int = 0) -> TxnMetadata:
    meta = tx.new_transactional_id(tid, 42, 60000, T0)
    meta = meta.copy(producer_epoch=epoch, client_tv=tv)
    got = tx.add_partitions(meta, 42, epoch, [("a", 0), ("b", 1)], T0 + 1)
    assert isinstance(got, TxnMetadata)
    return got


@pytest.mark.parametrize("tv", [0, 2])
def test_value_round_trip_in_both_versions(tv: int) -> None:
    v = TxnLogValue(42, 7, 60000, int(TxnState.ONGOING), {"a": [0, 2], "b": [1]}, T0, T0 - 5, 40 if tv else -1,
                    43 if tv else -1, tv)
    raw = encode_value(v)
    assert raw[:2] == (b"\x00\x01" if tv >= 2 else b"\x00\x00")
    assert decode_value(raw) == v
    assert decode_key(encode_key("tx-é")) == "tx-é"


def test_undecodable_records_raise_one_error_type() -> None:
    for raw in (b"", b"\x00\x09", b"\x00\x00\x00", encode_value(TxnLogValue(1, 0, 1, 0, {}, 0, 0))[:-3]):
        with pytest.raises(TxnRecordDecodeError):
            decode_value(raw)
    with pytest.raises(TxnRecordDecodeError):
        decode_key(b"\x00\x01\x00\x01a")


def test_replay_keeps_the_last_value_and_drops_tombstones() -> None:
    shard = TxnShard(0, 5)
    a = ongoing("a")
    b = tx.new_transactional_id("b", 7, 1000, T0)
    shard.replay([(encode_key("a"), encode_value(tx.new_transactional_id("a", 42, 60000, T0).to_value())),
                  (encode_key("a"), encode_value(a.to_value())), (encode_key("b"), encode_value(b.to_value())),
                  (encode_key("b"), None), (b"\x00\x07junk", b"??")])
    assert set(shard.txns) == {"a"}
    assert shard.txns["a"].state == TxnState.ONGOING and shard.txns["a"].partitions == {("a", 0), ("b", 1)}
    assert shard.skipped_records == 1


def test_init_bumps_the_epoch_and_fences_an_open_transaction() -> None:
    meta = tx.new_transactional_id("t", 42, 60000, T0)
    bumped = tx.init_producer_id(meta, 30000, None, T0 + 1, None)
    assert isinstance(bumped, TxnMetadata)
    assert (bumped.producer_id, bumped.producer_epoch, bumped.timeout_ms, bumped.state) == (42, 1, 30000,
                                                                                           TxnState.EMPTY)
    fenced = tx.init_producer_id(ongoing(), 60000, None, T0 + 2, None)
    assert isinstance(fenced, TxnMetadata) and fenced.state == TxnState.PREPARE_EPOCH_FENCE
    assert fenced.producer_epoch == 4
    # the fence becomes an abort at the bumped epoch, which is not bumped again
    aborting = tx.end_txn(fenced, 42, 4, False, T0 + 3, from_client=False)
    assert isinstance(aborting, TxnMetadata)
    assert (aborting.state, aborting.producer_epoch) == (TxnState.PREPARE_ABORT, 4)
    assert tx.init_producer_id(aborting, 60000, None, T0, None) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_with_an_exhausted_epoch_rotates_the_producer_id() -> None:
    meta = tx.new_transactional_id("t", 42, 60000, T0).copy(producer_epoch=tx.MAX_EPOCH - 1)
    assert tx.needs_new_producer_id(meta)
    rotated = tx.init_producer_id(meta, 60000, None, T0, 99)
    assert isinstance(rotated, TxnMetadata) and (rotated.producer_id, rotated.producer_epoch) == (99, 0)


def test_kip360_expected_producer() -> None:
    meta = tx.new_transactional_id("t", 42, 60000, T0).copy(producer_epoch=5, last_producer_epoch=4)
    assert tx.init_producer_id(meta, 60000, (41, 5), T0, None) == ErrorCode.PRODUCER_FENCED
    again = tx.init_producer_id(meta, 60000, (42, 4), T0, None)  # a retry: the bump already happened
    assert isinstance(again, TxnMetadata) and again.producer_epoch == 5
    assert tx.init_producer_id(meta, 60000, (42, 2), T0, None) == ErrorCode.PRODUCER_FENCED
    bumped = tx.init_producer_id(meta, 60000, (42, 5), T0, None)
    assert isinstance(bumped, TxnMetadata) and bumped.producer_epoch == 6


def test_add_and_verify_partitions() -> None:
    meta = ongoing()
    assert tx.add_partitions(meta, 42, 3, [("a", 0)], T0) == ErrorCode.NONE  # already in it
    assert tx.add_partitions(meta, 42, 2, [("a", 0)], T0) == ErrorCode.PRODUCER_FENCED
    assert tx.add_partitions(meta, 41, 3, [("a", 0)], T0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert tx.add_partitions(None, 41, 3, [("a", 0)], T0) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert tx.verify_partitions(meta, 42, 3, [("a", 0), ("c", 0)]) == {("a", 0): ErrorCode.NONE,
                                                                       ("c", 0): ErrorCode.TRANSACTION_ABORTABLE}
    assert tx.verify_partitions(meta, 42, 4, [("a", 0)]) == {("a", 0): ErrorCode.PRODUCER_FENCED}


def test_end_txn_version_1() -> None:
    meta = ongoing()
    prep = tx.end_txn(meta, 42, 3, True, T0 + 5)
    assert isinstance(prep, TxnMetadata)
    assert (prep.state, prep.producer_epoch, prep.partitions) == (TxnState.PREPARE_COMMIT, 3, meta.partitions)
    assert tx.end_txn(prep, 42, 3, True, T0) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert tx.end_txn(prep, 42, 3, False, T0) == ErrorCode.INVALID_TXN_STATE
    done = tx.complete(prep, T0 + 6)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_COMMIT, set())
    assert tx.end_txn(done, 42, 3, True, T0) == (ErrorCode.NONE, 42, 3)  # a retry
    assert tx.end_txn(done, 42, 3, False, T0) == ErrorCode.INVALID_TXN_STATE
    assert tx.end_txn(done, 42, 2, True, T0) == ErrorCode.PRODUCER_FENCED


def test_end_txn_version_2_bumps_the_epoch_and_knows_its_retry() -> None:
    meta = ongoing(tv=2)
    prep = tx.end_txn(meta, 42, 3, False, T0 + 5, client_tv=2)
    assert isinstance(prep, TxnMetadata)
    assert (prep.state, prep.producer_epoch, prep.last_producer_epoch) == (TxnState.PREPARE_ABORT, 4, 3)
    assert tx.marker_epoch(prep) == 4
    done = tx.complete(prep, T0 + 6)
    assert tx.end_txn(done, 42, 3, False, T0, client_tv=2) == (ErrorCode.NONE, 42, 4)  # the retry, with the new epoch
    assert tx.end_txn(done, 42, 3, True, T0, client_tv=2) == ErrorCode.INVALID_TXN_STATE
    assert tx.end_txn(done, 42, 5, False, T0, client_tv=2) == ErrorCode.PRODUCER_FENCED
    assert tx.end_txn(done, 42, 3, False, T0, client_tv=1) == ErrorCode.PRODUCER_FENCED  # (v4: the epoch must be 4)


@pytest.mark.parametrize("state", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT])
def test_end_txn_version_2_aborts_a_transaction_that_never_began(state: TxnState) -> None:
    """With transaction version 2 a client that cannot tell whether a Produce began its
    transaction may abort with the current epoch when none is open: no partitions, the epoch
    bumped as at any end, its retry recognised. A commit there is INVALID_TXN_STATE, and a
    version 1 EndTxn keeps Kafka's older answers."""
    meta = tx.new_transactional_id("t", 42, 60000, T0).copy(producer_epoch=3, state=state, last_producer_epoch=2)
    prep = tx.end_txn(meta, 42, 3, False, T0 + 5, client_tv=2)
    assert isinstance(prep, TxnMetadata)
    assert (prep.state, prep.partitions, prep.producer_epoch, prep.last_producer_epoch, prep.start_ms) == (
        TxnState.PREPARE_ABORT, set(), 4, 3, T0 + 5)
    done = tx.complete(prep, T0 + 6)
    assert done.state == TxnState.COMPLETE_ABORT
    assert tx.end_txn(done, 42, 3, False, T0, client_tv=2) == (ErrorCode.NONE, 42, 4)
    assert tx.end_txn(meta, 42, 3, True, T0, client_tv=2) == ErrorCode.INVALID_TXN_STATE
    assert tx.end_txn(meta, 42, 4, False, T0, client_tv=2) == ErrorCode.PRODUCER_FENCED
    v1 = tx.end_txn(meta, 42, 3, False, T0, client_tv=1)
    assert v1 == ((ErrorCode.NONE, 42, 3) if state == TxnState.COMPLETE_ABORT else ErrorCode.INVALID_TXN_STATE)


def test_end_txn_version_2_rotates_an_exhausted_producer_id() -> None:
    meta = ongoing(epoch=tx.MAX_EPOCH - 1, tv=2)
    assert tx.end_txn(meta, 42, tx.MAX_EPOCH - 1, True, T0, client_tv=2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    prep = tx.end_txn(meta, 42, tx.MAX_EPOCH - 1, True, T0, client_tv=2, new_producer_id=77)
    assert isinstance(prep, TxnMetadata) and prep.next_producer_id == 77
    done = tx.complete(prep, T0)
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (77, 0, 42)


def test_timeout_abort_fences_and_expiry_applies_to_idle_ids_only() -> None:
    meta = ongoing()
    assert not tx.timed_out(meta, T0 + 60000)
    assert tx.timed_out(meta, T0 + 60002)
    aborting = tx.abort_for_timeout(meta, T0 + 60002)
    assert (aborting.state, aborting.producer_epoch) == (TxnState.PREPARE_ABORT, 4)
    assert not tx.expired(meta, T0 + 10**10, 1000)  # an open transaction is never expired
    idle = tx.complete(aborting, T0)
    assert tx.expired(idle, T0 + 1001, 1000) and not tx.expired(idle, T0 + 999, 1000)
