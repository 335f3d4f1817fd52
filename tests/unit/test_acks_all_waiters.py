"""Produces that wait (handlers/produce.py's DelayedProduce).

acks=all, for the high watermark (replica_manager.Partition's heap of high-watermark waiters): an
append that does not move the high watermark looks at none of them; a move looks at those it
reached, in offset order, and at no other; a role change still answers every one; one that
timed out is not answered twice.

flush.messages, for the log's flush, which the partition's flusher has done in a worker thread
(here by the test): the append does not fsync; the answer waits for `flush_done`; appends made
during a flush are flushed next only when they reach flush.messages themselves, as if each
flush had been inline; a failed flush answers KAFKA_STORAGE_ERROR."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from samsa.handlers.produce import DelayedProduce
from samsa.metadata import zkdata
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch, scan_batches
from samsa.server.purgatory import Purgatory
from samsa.server.replica_manager import Partition
from samsa.storage.config import LogConfig
from samsa.storage.log import Log
from samsa.storage.log_manager import sync_and_close
from tests.unit.manual_scheduler import ManualScheduler


class CountedProduce(DelayedProduce):
    checks = 0
    __slots__ = ()

    def try_complete(self) -> bool:
        CountedProduce.checks += 1
        return super().try_complete()


def leader(tmp_path: Path, sched: ManualScheduler, config: LogConfig | None = None) -> Partition:
    purgatory = Purgatory(sched)
    part = Partition("t", 0, uuid.uuid4(), Log.open(tmp_path / "t-0", config or LogConfig(retention_ms=-1)),
                     node_id=0, purgatory=purgatory)
    part.apply_state(zkdata.PartitionState(leader=0, leader_epoch=1, isr=[0, 1]), [0, 1])
    assert part.is_leader
    return part


def produce(part: Partition, timeout_ms: int = 30_000, acks: int = -1) -> tuple[CountedProduce, dict[str, Any]]:
    """One record appended and its wait, as the Produce handler makes it."""
    buf = bytearray(build_batch([(b"k", b"v", [], 0)]))
    out = part.append(buf, scan_batches(buf), log_append_time=False)
    assert out.error == 0
    entry: dict[str, Any] = {"index": 0, "error_code": 0, "base_offset": out.base_offset}
    required = part.log.log_end_offset if acks == -1 else -1
    op = CountedProduce(timeout_ms, {"responses": [entry]}, [(part, required, entry, 2, out.flush_offset)])
    assert part.purgatory is not None
    if op.try_complete():  # (the handler answers at once)
        op.completed = True
    else:
        op.watch(part.purgatory)
    return op, entry


def fetched(part: Partition, offset: int) -> None:
    part.update_follower(1, offset, live=lambda r: True)


def test_only_the_waiters_the_high_watermark_reached_are_looked_at(tmp_path: Path) -> None:
    part = leader(tmp_path, ManualScheduler())
    ops = [produce(part) for _ in range(200)]
    CountedProduce.checks = 0
    buf = bytearray(build_batch([(b"k", b"v", [], 0)]))
    assert part.append(buf, scan_batches(buf), log_append_time=False).error == 0  # the high watermark stays
    fetched(part, 0)  # a follower fetch that moves nothing
    assert part.hw == 0 and CountedProduce.checks == 0
    fetched(part, 10)
    assert part.hw == 10 and CountedProduce.checks == 10
    assert [op.completed for op, _ in ops] == [True] * 10 + [False] * 190
    assert all(e["error_code"] == 0 for _, e in ops[:10]) and ops[0][0].pending.done
    fetched(part, 201)
    assert all(op.completed for op, _ in ops) and CountedProduce.checks == 200


def test_a_role_change_answers_every_waiter(tmp_path: Path) -> None:
    sched = ManualScheduler()
    part = leader(tmp_path, sched)
    ops = [produce(part) for _ in range(5)]
    part.apply_state(zkdata.PartitionState(leader=1, leader_epoch=2, isr=[0, 1]), [0, 1])
    sched.run_soon()
    assert all(op.completed for op, _ in ops)
    assert {e["error_code"] for _, e in ops} == {int(ErrorCode.NOT_LEADER_OR_FOLLOWER)}


def test_a_waiter_that_timed_out_is_answered_once(tmp_path: Path) -> None:
    sched = ManualScheduler()
    part = leader(tmp_path, sched)
    (late, late_entry), (_, _) = produce(part, timeout_ms=100), produce(part, timeout_ms=60_000)
    sched.advance(0.2)
    assert late.completed and late_entry["error_code"] == ErrorCode.REQUEST_TIMED_OUT
    CountedProduce.checks = 0
    fetched(part, 2)  # reaches both: the one that timed out is skipped
    assert CountedProduce.checks == 1 and late_entry["error_code"] == ErrorCode.REQUEST_TIMED_OUT


def test_waiters_that_ended_otherwise_do_not_pile_up(tmp_path: Path) -> None:
    sched = ManualScheduler()
    part = leader(tmp_path, sched)
    for _ in range(1000):
        produce(part, timeout_ms=1)
        sched.advance(0.01)  # each times out; the high watermark never moves
    assert len(part._hw_waiters) <= 129


class Flusher:
    """The broker's flusher, with the worker thread's part done when the test says."""

    def __init__(self) -> None:
        self.started: list[tuple[Partition, int, list[int]]] = []

    def __call__(self, part: Partition) -> None:
        self.started.append((part, *part.log.flush_fds()))

    def finish(self) -> None:
        part, target, fds = self.started.pop(0)
        sync_and_close(fds, True)
        part.flush_done(part.log, target, None)


def flushing_leader(tmp_path: Path, every: int) -> tuple[Partition, Flusher]:
    part = leader(tmp_path, ManualScheduler(), LogConfig(retention_ms=-1, flush_messages=every))
    part.apply_state(zkdata.PartitionState(leader=0, leader_epoch=2, isr=[0]), [0])  # alone: acks=all = acks=1
    flusher = part.flusher = Flusher()
    return part, flusher


def test_flush_messages_is_flushed_in_the_worker_and_the_answer_waits_for_it(tmp_path: Path) -> None:
    part, flusher = flushing_leader(tmp_path, every=1)
    op, entry = produce(part, acks=1)
    assert part.log.recovery_point == 0, "the append did not fsync on the loop"
    assert len(flusher.started) == 1 and not op.completed
    (op2, _), (op3, _) = produce(part, acks=1), produce(part, acks=-1)
    assert len(flusher.started) == 1, "one flush at a time"
    flusher.finish()  # to offset 1: the first is answered, the next flush starts
    assert part.log.recovery_point == 1 and op.completed and entry["error_code"] == 0
    assert not op2.completed and len(flusher.started) == 1
    flusher.finish()
    assert part.log.recovery_point == 3 and op2.completed and op3.completed
    assert flusher.started == [], "nothing is due: no further flush"


def test_appends_during_a_flush_count_from_where_it_leaves_the_recovery_point(tmp_path: Path) -> None:
    part, flusher = flushing_leader(tmp_path, every=3)
    waits = [produce(part, acks=1)[0] for _ in range(3)]
    assert [w.completed for w in waits] == [True, True, False]  # the third reaches flush.messages
    assert len(flusher.started) == 1
    # offsets 3..6: the third of them (5) is due (6 - 3 = 3), the fourth not (counted from 6)
    during = [produce(part, acks=1)[0] for _ in range(4)]
    assert [w.completed for w in during] == [True, True, False, True]
    flusher.finish()
    assert part.log.recovery_point == 3 and waits[2].completed and not during[2].completed
    assert len(flusher.started) == 1
    flusher.finish()
    assert during[2].completed and part.log.recovery_point == 7 and flusher.started == []


def test_a_failed_flush_answers_a_storage_error(tmp_path: Path) -> None:
    part, flusher = flushing_leader(tmp_path, every=1)
    errors: list[OSError] = []
    part.on_storage_error = lambda d, e: errors.append(e)
    op, entry = produce(part, acks=1)
    part.flush_done(part.log, part.log.log_end_offset, OSError(5, "Input/output error"))
    assert op.completed and entry["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert part.log.recovery_point == 0 and len(errors) == 1
