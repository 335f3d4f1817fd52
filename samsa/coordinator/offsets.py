"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and retention.

A commit is validated against the group the way Kafka does it (validateOffsetCommit):

* generation -1 with no member id is a "simple" commit (admin tools, consumers using assign()):
  accepted while the group is Empty, creating the group if it does not exist;
* otherwise the member must exist (and be its instance's current id) and the generation must be
  the group's (else UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / ILLEGAL_GENERATION); during
  CompletingRebalance commits get REBALANCE_IN_PROGRESS; a commit refreshes the member's session.

Each accepted partition becomes an OffsetCommit record (value v3, or v1 when the request asked for
a retention time). Partitions whose metadata is longer than `offset.metadata.max.bytes` get
OFFSET_METADATA_TOO_LARGE; topics the broker does not have get UNKNOWN_TOPIC_OR_PARTITION (the
`topic_exists` hook).

Retention (Kafka 2.1+, KIP-211): every `offsets.retention.check.interval.ms` the offsets of
Empty groups older than `offsets.retention.ms` -- counted from the moment the group became Empty
-- are deleted, as are those of groups that never had members (counted from each commit), and, in
a Stable consumer group, those of topics no member subscribes to. Deleting writes a tombstone per
offset; an Empty group left without offsets is deleted too (a tombstone for its metadata).

Transactional commits (TxnOffsetCommit) are txn_offsets.py's: they stay pending until their
transaction's marker, and the code here consults them (require_stable, retention, deletion).
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

from .group import (
    COMPLETING_REBALANCE,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Group,
)
from .records import (
    OffsetCommitValue,
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)
from .txn_offsets import TxnOffsetsMixin, java_length

E = ErrorCode


class OffsetsMixin(TxnOffsetsMixin):
    # -- OffsetCommit -------------------------------------------------------------------------

    def offset_commit(self, req: Any, version: int) -> dict[str, Any]:
        """OffsetCommit (v2-v10); the response lists every requested partition in request order."""
        now = self._now()
        topics_out: list[dict[str, Any]] = []
        todo: list[tuple[dict[str, Any], str, Any]] = []  # (response partition, topic, request partition)
        for t in req.topics or []:
            name: str | None = getattr(t, "name", None)
            topic_id: bytes | None = getattr(t, "topic_id", None)
            if name is None and topic_id is not None:
                name = self._topic_name_for_id(topic_id) if self._topic_name_for_id else None
            parts_out: list[dict[str, Any]] = []
            topics_out.append({"name": name or "", "topic_id": topic_id, "partitions": parts_out})
            for p in t.partitions or []:
                entry = {"partition_index": p.partition_index, "error_code": 0}
                parts_out.append(entry)
                if name is None:
                    entry["error_code"] = int(E.UNKNOWN_TOPIC_ID)
                elif self._topic_exists is not None and not self._topic_exists(name, p.partition_index):
                    entry["error_code"] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    todo.append((entry, name, p))
        if todo:
            retention = getattr(req, "retention_time", -1)
            expire = now + retention if retention is not None and retention != -1 else -1
            self._commit(req, version, todo, expire, now)
        self._run_due(now)
        return {"throttle_time": 0, "topics": topics_out}

    def _commit(self, req: Any, version: int, todo: list[tuple[dict[str, Any], str, Any]], expire: int,
                now: int) -> None:
        group_id: str = req.group_id
        generation: int = getattr(req, "generation_id_or_member_epoch", -1)
        member_id: str = getattr(req, "member_id", "") or ""
        instance_id: str | None = getattr(req, "group_instance_id", None)
        group: Group | None = None
        err = self._check_group_id(group_id, allow_empty=True)
        if err is None:
            group = self.groups.get(group_id)
            if group is None:
                if generation < 0:
                    group = self.groups[group_id] = Group(group_id, EMPTY, now)  # a "simple" group
                else:
                    err = E.GROUP_ID_NOT_FOUND if version >= 9 else E.ILLEGAL_GENERATION
        if group is not None and err is None:
            err = self._validate_offset_commit(group, generation, member_id, instance_id)
            if err is None:
                if group.is_(COMPLETING_REBALANCE):
                    err = E.REBALANCE_IN_PROGRESS
                elif group.state in (STABLE, PREPARING_REBALANCE):
                    self._schedule_heartbeat(group, group.members[member_id], now)
        if err is not None or group is None:
            for entry, _, _ in todo:
                entry["error_code"] = int(err if err is not None else E.UNKNOWN_SERVER_ERROR)
            return
        max_bytes = self.config.offset_metadata_max_bytes
        for entry, topic, p in todo:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if java_length(metadata) > max_bytes:
                entry["error_code"] = int(E.OFFSET_METADATA_TOO_LARGE)
                continue
            value = OffsetCommitValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1), metadata,
                                      now, expire)
            group.offsets[(topic, p.partition_index)] = value
            self._offset_written(group_id, topic, p.partition_index)
            self._emit(offset_commit_key(group_id, topic, p.partition_index), offset_commit_value(value))

    def _validate_offset_commit(self, group: Group, generation: int, member_id: str,
                                instance_id: str | None) -> ErrorCode | None:
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(EMPTY):
            return None  # admin tools and assign()-consumers commit into empty groups
        if generation >= 0 or member_id or instance_id is not None:
            err = self._validate_current_member(group, member_id, instance_id)
            if err is not None:
                return err
            return E.ILLEGAL_GENERATION if generation != group.generation_id else None
        return E.UNKNOWN_MEMBER_ID  # a non-empty group only takes its members' commits

    # -- OffsetFetch --------------------------------------------------------------------------

    def offset_fetch(self, req: Any, version: int) -> dict[str, Any]:
        """OffsetFetch: v1-v7 one group (`topics` null = all, v2+), v8+ a `groups` array; v7+
        `require_stable`: partitions with a pending transactional offset answer
        UNSTABLE_OFFSET_COMMIT (else a pending offset is not shown: the committed one is).

        With several shards the broker may instead call `fetch_offsets` per group and build the
        v8+ response itself.
        """
        stable = bool(getattr(req, "require_stable", False)) and version >= 7
        if version >= 8:
            groups = []
            for g in req.groups or []:
                topics = None if g.topics is None else [
                    (getattr(t, "name", None), getattr(t, "topic_id", None), list(t.partition_indexes or []))
                    for t in g.topics
                ]
                groups.append(self.fetch_offsets(g.group_id, topics, require_stable=stable))
            return {"throttle_time": 0, "groups": groups}
        topics = None if req.topics is None else [(t.name, None, list(t.partition_indexes or []))
                                                  for t in req.topics]
        result = self.fetch_offsets(req.group_id, topics, require_stable=stable)
        if version < 2 and result["error_code"]:
            # v0-v1 have no group-level error: it goes on every partition.
            for t in result["topics"]:
                for p in t["partitions"]:
                    p["error_code"] = result["error_code"]
        return {"throttle_time": 0, "topics": result["topics"], "error_code": result["error_code"]}

    def fetch_offsets(self, group_id: str, topics: list[tuple[str | None, bytes | None, list[int]]] | None,
                      *, require_stable: bool = False) -> dict[str, Any]:
        """One group's OffsetFetch entry (v8+ shape): topics are (name, topic_id, partitions), or None
        for every committed offset. Unknown partitions answer offset -1, as Kafka does; with
        `require_stable` so do those with a pending transactional offset, with UNSTABLE_OFFSET_COMMIT
        (Kafka's OffsetMetadataManager.fetchOffsets / fetchAllOffsets)."""
        err = self._check_group_id(group_id, allow_empty=True)
        group = self.groups.get(group_id) if err is None else None
        if group is not None and group.is_(DEAD):
            group = None
        offsets = group.offsets if group is not None else {}
        out: list[dict[str, Any]] = []
        if topics is None:
            if err is None:
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for (topic, partition), v in offsets.items():
                    by_topic.setdefault(topic, []).append(
                        self._unstable_entry(partition) if require_stable and self.has_pending_txn_offset(
                            group_id, topic, partition) else self._partition_entry(partition, v))
                for topic, parts in by_topic.items():
                    tid = self._topic_id_for_name(topic) if self._topic_id_for_name else None
                    out.append({"name": topic, "topic_id": tid, "partitions": parts})
        else:
            for name, topic_id, partitions in topics:
                if name is None and topic_id is not None and self._topic_name_for_id is not None:
                    name = self._topic_name_for_id(topic_id)
                parts = []
                for partition in partitions:
                    if name is None:
                        entry = self._partition_entry(partition, None)
                        entry["error_code"] = int(E.UNKNOWN_TOPIC_ID)
                    elif require_stable and self.has_pending_txn_offset(group_id, name, partition):
                        entry = self._unstable_entry(partition)
                    else:
                        entry = self._partition_entry(partition, offsets.get((name, partition)))
                    parts.append(entry)
                out.append({"name": name or "", "topic_id": topic_id, "partitions": parts})
        return {"group_id": group_id, "topics": out, "error_code": int(err) if err is not None else 0}

    @classmethod
    def _unstable_entry(cls, partition: int) -> dict[str, Any]:
        entry = cls._partition_entry(partition, None)
        entry["error_code"] = int(E.UNSTABLE_OFFSET_COMMIT)
        return entry

    @staticmethod
    def _partition_entry(partition: int, v: OffsetCommitValue | None) -> dict[str, Any]:
        if v is None:
            return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": 0}
        return {"partition_index": partition, "committed_offset": v.offset, "committed_leader_epoch": v.leader_epoch,
                "metadata": v.metadata, "error_code": 0}

    # -- OffsetDelete and DeleteGroups --------------------------------------------------------

    def offset_delete(self, req: Any, version: int) -> dict[str, Any]:
        """OffsetDelete (v0): drop committed offsets unless a live member subscribes to the topic;
        a partition the broker does not have gets UNKNOWN_TOPIC_OR_PARTITION (as Kafka's
        KafkaApis answers it before asking the coordinator), a group error wins over both."""
        now = self._now()
        group_id: str = req.group_id
        err = self._check_group_id(group_id, allow_empty=False)
        group = self.groups.get(group_id) if err is None else None
        if err is None and (group is None or group.is_(DEAD)):
            err = E.GROUP_ID_NOT_FOUND
        if err is None and group is not None and group.state is not EMPTY and (
                group.protocol_type != CONSUMER_PROTOCOL_TYPE):
            err = E.NON_EMPTY_GROUP
        if err is not None or group is None:
            return {"throttle_time": 0, "error_code": int(err if err is not None else E.GROUP_ID_NOT_FOUND),
                    "topics": []}
        topics_out = []
        removed: list[tuple[str, int]] = []
        for t in req.topics or []:
            subscribed = not group.is_(EMPTY) and group.is_subscribed_to(t.name)
            parts = []
            for p in t.partitions or []:
                if self._topic_exists is not None and not self._topic_exists(t.name, p.partition_index):
                    parts.append({"partition_index": p.partition_index,
                                  "error_code": int(E.UNKNOWN_TOPIC_OR_PARTITION)})
                    continue
                if subscribed:
                    parts.append({"partition_index": p.partition_index, "error_code": int(E.GROUP_SUBSCRIBED_TO_TOPIC)})
                    continue
                if (group.offsets.pop((t.name, p.partition_index), None) is not None
                        or self.has_pending_txn_offset(group_id, t.name, p.partition_index)):
                    removed.append((t.name, p.partition_index))  # (a pending offset is deleted too)
                parts.append({"partition_index": p.partition_index, "error_code": 0})
            topics_out.append({"name": t.name, "partitions": parts})
        self._cleanup_group(group, removed, now)
        self._run_due(now)
        return {"throttle_time": 0, "error_code": 0, "topics": topics_out}

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: its error code (NON_EMPTY_GROUP while it has members)."""
        now = self._now()
        err = self._check_group_id(group_id, allow_empty=True)
        if err is not None:
            return int(err)
        group = self.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return int(E.GROUP_ID_NOT_FOUND)
        if not group.is_(EMPTY):
            return int(E.NON_EMPTY_GROUP)
        group.transition_to(DEAD, now)
        removed = list(group.offsets)
        removed += [k for k in self.pending_txn_keys(group_id) if k not in group.offsets]
        group.offsets.clear()
        self._cleanup_group(group, removed, now)
        return 0

    def _cleanup_group(self, group: Group, removed: list[tuple[str, int]], now: int) -> None:
        """Tombstones for removed offsets; an Empty group without offsets is deleted."""
        gid = group.group_id
        for topic, partition in removed:
            self._offset_deleted(gid, topic, partition)
            self._emit(offset_commit_key(gid, topic, partition), None)
        if group.is_(EMPTY) and not group.offsets and gid not in self._open_txns:
            group.transition_to(DEAD, now)
        if group.is_(DEAD) and self.groups.get(gid) is group:
            del self.groups[gid]
            self._cancel_group_timers(group)
            if group.generation_id > 0 or group.persisted is not None:
                self._emit(group_metadata_key(gid), None)

    # -- retention ----------------------------------------------------------------------------

    def _on_retention_timer(self, now: int) -> None:
        for group in list(self.groups.values()):
            expired = self._expired_offsets(group, now)
            for key in expired:
                del group.offsets[key]
            self._cleanup_group(group, expired, now)
        self.timers.set(("retention",), now + self.config.offsets_retention_check_interval_ms)

    def _expired_offsets(self, group: Group, now: int) -> list[tuple[str, int]]:
        """Kafka's GroupMetadata.removeExpiredOffsets (which offsets, not the removal); an offset
        with a pending transactional one is kept (Kafka's OffsetMetadataManager)."""
        held = self.pending_txn_keys(group.group_id)
        return [k for k in self._expiring_offsets(group, now) if k not in held]

    def _expiring_offsets(self, group: Group, now: int) -> list[tuple[str, int]]:
        retention = self.config.offsets_retention_ms

        def is_expired(v: OffsetCommitValue, base: int) -> bool:
            if v.expire_timestamp != -1:
                return now >= v.expire_timestamp
            return now - base >= retention

        if group.protocol_type is not None and group.is_(EMPTY):
            since = group.state_timestamp
            return [k for k, v in group.offsets.items()
                    if is_expired(v, since if since is not None else v.commit_timestamp)]
        if (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
                and group.is_(STABLE)):
            subscribed = group.subscribed_topics
            return [k for k, v in group.offsets.items()
                    if k[0] not in subscribed and is_expired(v, v.commit_timestamp)]
        if group.protocol_type is None:
            return [k for k, v in group.offsets.items() if is_expired(v, v.commit_timestamp)]
        return []
