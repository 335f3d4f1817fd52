"""Transactional offset commits (TxnOffsetCommit, KIP-98/KIP-447): offsets pending until the marker.

A transactional producer commits the offsets it consumed as part of its transaction. Kafka's
new group coordinator (OffsetMetadataManager) is the model:

* `txn_offset_commit` validates like OffsetCommit -- with Kafka's transactional rules: a group
  that does not exist is created (a "simple", Empty group) when the generation is -1, else
  ILLEGAL_GENERATION; a member id, instance id or generation given must be current
  (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION; a KIP-848 group's member epoch
  likewise, STALE_MEMBER_EPOCH answered as ILLEGAL_GENERATION); without them a non-empty group
  still takes the commit (v0-v2 carry no member), and the group's state is not enforced (no
  REBALANCE_IN_PROGRESS). Accepted offsets become *pending* offsets of the producer and
  OffsetCommit records in a transactional batch of that producer (`_emit_txn`).
* A pending offset is invisible: OffsetFetch answers the committed offset, if any; with
  `require_stable` the partition answers UNSTABLE_OFFSET_COMMIT instead.
* `complete_txn(producer_id, commit)` -- the producer's transaction marker reached the
  partition (live: the broker calls it after appending the marker; replay: the control record)
  -- moves the producer's pending offsets to the committed ones (COMMIT) or drops them (ABORT).
  A pending offset replaces the committed one only if it was written after it: with a mix of
  transactional and plain commits the most recent write wins, as in Kafka (which compares the
  records' log offsets; the shard counts its offset writes, `order`, which is the same order).
* A plain tombstone of an offset (OffsetDelete, DeleteGroups) also drops the pending offsets of
  that partition; retention keeps an offset while a transaction holds a pending one for it, and
  a group with open transactions is never deleted as empty.

State: `pending_txn_offsets[producer_id][(group, topic, partition)]` and, per group, the
producers with pending offsets in it (`_open_txns`). Replay (shard.py) rebuilds both from the
log: records of a transactional batch stay pending until their producer's control record.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

from .base import OffsetKey, OutBatch, PendingOffset, Record, ShardBase
from .group import DEAD, EMPTY, Group
from .records import OffsetCommitValue, offset_commit_key, offset_commit_value

E = ErrorCode


def java_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


class TxnOffsetsMixin(ShardBase):
    pending_txn_offsets: dict[int, dict[OffsetKey, PendingOffset]]
    _open_txns: dict[str, set[int]]
    _offset_order: dict[OffsetKey, int]
    _order: int

    def _reset_txn_offsets(self) -> None:
        self.pending_txn_offsets = {}  # producer id -> its pending offsets
        self._open_txns = {}  # group -> producer ids with pending offsets in it
        self._offset_order = {}  # the `order` of each committed offset's write
        self._order = 0  # offset writes so far (replayed or live)

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    # -- TxnOffsetCommit ----------------------------------------------------------------------

    def txn_offset_commit(self, req: Any, version: int) -> dict[str, Any]:
        """TxnOffsetCommit (v0-v5); the response lists every requested partition in request order.
        The producer's verification with the transaction coordinator is the caller's (it comes
        before, and may refuse the whole request)."""
        now = self._now()
        group_id: str = req.group_id
        topics_out: list[dict[str, Any]] = []
        todo: list[tuple[dict[str, Any], str, Any]] = []
        for t in req.topics or []:
            parts_out: list[dict[str, Any]] = []
            topics_out.append({"name": t.name, "partitions": parts_out})
            for p in t.partitions or []:
                entry = {"partition_index": p.partition_index, "error_code": 0}
                parts_out.append(entry)
                if self._topic_exists is not None and not self._topic_exists(t.name, p.partition_index):
                    entry["error_code"] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    todo.append((entry, t.name, p))
        if not todo:
            return {"throttle_time": 0, "topics": topics_out}
        generation: int = getattr(req, "generation_id", -1)
        member_id: str = getattr(req, "member_id", "") or ""
        instance_id: str | None = getattr(req, "group_instance_id", None)
        err = self._check_group_id(group_id, allow_empty=False)
        group: Group | None = None
        if err is None:
            group = self.groups.get(group_id)
            if group is None:
                if generation < 0:
                    group = self.groups[group_id] = Group(group_id, EMPTY, now)  # a "simple" group
                else:
                    err = E.ILLEGAL_GENERATION
        if group is not None and err is None:
            err = self._validate_txn_offset_commit(group, generation, member_id, instance_id)
        if err is not None or group is None:
            for entry, _, _ in todo:
                entry["error_code"] = int(err if err is not None else E.UNKNOWN_SERVER_ERROR)
            return {"throttle_time": 0, "topics": topics_out}
        producer_id: int = req.producer_id
        pending = self.pending_txn_offsets.setdefault(producer_id, {})
        records: list[Record] = []
        undo: list[tuple[OffsetKey, PendingOffset | None]] = []
        max_bytes = self.config.offset_metadata_max_bytes
        for entry, topic, p in todo:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_length(metadata) > max_bytes:
                entry["error_code"] = int(E.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetCommitValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1), metadata, now)
            key = (group_id, topic, p.partition_index)
            undo.append((key, pending.get(key)))
            pending[key] = PendingOffset(value, self._next_order())
            records.append((offset_commit_key(*key), offset_commit_value(value)))
        if records:
            self._open_txns.setdefault(group_id, set()).add(producer_id)
            self._emit_txn(producer_id, req.producer_epoch, records, tuple(undo))
        elif not pending:
            del self.pending_txn_offsets[producer_id]
        return {"throttle_time": 0, "topics": topics_out}

    def _validate_txn_offset_commit(self, group: Group, generation: int, member_id: str,
                                    instance_id: str | None) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateOffsetCommit with isTransactional (ConsumerGroupMixin
        overrides it for KIP-848 groups)."""
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(EMPTY):
            return None
        if generation >= 0 or member_id or instance_id is not None:
            err = self._validate_current_member(group, member_id, instance_id)
            if err is not None:
                return err
            return E.ILLEGAL_GENERATION if generation != group.generation_id else None
        return None  # v0-v2 name no member: a transactional commit needs none

    # -- the marker ---------------------------------------------------------------------------

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The transaction marker of `producer_id` (COMMIT if `commit`, else ABORT) is in the log:
        its pending offsets become committed (each unless a later write committed that partition)
        or are dropped. Writes no record; a marker of a producer with nothing pending is a no-op."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if pending is None:
            return
        now = self._now()
        for group_id, _, _ in pending:
            producers = self._open_txns.get(group_id)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self._open_txns[group_id]
        if not commit:
            return
        for key, p in pending.items():
            group_id, topic, partition = key
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, EMPTY, now)
            if (topic, partition) in group.offsets and self._offset_order.get(key, 0) > p.order:
                continue  # a plain commit after this one: the most recent write wins
            group.offsets[(topic, partition)] = p.value
            self._offset_order[key] = p.order

    def revert_txn_batch(self, batch: OutBatch) -> None:
        """`batch` (from `drain_batches`) could not be appended: its pending offsets are undone."""
        if batch.producer_id < 0 or not batch.undo:
            return
        pending = self.pending_txn_offsets.get(batch.producer_id)
        if pending is None:
            return
        for key, previous in reversed(batch.undo):
            if previous is None:
                pending.pop(key, None)
            else:
                pending[key] = previous
        if not pending:
            del self.pending_txn_offsets[batch.producer_id]
        still = {g for g, _, _ in pending}
        for (group_id, _, _), _previous in batch.undo:
            if group_id not in still:
                producers = self._open_txns.get(group_id)
                if producers is not None:
                    producers.discard(batch.producer_id)
                    if not producers:
                        del self._open_txns[group_id]

    # -- queries ------------------------------------------------------------------------------

    @property
    def has_pending_transactions(self) -> bool:
        """Whether any transaction holds pending offsets here (the log must not be compacted)."""
        return bool(self.pending_txn_offsets)

    def has_pending_txn_offset(self, group_id: str, topic: str, partition: int) -> bool:
        """Kafka's hasPendingTransactionalOffsets: an open transaction committed this partition."""
        producers = self._open_txns.get(group_id)
        if not producers:
            return False
        key = (group_id, topic, partition)
        return any(key in self.pending_txn_offsets.get(pid, {}) for pid in producers)

    def pending_txn_keys(self, group_id: str) -> set[tuple[str, int]]:
        """The (topic, partition)s of the group with a pending transactional offset."""
        out: set[tuple[str, int]] = set()
        for pid in self._open_txns.get(group_id, ()):
            out.update((t, p) for g, t, p in self.pending_txn_offsets.get(pid, {}) if g == group_id)
        return out

    def pending_txn_offset(self, producer_id: int, group_id: str, topic: str,
                           partition: int) -> OffsetCommitValue | None:
        p = self.pending_txn_offsets.get(producer_id, {}).get((group_id, topic, partition))
        return None if p is None else p.value

    # -- hooks of the plain offset writes (offsets.py) ------------------------------------------

    def _offset_written(self, group_id: str, topic: str, partition: int) -> None:
        """A plain commit set this offset: it is the partition's most recent write."""
        self._offset_order[(group_id, topic, partition)] = self._next_order()

    def _offset_deleted(self, group_id: str, topic: str, partition: int) -> None:
        """A tombstone for this offset: it and every pending offset of the partition are gone."""
        key = (group_id, topic, partition)
        self._offset_order.pop(key, None)
        producers = self._open_txns.get(group_id)
        if not producers:
            return
        for pid in list(producers):
            pending = self.pending_txn_offsets.get(pid)
            if pending is None or pending.pop(key, None) is None:
                continue
            if not pending:
                del self.pending_txn_offsets[pid]
            if not any(g == group_id for g, _, _ in pending):
                producers.discard(pid)
        if not producers:
            del self._open_txns[group_id]
