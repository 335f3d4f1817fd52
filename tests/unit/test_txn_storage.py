"""Transactions in storage: producer state (open transactions, markers, the first unstable
offset, snapshots), the transaction index, and the Log around them (snapshots at roll and
close, rebuild on open, truncation, retention never past an open transaction)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.protocol.batch import parse_header
from samsa.protocol.control import marker_batch, parse_marker
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from samsa.storage import Log, LogConfig
from samsa.storage.producer_state import CorruptSnapshot, Duplicate, ProducerStateManager, SequenceError
from samsa.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

NOW_MS = 1_700_000_000_000


def _clock() -> float:
    return NOW_MS / 1000


def header(pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = True, base: int = 0):  # type: ignore[no-untyped-def]
    raw = build_batch([(None, b"v", [], NOW_MS)] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      transactional=txn, base_offset=base)
    return parse_header(raw)


# ----------------------------------------------------------------------------- control records


def test_marker_round_trip_in_kafka_layout() -> None:
    raw = marker_batch(7, 3, True, 11, NOW_MS)
    h = parse_header(raw)
    assert h.is_control and h.is_transactional and (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, -1)
    assert parse_marker(raw) == (True, 11)
    assert parse_marker(marker_batch(7, 3, False, 0, NOW_MS)) == (False, 0)
    # key: version 0, type 1 (COMMIT); value: version 0, coordinator epoch 11 -- Kafka's bytes
    assert b"\x00\x00\x00\x01" in raw and b"\x00\x00\x00\x00\x00\x0b" in raw


# ----------------------------------------------------------------------------- producer state


def test_transactions_open_complete_and_hold_the_first_unstable_offset() -> None:
    s = ProducerStateManager()
    s.record(header(1, 0, 0, 3), 10)  # opens at 10
    s.record(header(2, 0, 0), 13)  # opens at 13
    s.record(header(1, 0, 3), 14)  # same transaction
    assert s.first_unstable_offset() == 10 and s.ongoing_txn(1) == (0, 10) and s.ongoing_txn(2) == (0, 13)
    done = s.complete_txn(1, 0, False, 15, 0)
    assert done == (1, 10, 15, True, 13)  # the LSO after it: transaction 2's first offset
    assert s.ongoing_txn(1) is None
    assert s.first_unstable_offset() == 10  # its marker is not replicated yet
    s.on_high_watermark(15)
    assert s.first_unstable_offset() == 10
    s.on_high_watermark(16)
    assert s.first_unstable_offset() == 13
    done = s.complete_txn(2, 0, True, 16, 0)
    assert done is not None and not done.aborted and done.last_stable_offset == 17
    s.on_high_watermark(17)
    assert s.first_unstable_offset() is None and not s.has_unstable
    assert s.complete_txn(2, 0, True, 17, 0) is None  # a retried marker: nothing to end


@pytest.mark.parametrize(("epoch", "coordinator_epoch", "code"), [
    (4, 2, ErrorCode.INVALID_PRODUCER_EPOCH),
    (5, 1, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (5, 2, None),
    (6, 3, None),
])
def test_marker_checks(epoch: int, coordinator_epoch: int, code: ErrorCode | None) -> None:
    s = ProducerStateManager()
    s.record(header(1, 5, 0), 0)
    s.complete_txn(1, 5, True, 1, 2)
    if code is None:
        s.check_marker(1, epoch, coordinator_epoch)
    else:
        with pytest.raises(SequenceError) as e:
            s.check_marker(1, epoch, coordinator_epoch)
        assert e.value.code == code


def test_a_marker_with_a_newer_epoch_fences_the_old_one_and_restarts_sequences() -> None:
    s = ProducerStateManager()
    s.record(header(1, 0, 0, 5), 0)
    s.complete_txn(1, 1, False, 5, 0)
    with pytest.raises(SequenceError) as e:
        s.check(header(1, 0, 5))
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    s.check(header(1, 1, 0))  # the new epoch from sequence 0
    with pytest.raises(SequenceError):
        s.check(header(1, 1, 5))


def test_a_plain_batch_during_a_transaction_is_invalid_txn_state() -> None:
    s = ProducerStateManager()
    s.record(header(1, 0, 0), 0)
    with pytest.raises(SequenceError) as e:
        s.check(header(1, 0, 1, txn=False))
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    s.check(header(1, 0, 1))


def test_sequence_checks_in_kafkas_order() -> None:
    """A producer the partition has no state for may start at any sequence; a retried batch is
    a duplicate before anything else is checked; a gap is OUT_OF_ORDER before a plain batch in a
    transaction is INVALID_TXN_STATE."""
    s = ProducerStateManager()
    s.check(header(9, 0, 5, txn=False))  # (unknown here: accepted, as Kafka since KIP-360)
    s.record(header(1, 0, 0, 2), 0)  # a transaction opens at 0, sequences 0-1
    with pytest.raises(Duplicate):
        s.check(header(1, 0, 0, 2, txn=False))
    with pytest.raises(SequenceError) as gap:
        s.check(header(1, 0, 5, txn=False))
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    with pytest.raises(SequenceError) as plain:
        s.check(header(1, 0, 2, txn=False))
    assert plain.value.code == ErrorCode.INVALID_TXN_STATE


def test_a_verification_holds_until_a_marker_of_its_producer() -> None:
    """KIP-890's VerificationGuard: the coordinator's answer counts only if no marker of the
    producer ended its transaction here while the question was out."""
    s = ProducerStateManager()
    g = s.start_verification(1)
    assert s.start_verification(1) is g  # pipelined requests of the producer share it
    assert s.verified(1, 0, g)
    s.complete_txn(1, 0, True, 5, 0)  # the transaction ended meanwhile (no data here)
    assert not s.verified(1, 0, g)  # the late yes is refused: it would open a transaction nobody ends
    g2 = s.start_verification(1)
    assert g2 is not g and s.verified(1, 0, g2)
    s.record(header(1, 0, 0), 6)  # the first batch opens the transaction...
    assert s.verified(1, 0, g2)  # ...so a pipelined second batch at that epoch needs no guard
    assert not s.verified(1, 1, g2)  # (at another epoch it does, and that one is gone)
    s.complete_txn(1, 0, False, 7, 0)
    assert not s.verified(1, 0, g2)
    g3 = s.start_verification(2)
    s.end_verification(2, g3)  # the coordinator said no
    assert not s.verified(2, 0, g3)
    g4 = s.start_verification(2)
    assert g4 is not g3
    s.end_verification(2, g3)  # (a stale guard does not forget the newer one)
    assert s.start_verification(2) is g4


def test_snapshot_round_trip_and_corruption() -> None:
    s = ProducerStateManager()
    s.record(header(1, 2, 0, 4), 100)
    s.record(header(9, 0, 0, 2, txn=False), 104)
    s.complete_txn(9, 0, True, 106, 4)
    s.record(header(5, 1, 0), 107)
    data = s.to_snapshot()
    assert len(data) == 10 + 3 * 46 and data[:2] == b"\x00\x01"
    t = ProducerStateManager.from_snapshot(data)
    assert t.first_unstable_offset() == 100 and t.ongoing_txn(1) == (2, 100) and t.ongoing_txn(5) == (1, 107)
    e = t.producers[9]
    assert (e.epoch, e.coordinator_epoch, e.last_seq, e.last_offset) == (0, 4, 1, 105)
    with pytest.raises(Exception) as dup:
        t.check(header(1, 2, 0, 4))
    assert type(dup.value).__name__ == "Duplicate"
    t.check(header(1, 2, 4))  # the next in sequence
    bad = bytearray(data)
    bad[-1] ^= 1
    for broken in (bytes(bad), data[:-3], b"\x00\x02" + data[2:], b""):
        with pytest.raises(CorruptSnapshot):
            ProducerStateManager.from_snapshot(broken)


# ----------------------------------------------------------------------------- transaction index


def test_txn_index_collects_kafkas_overlap_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(path, exists=False)
    assert not path.exists()  # created at the first abort only
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 3, 9, 20))
    idx.append(AbortedTxn(2, 3, 9, 20))  # a replay: ignored
    assert path.stat().st_size == 2 * ENTRY_SIZE
    out: list[AbortedTxn] = []
    assert not idx.collect(6, 30, out) and [t.producer_id for t in out] == [2]  # may go on in later segments
    out = []
    assert idx.collect(6, 8, out) and [t.producer_id for t in out] == [2]  # LSO 20 >= 8: complete
    out = []
    assert idx.collect(0, 4, out) and [t.producer_id for t in out] == [1]  # LSO 6 >= 4: complete
    idx.close()
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn entry
    again = TransactionIndex(path, exists=True)
    assert again.entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 20)]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    again.truncate_to(9)
    assert again.entries == [AbortedTxn(1, 0, 5, 6)] and path.stat().st_size == ENTRY_SIZE
    again.close()


# ----------------------------------------------------------------------------- the Log


def _append(lg: Log, raw: bytes) -> int:
    buf = bytearray(raw)
    return lg.append(buf, [(0, parse_header(buf))], now_ms=NOW_MS).first_offset


def _txn(lg: Log, pid: int, seq: int, *, txn: bool = True) -> int:
    first = _append(lg, build_batch([(None, b"x" * 200, [], NOW_MS)], producer_id=pid, producer_epoch=0,
                                    base_sequence=seq, transactional=txn))
    lg.producers.record(parse_header(build_batch([(None, b"x", [], NOW_MS)], producer_id=pid, producer_epoch=0,
                                                 base_sequence=seq, transactional=txn)), first)
    return first


def _marker(lg: Log, pid: int, commit: bool) -> int:
    offset = _append(lg, marker_batch(pid, 0, commit, 0, NOW_MS))
    done = lg.producers.complete_txn(pid, 0, commit, offset, 0)
    if done is not None and done.aborted:
        lg.add_aborted_txn(AbortedTxn(*done[:3], done.last_stable_offset))
    return offset


def test_log_rebuilds_open_transactions_and_aborts_from_snapshots(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, index_interval_bytes=64)
    lg = Log.open(tmp_path / "t-0", cfg, clock=_clock)
    _txn(lg, 1, 0)  # 0: aborted
    _txn(lg, 2, 0)  # 1: stays open
    assert _marker(lg, 1, False) == 2
    for i in range(20):
        _txn(lg, 3, i, txn=False)
    assert lg.segment_count > 5
    assert lg.collect_aborted_transactions(0, 23) == [(1, 0)]
    assert lg.collect_aborted_transactions(3, 23) == []
    assert len(list(lg.dir.glob("*.snapshot"))) == lg.segment_count - 1
    lg.flush()
    # As after kill -9: no close (so no snapshot at the end); the replay covers the active segment.
    reopened = Log.open(tmp_path / "t-0", cfg, clock=_clock)
    assert reopened.load_producer_state() < 5
    assert reopened.producers.ongoing_txn(2) == (0, 1) and reopened.producers.first_unstable_offset() is not None
    assert reopened.collect_aborted_transactions(0, 23) == [(1, 0)]
    reopened.close()
    lg.close()


def test_an_abort_missing_from_the_txnindex_is_indexed_again_by_the_replay(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), clock=_clock)
    _txn(lg, 1, 0)
    _marker(lg, 1, False)
    lg.flush()
    os.unlink(lg.segments[0].txn_index.path)  # the marker reached the disk, its index entry did not
    reopened = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), clock=_clock)
    assert reopened.collect_aborted_transactions(0, 10) == []
    reopened.load_producer_state()
    assert reopened.collect_aborted_transactions(0, 10) == [(1, 0)]
    reopened.close()
    lg.close()


def test_truncation_below_a_marker_reopens_the_transaction(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), clock=_clock)
    _txn(lg, 1, 0)
    _marker(lg, 1, False)
    assert lg.collect_aborted_transactions(0, 10) == [(1, 0)]
    lg.truncate_to(1)
    lg.load_producer_state()
    assert lg.collect_aborted_transactions(0, 10) == []
    assert lg.producers.ongoing_txn(1) == (0, 0)
    lg.close()


def test_retention_never_deletes_an_open_transaction(tmp_path: Path) -> None:
    now = [NOW_MS]
    cfg = LogConfig(segment_bytes=1024, retention_ms=1000, index_interval_bytes=64)
    lg = Log.open(tmp_path / "t-0", cfg, clock=lambda: now[0] / 1000)
    for i in range(5):
        _txn(lg, 3, i, txn=False)
    first = _txn(lg, 1, 0)
    for i in range(5, 20):
        _txn(lg, 3, i, txn=False)
    now[0] += 10_000_000  # everything expired
    lg.delete_old_segments(now[0])
    assert 0 < lg.log_start_offset <= first  # retention ran, and stopped at the transaction
    _marker(lg, 1, True)
    lg.producers.on_high_watermark(lg.log_end_offset)
    lg.delete_old_segments(now[0])
    assert lg.log_start_offset > first
    lg.close()
