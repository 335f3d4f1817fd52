"""Transactional offset commits in the shard (samsa/coordinator/txn_offsets.py): pending until
the producer's marker, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable),
committed or dropped by the marker, rebuilt by replay from transactional batches and control
records, and kept by retention, deletion and compaction as Kafka keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.coordinator.base import OutBatch
from samsa.coordinator.records import (
    OffsetCommitKey,
    TxnMarker,
    TxnRecord,
    decode_key,
    decode_offset_commit_value,
)
from samsa.coordinator.shard import ReplayItem
from samsa.protocol.control import decode_control_key
from tests.unit.test_coordinator_harness import DELETE_OFFSETS, FETCH, Harness, request, wire

TXN_COMMIT = 28
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
FENCED_INSTANCE_ID = 82
UNSTABLE_OFFSET_COMMIT = 88
DAY = 24 * 3600 * 1000
P1, P2 = 4000, 4001


class TxnHarness(Harness):
    """The harness plus TxnOffsetCommit, markers, and the partition's log as replay reads it."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.log: list[ReplayItem] = []

    def drain_log(self) -> list[OutBatch]:
        """Append what the shard wrote to `log`, each transactional batch's records as TxnRecords."""
        batches = self.shard.drain_batches()
        for b in batches:
            self.records.extend(b.records)
            if b.producer_id >= 0:
                self.log.extend(TxnRecord(k, v, b.producer_id) for k, v in b.records)
            else:
                self.log.extend(b.records)
        return batches

    def txn_commit(self, group: str, offsets: dict[tuple[str, int], int], *, producer_id: int = P1,
                   epoch: int = 0, version: int = 3, member_id: str = "", generation: int = -1,
                   instance: str | None = None, metadata: str | None = "") -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": 2, "committed_metadata": metadata})
        req = request(TXN_COMMIT, version, transactional_id=f"tx-{producer_id}", group_id=group,
                      producer_id=producer_id, producer_epoch=epoch, generation_id=generation, member_id=member_id,
                      group_instance_id=instance, topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
        resp = wire(TXN_COMMIT, version, self.shard.txn_offset_commit(req, version))
        self.drain_log()
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def marker(self, producer_id: int, commit: bool) -> None:
        """The producer's marker was appended to the partition (what the broker does on it)."""
        self.log.append(TxnMarker(producer_id, commit))
        self.shard.complete_txn(producer_id, commit)
        assert self.shard.drain_batches() == []  # a marker writes nothing

    def plain_commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        assert set(self.commit(group, offsets).values()) == {NONE}
        self.drain_log()

    def stable_fetch(self, group: str, topics: dict[str, list[int]] | None, *, version: int = 8) -> dict[
            tuple[str, int], tuple[int, int]]:
        """(offset, error) per partition of an OffsetFetch with require_stable."""
        tl = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        if version >= 8:
            req = request(FETCH, version, groups=[{"group_id": group, "topics": tl}], require_stable=True)
            resp = wire(FETCH, version, self.shard.offset_fetch(req, version))
            parts = [(t.name, p) for g in resp.groups for t in g.topics for p in t.partitions]
        else:
            req = request(FETCH, version, group_id=group, topics=tl, require_stable=True)
            resp = wire(FETCH, version, self.shard.offset_fetch(req, version))
            parts = [(t.name, p) for t in resp.topics for p in t.partitions]
        return {(name, p.partition_index): (p.committed_offset, p.error_code) for name, p in parts}

    def reloaded(self) -> TxnHarness:
        h = TxnHarness()
        h.clock.t = self.clock.t
        h.shard.replay(self.log)
        h.log = list(self.log)
        return h


def state(h: Harness) -> tuple[dict[str, Any], dict[int, Any]]:
    committed = {gid: dict(g.offsets) for gid, g in sorted(h.shard.groups.items()) if g.offsets}
    pending = {pid: {k: p.value for k, p in entries.items()} for pid, entries in h.shard.pending_txn_offsets.items()}
    return committed, pending


# -- writing and reading ----------------------------------------------------------------------------


def test_pending_offsets_are_invisible_until_commit() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 5})
    assert h.txn_commit("g", {("t", 0): 10, ("t", 1): 20}) == {("t", 0): NONE, ("t", 1): NONE}
    assert h.committed("g") == {("t", 0): 5}  # the pending ones are not shown, the committed one is
    for version in (7, 8, 9):
        assert h.stable_fetch("g", {"t": [0, 1, 2]}, version=version) == {
            ("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 1): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 2): (-1, NONE)}
    # All of the group's offsets: only committed partitions are listed (Kafka's fetchAllOffsets).
    assert h.stable_fetch("g", None) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT)}
    h.marker(P1, commit=True)
    assert h.committed("g") == {("t", 0): 10, ("t", 1): 20}
    assert h.stable_fetch("g", {"t": [0, 1]}) == {("t", 0): (10, NONE), ("t", 1): (20, NONE)}
    assert h.shard.pending_txn_offsets == {} and not h.shard.has_pending_transactions


def test_abort_drops_pending_offsets_and_keeps_the_committed_ones() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 5})
    h.txn_commit("g", {("t", 0): 10, ("t", 1): 20})
    h.marker(P1, commit=False)
    assert h.committed("g") == {("t", 0): 5}
    assert h.stable_fetch("g", {"t": [0, 1]}) == {("t", 0): (5, NONE), ("t", 1): (-1, NONE)}
    h.marker(P1, commit=True)  # a later marker of the producer has nothing left to commit
    assert h.committed("g") == {("t", 0): 5}


def test_records_form_a_transactional_batch_of_the_producer() -> None:
    h = TxnHarness()
    req = request(TXN_COMMIT, 3, transactional_id="tx", group_id="g", producer_id=P1, producer_epoch=7,
                  generation_id=-1, member_id="", group_instance_id=None,
                  topics=[{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                        "committed_leader_epoch": 3, "committed_metadata": "m"}]}])
    h.shard.txn_offset_commit(req, 3)
    (batch,) = h.shard.drain_batches()
    assert (batch.producer_id, batch.producer_epoch) == (P1, 7)
    ((k, v),) = batch.records
    assert decode_key(k) == OffsetCommitKey("g", "t", 0)
    assert v is not None
    got = decode_offset_commit_value(v)
    assert (got.offset, got.leader_epoch, got.metadata, got.commit_timestamp) == (42, 3, "m", h.clock.t)
    assert h.shard.pending_txn_offset(P1, "g", "t", 0) == got


def test_each_producer_keeps_its_own_pending_offsets() -> None:
    h = TxnHarness()
    h.txn_commit("g", {("t", 0): 10}, producer_id=P1)
    h.txn_commit("g", {("t", 1): 21}, producer_id=P2)
    h.marker(P2, commit=True)
    assert h.committed("g") == {("t", 1): 21}
    assert h.stable_fetch("g", {"t": [0]}) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT)}
    h.marker(P1, commit=False)
    assert h.committed("g") == {("t", 1): 21}
    assert not h.shard.has_pending_transactions


def test_the_most_recent_write_wins_when_transactional_and_plain_commits_mix() -> None:
    h = TxnHarness()
    h.txn_commit("g", {("t", 0): 10})
    h.plain_commit("g", {("t", 0): 30})  # written after the transactional one
    h.marker(P1, commit=True)
    assert h.committed("g") == {("t", 0): 30}
    # Two transactions on one partition: the one written last wins, whichever commits first.
    h.txn_commit("g", {("t", 1): 1}, producer_id=P1)
    h.txn_commit("g", {("t", 1): 2}, producer_id=P2)
    h.marker(P2, commit=True)
    h.marker(P1, commit=True)
    assert h.committed("g")[("t", 1)] == 2
    # A transactional commit written after the plain one replaces it.
    h.plain_commit("g", {("t", 2): 7})
    h.txn_commit("g", {("t", 2): 8})
    h.marker(P1, commit=True)
    assert h.committed("g")[("t", 2)] == 8
    assert state(h.reloaded()) == state(h)


# -- validation -------------------------------------------------------------------------------------


def test_validation_table() -> None:
    h = TxnHarness(topic_exists=lambda t, p: t == "t" and p < 4)
    (a, _b), gen = h.stable_group("g", 2)
    h.join("g", "stranger")  # (an unknown member's JoinGroup: the group is left Stable)
    tp = ("t", 0)
    cases = [
        # (group, member, generation, instance, version) -> error
        (("g", a, gen, None, 3), NONE),
        (("g", a, gen + 1, None, 3), ILLEGAL_GENERATION),
        (("g", "stranger", gen, None, 3), UNKNOWN_MEMBER_ID),
        (("g", a, -1, None, 3), ILLEGAL_GENERATION),
        (("g", "", -1, None, 3), NONE),  # no member named: a transactional commit needs none
        (("g", "", -1, None, 0), NONE),  # v0-v2 cannot name one
        (("g", a, gen, "nobody", 3), UNKNOWN_MEMBER_ID),
        (("fresh", "", -1, None, 3), NONE),  # creates a simple, Empty group
        (("ghost", "m", 1, None, 3), ILLEGAL_GENERATION),  # no such group, a generation named
        (("", "", -1, None, 3), INVALID_GROUP_ID),
    ]
    for (group, member, generation, instance, version), error in cases:
        got = h.txn_commit(group, {tp: 7}, member_id=member, generation=generation, instance=instance,
                           version=version)
        assert got == {tp: error}, (group, member, generation, instance, version)
    assert h.shard.group("fresh") is not None and h.shard.group("ghost") is None
    assert h.txn_commit("g", {("t", 9): 1, ("nope", 0): 1, ("t", 1): 1}) == {
        ("t", 9): UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION, ("t", 1): NONE}
    assert h.txn_commit("g", {("t", 2): 1}, metadata="x" * 5000) == {("t", 2): OFFSET_METADATA_TOO_LARGE}
    assert h.shard.pending_txn_offset(P1, "g", "t", 2) is None


def test_static_member_and_rebalance_rules() -> None:
    h = TxnHarness()
    joined = h.join("s", instance="i-1")
    h.settle(joined)
    m, gen = joined.r.member_id, joined.r.generation_id
    assert h.sync("s", m, gen, instance="i-1", assignments={m: b""}).r.error_code == NONE
    assert h.txn_commit("s", {("t", 0): 1}, member_id="other", generation=gen, instance="i-1") == {
        ("t", 0): FENCED_INSTANCE_ID}
    assert h.txn_commit("s", {("t", 0): 1}, member_id=m, generation=gen, instance="i-1") == {("t", 0): NONE}
    # A group completing a rebalance takes transactional commits (Kafka enforces no state for them).
    (a, b), gen2 = h.stable_group("r", 2)
    rejoin = [h.join("r", a), h.join("r", b)]
    h.settle(*rejoin)
    g = h.shard.group("r")
    assert g is not None and g.state.value == "CompletingRebalance"
    gen3 = rejoin[0].r.generation_id
    assert h.commit("r", {("t", 0): 1}, member_id=a, generation=gen3) == {("t", 0): 27}  # REBALANCE_IN_PROGRESS
    assert h.txn_commit("r", {("t", 0): 1}, member_id=a, generation=gen3) == {("t", 0): NONE}
    assert gen3 == gen2 + 1


def test_an_unloaded_or_wrong_shard_refuses() -> None:
    h = TxnHarness(offsets_topic_num_partitions=50)
    from samsa.coordinator.records import partition_for
    elsewhere = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 50) != 0)
    assert h.txn_commit(elsewhere, {("t", 0): 1}) == {("t", 0): NOT_COORDINATOR}
    here = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 50) == 0)
    h.txn_commit(here, {("t", 0): 1})
    h.shard.unload()
    assert not h.shard.has_pending_transactions
    assert h.txn_commit(here, {("t", 0): 1}) == {("t", 0): COORDINATOR_NOT_AVAILABLE}


# -- replay -----------------------------------------------------------------------------------------


def test_replay_resolves_pending_offsets_by_their_markers() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 1, ("t", 1): 1})
    h.txn_commit("g", {("t", 0): 10}, producer_id=P1)
    h.txn_commit("g", {("t", 1): 11}, producer_id=P2)
    h.txn_commit("h", {("u", 0): 3}, producer_id=P1)
    h.marker(P1, commit=True)
    h.marker(P2, commit=False)
    h.txn_commit("g", {("t", 2): 12}, producer_id=P2)  # still open at the end of the log
    h2 = h.reloaded()
    assert state(h2) == state(h)
    assert h2.committed("g") == {("t", 0): 10, ("t", 1): 1}
    assert h2.committed("h") == {("u", 0): 3}
    assert h2.stable_fetch("g", {"t": [2]}) == {("t", 2): (-1, UNSTABLE_OFFSET_COMMIT)}
    h2.marker(P2, commit=True)  # the open transaction's marker, after the load
    assert h2.committed("g")[("t", 2)] == 12
    # A group known only by an open transaction's offsets comes back (a simple group).
    h3 = TxnHarness()
    h3.txn_commit("only-pending", {("t", 0): 5})
    h4 = h3.reloaded()
    assert h4.shard.group("only-pending") is not None
    assert h4.stable_fetch("only-pending", {"t": [0]}) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT)}


def test_replay_keeps_the_most_recent_write() -> None:
    h = TxnHarness()
    h.txn_commit("g", {("t", 0): 10})
    h.plain_commit("g", {("t", 0): 30})
    h.marker(P1, commit=True)
    h2 = h.reloaded()
    assert h2.committed("g") == {("t", 0): 30}
    assert state(h2) == state(h)


def test_replay_ignores_other_control_records_and_markers_of_unknown_producers() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 1})
    h.log.append(TxnMarker(999, True))
    h2 = h.reloaded()
    assert h2.committed("g") == {("t", 0): 1}
    assert decode_control_key(b"\x00\x00\x00\x01") is True
    assert decode_control_key(b"\x00\x00\x00\x00") is False
    assert decode_control_key(b"\x00\x00\x00\x02") is None  # LEADER_CHANGE: no transaction marker
    assert decode_control_key(b"\x00") is None


# -- deletion, retention, compaction ------------------------------------------------------------------


def test_offset_delete_drops_pending_offsets_with_a_tombstone() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 1): 1})
    h.txn_commit("g", {("t", 0): 10, ("t", 1): 11})
    req = request(DELETE_OFFSETS, 0, group_id="g", topics=[{"name": "t", "partitions": [
        {"partition_index": 0}, {"partition_index": 1}]}])
    resp = wire(DELETE_OFFSETS, 0, h.shard.offset_delete(req, 0))
    assert resp.error_code == NONE
    tombstones = {decode_key(k) for b in h.drain_log() for k, v in b.records if v is None}
    assert tombstones == {OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 1)}
    assert h.stable_fetch("g", {"t": [0, 1]}) == {("t", 0): (-1, NONE), ("t", 1): (-1, NONE)}
    h.marker(P1, commit=True)  # nothing is left to commit
    assert h.committed("g") == {}
    assert state(h.reloaded()) == state(h)


def test_delete_group_deletes_pending_offsets_too() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 1})
    h.txn_commit("g", {("t", 0): 10, ("t", 5): 50})
    assert h.shard.delete_group("g") == NONE
    tombstones = {decode_key(k) for b in h.drain_log() for k, v in b.records if v is None}
    assert tombstones == {OffsetCommitKey("g", "t", 0), OffsetCommitKey("g", "t", 5)}
    assert h.shard.group("g") is None and not h.shard.has_pending_transactions
    h.marker(P1, commit=True)
    assert h.committed("g") == {}
    assert state(h.reloaded()) == state(h)


def test_retention_keeps_offsets_and_groups_of_open_transactions() -> None:
    h = TxnHarness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60_000)
    h.plain_commit("g", {("t", 0): 1, ("t", 1): 1})
    h.txn_commit("g", {("t", 0): 10})
    h.txn_commit("only", {("t", 0): 10}, producer_id=P2)
    h.advance(DAY + 60_000)
    h.drain_log()
    assert h.committed("g") == {("t", 0): 1}  # t-1 expired; t-0 is held by the open transaction
    assert h.shard.group("only") is not None  # no offsets, but an open transaction
    h.marker(P1, commit=True)
    h.marker(P2, commit=False)
    assert h.committed("g") == {("t", 0): 10}
    h.advance(60_000)
    assert h.shard.group("only") is None  # empty, no offsets, no transaction: deleted


def test_no_compaction_view_while_offsets_are_pending() -> None:
    h = TxnHarness()
    h.plain_commit("g", {("t", 0): 1})
    h.txn_commit("g", {("t", 0): 10})
    with pytest.raises(RuntimeError):
        h.shard.compact_view()
    h.marker(P1, commit=True)
    compacted = TxnHarness()
    compacted.shard.replay(h.shard.compact_view())
    assert compacted.committed("g") == {("t", 0): 10}


def test_a_batch_that_was_not_appended_is_reverted() -> None:
    h = TxnHarness()
    h.txn_commit("g", {("t", 0): 10})
    req = request(TXN_COMMIT, 3, transactional_id="tx", group_id="g", producer_id=P1, producer_epoch=0,
                  generation_id=-1, member_id="", group_instance_id=None,
                  topics=[{"name": "t", "partitions": [
                      {"partition_index": 0, "committed_offset": 20, "committed_metadata": ""},
                      {"partition_index": 1, "committed_offset": 21, "committed_metadata": ""}]}])
    h.shard.txn_offset_commit(req, 3)
    (batch,) = h.shard.drain_batches()
    h.shard.revert_txn_batch(batch)  # the append failed: back to the first commit's pending offset
    assert h.shard.pending_txn_offset(P1, "g", "t", 0).offset == 10  # type: ignore[union-attr]
    assert h.shard.pending_txn_offset(P1, "g", "t", 1) is None
    h.marker(P1, commit=True)
    assert h.committed("g") == {("t", 0): 10}
    h.txn_commit("x", {("t", 0): 1}, producer_id=P2)
    h.shard.txn_offset_commit(request(TXN_COMMIT, 3, transactional_id="tx", group_id="y", producer_id=P2,
                                      producer_epoch=0, generation_id=-1, member_id="", group_instance_id=None,
                                      topics=[{"name": "t", "partitions": [
                                          {"partition_index": 0, "committed_offset": 2,
                                           "committed_metadata": ""}]}]), 3)
    (batch,) = h.shard.drain_batches()
    h.shard.revert_txn_batch(batch)
    assert not h.shard.has_pending_txn_offset("y", "t", 0) and h.shard.has_pending_txn_offset("x", "t", 0)
