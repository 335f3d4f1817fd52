"""A group coordinator shard: the classic-protocol groups of one `__consumer_offsets` partition.

Sans-io (Kafka's CoordinatorShard, without the runtime): no sockets, no tasks, no threads, no
wall clock. The broker owns one shard per `__consumer_offsets` partition it leads and:

1. builds it with the partition's records: `shard.replay(records_of_the_log)`;
2. passes it the decoded requests (`join_group`, `sync_group`, `heartbeat`, `leave_group`,
   `offset_commit`, `txn_offset_commit`, `offset_fetch`, `offset_delete`, `describe_group`,
   `delete_group`, `list_groups`). JoinGroup and SyncGroup answer through a `respond` callback,
   maybe during a later call; every other API returns its answer;
3. after each call (and each `tick`) appends `shard.drain_batches()` to the partition's log, each
   batch as it is (a TxnOffsetCommit's records form a transactional batch of its producer; one
   that cannot be appended is given back with `revert_txn_batch`), *then* sends the responses
   produced by the call -- a response may depend on its records (OffsetCommit, the leader's
   SyncGroup). Callbacks must therefore queue, not send, and must not call back into the shard;
3b. calls `complete_txn(producer_id, commit)` once a transaction marker is appended to the
   partition (txn_offsets.py: the producer's pending offsets become committed, or are dropped);
4. keeps one timer at `shard.next_deadline()` and calls `shard.tick()` when it fires (and
   re-arms it after every call: any call may move the deadline);
5. on losing the partition calls `shard.unload()`: parked requests get NOT_COORDINATOR and the
   shard answers COORDINATOR_NOT_AVAILABLE from then on.

`compact_view()` gives the live records (latest value per key, no tombstones): what the log
cleaner leaves of the partition once tombstones expire, which must replay to the same state
(tests check this) -- not while a transaction holds pending offsets
(`has_pending_transactions`): the log's transactional records and their coming markers are what
a replay needs then, and the cleaner stops at the first unstable offset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from samsa.protocol.errors import ErrorCode

from .base import CoordinatorConfig, PendingOffset, Record
from .consumer import ConsumerGroupMixin
from .consumer_group import ConsumerGroup
from .group import DEAD, EMPTY, Group, GroupState
from .membership import MembershipMixin
from .offsets import OffsetsMixin
from .records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    TxnMarker,
    TxnRecord,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    is_offset_commit_key,
    offset_commit_key,
    offset_commit_value,
)

# What replay takes: a (key, value) record, a record of a transactional batch, or a marker.
ReplayItem = (tuple[bytes | bytearray | memoryview, bytes | bytearray | memoryview | None] | TxnRecord
              | TxnMarker)

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # Kafka's "not requested" for authorized_operations


class GroupCoordinatorShard(ConsumerGroupMixin, MembershipMixin, OffsetsMixin):
    """The classic groups and committed offsets of one `__consumer_offsets` partition."""

    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig | None = None,
        now_ms: Callable[[], int] | None = None,
        *,
        topic_exists: Callable[[str, int], bool] | None = None,
        topic_name_for_id: Callable[[bytes], str | None] | None = None,
        topic_id_for_name: Callable[[str], bytes | None] | None = None,
        topic_partitions: Callable[[str], int | None] | None = None,
    ) -> None:
        if now_ms is None:
            import time

            def now_ms() -> int:
                return time.time_ns() // 1_000_000

        super().__init__(partition, config or CoordinatorConfig(), now_ms, topic_exists, topic_name_for_id,
                         topic_id_for_name)
        self._topic_partitions = topic_partitions  # partition count of a topic (None: no such topic)
        self._reset_txn_offsets()
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups (consumer.py)
        self._foreign: dict[bytes, bytes] = {}  # records of types this shard does not own, by key
        self.skipped_records = 0  # undecodable records met by replay
        self.timers.set(("retention",), self._now() + self.config.offsets_retention_check_interval_ms)

    # -- records and time ---------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        """The earliest time (ms, on the injected clock) at which `tick` has work."""
        return self.timers.next_deadline() if self.active else None

    def tick(self) -> None:
        """Apply every time-based transition due now."""
        if self.active:
            self._run_due(self._now())

    def _run_due(self, now: int) -> None:
        while True:
            key = self.timers.pop_due(now)
            if key is None:
                return
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == "retention":
                self._on_retention_timer(now)
                continue
            if kind in ("cg_hb", "cg_rebal"):
                self._on_consumer_group_timer(key, now)
                continue
            group = self.groups.get(key[1])
            if group is None:
                continue
            if kind == "hb":
                self._on_heartbeat_timer(group, key[2], now)
            elif kind == "pending":
                self._on_pending_timer(group, key[2], now)
            elif kind == "join":
                self._on_join_timer(group, now)
            elif kind == "sync":
                self._on_sync_timer(group, now)

    # -- loading ------------------------------------------------------------------------------

    def replay(self, records: Iterable[ReplayItem]) -> None:
        """Rebuild every group and offset from the partition's records, oldest first.

        Replaces whatever the shard held. As in Kafka, groups with members come back Stable in
        their generation, with sessions starting now; groups known only by offsets come back
        Empty. Records this shard cannot decode are skipped and counted in `skipped_records`.

        Records are (key, value) pairs, or for a transactional batch `TxnRecord`s with the
        producer id: their offset commits stay pending until the producer's `TxnMarker` (the
        control record), which commits them (each unless a later write committed that
        partition) or drops them; a plain tombstone drops the pending offsets of its partition
        too (Kafka's OffsetMetadataManager.replay / replayEndTransactionMarker). Offsets still
        pending at the end are the open transactions' (OffsetFetch does not show them).
        """
        now = self._now()
        for group in self.groups.values():
            self._fail_pending_calls(group, ErrorCode.NOT_COORDINATOR)
        self.groups.clear()
        self._reset_consumer_groups()
        self.timers.clear()
        self._clear_output()
        self._reset_txn_offsets()
        self._foreign.clear()
        self.skipped_records = 0
        self.active = True

        # Only the last value of each key matters; re-inserting a key moves it to the end, so
        # the dict iterates in order of last write (which settles keys written in two versions).
        latest: dict[bytes, bytes | None] = {}
        order: dict[bytes, int] = {}  # each key's position in the log (offset commits' only)
        pending: dict[int, dict[bytes, tuple[bytes, int]]] = {}  # producer -> key -> (value, position)
        n = 0
        for item in records:
            n += 1
            if isinstance(item, TxnMarker):
                entries = pending.pop(item.producer_id, None)
                if entries and item.commit:
                    for k, (v, o) in entries.items():
                        if latest.get(k) is None or o > order[k]:
                            latest.pop(k, None)
                            latest[k] = v
                            order[k] = o
                continue
            if isinstance(item, TxnRecord):
                if item.value is not None and is_offset_commit_key(item.key):
                    pending.setdefault(item.producer_id, {})[bytes(item.key)] = (bytes(item.value), n)
                    continue
                key, value = item.key, item.value  # (another record type: applied at once, as Kafka does)
            else:
                key, value = item
            k = bytes(key)
            latest.pop(k, None)
            latest[k] = None if value is None else bytes(value)
            if is_offset_commit_key(k):
                order[k] = n
                if value is None:
                    for entries in pending.values():
                        entries.pop(k, None)
        self._order = n

        offsets: dict[str, dict[tuple[str, int], bytes | None]] = {}
        metadata: dict[str, bytes | None] = {}
        for k, value in latest.items():
            try:
                key_obj = decode_key(k)
            except RecordDecodeError:
                self.skipped_records += 1
                continue
            if type(key_obj) is OffsetCommitKey:
                offsets.setdefault(key_obj.group, {})[(key_obj.topic, key_obj.partition)] = value
                if value is not None:
                    self._offset_order[key_obj] = order[k]
            elif type(key_obj) is GroupMetadataKey:
                metadata[key_obj.group] = value
            elif value is not None:
                self._foreign[k] = value
            else:
                self._foreign.pop(k, None)

        for group_id, raw in metadata.items():
            if raw is None:
                continue
            try:
                decoded = decode_group_metadata_value(raw)
            except RecordDecodeError:
                self.skipped_records += 1
                continue
            loaded = Group.from_record(group_id, decoded, now)
            loaded.persisted = raw
            self.groups[group_id] = loaded

        for group_id, raws in offsets.items():
            live: dict[tuple[str, int], OffsetCommitValue] = {}
            for tp, raw in raws.items():
                if raw is None:
                    continue
                try:
                    live[tp] = decode_offset_commit_value(raw)
                except RecordDecodeError:
                    self.skipped_records += 1
            if not live:
                continue
            owner = self.groups.get(group_id)
            if owner is None:
                owner = self.groups[group_id] = Group(group_id, EMPTY, now)
            owner.offsets = live

        for producer_id, entries in pending.items():
            for k, (raw, o) in entries.items():
                try:
                    pkey = decode_key(k)
                    pvalue = decode_offset_commit_value(raw)
                except RecordDecodeError:
                    self.skipped_records += 1
                    continue
                assert type(pkey) is OffsetCommitKey
                group_id = pkey.group
                self.pending_txn_offsets.setdefault(producer_id, {})[pkey] = PendingOffset(pvalue, o)
                self._open_txns.setdefault(group_id, set()).add(producer_id)
                if group_id not in self.groups:
                    self.groups[group_id] = Group(group_id, EMPTY, now)  # Kafka's "simple" group

        for group in list(self.groups.values()):
            self._on_group_loaded(group, now)
        self.timers.set(("retention",), now + self.config.offsets_retention_check_interval_ms)

    def compact_view(self) -> list[Record]:
        """The live records, one per key: the log rewritten to just these replays to the same state.

        Not while a transaction holds pending offsets (RuntimeError): compact only when
        `has_pending_transactions` is false."""
        if self.has_pending_transactions:
            raise RuntimeError("a transaction holds pending offsets: the log cannot be compacted now")
        out: list[Record] = []
        for group_id, group in self.groups.items():
            if group.persisted is not None:
                out.append((group_metadata_key(group_id), group.persisted))
            for (topic, partition), v in group.offsets.items():
                out.append((offset_commit_key(group_id, topic, partition), offset_commit_value(v)))
        out.extend(self._foreign.items())
        return out

    def unload(self) -> None:
        """This broker no longer leads the partition: answer parked calls, drop all state."""
        now = self._now()
        for group in self.groups.values():
            group.transition_to(DEAD, now)
            self._fail_pending_calls(group, ErrorCode.NOT_COORDINATOR)
        self.groups.clear()
        self._reset_consumer_groups()
        self._reset_txn_offsets()
        self.timers.clear()
        self.active = False

    # -- ListGroups, DescribeGroups -----------------------------------------------------------

    def list_groups(self, states_filter: Iterable[str] | None = None) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) of every group, optionally only in the given states
        (case-insensitive, Kafka's state names)."""
        if not self.active:
            return []
        return [(e["group_id"], e["protocol_type"], e["group_state"]) for e in self.list_groups_typed(states_filter)]

    def list_groups_typed(self, states_filter: Iterable[str] | None = None,
                          types_filter: Iterable[str] | None = None) -> list[dict[str, str]]:
        """ListGroups v5 entries (group_id, protocol_type, group_state, group_type "classic" or
        "consumer"), optionally only in the given states and of the given types (case-insensitive)."""
        if not self.active:
            return []
        wanted = {s.lower() for s in states_filter} if states_filter else None
        types = {t.lower() for t in types_filter} if types_filter else None
        out = []
        if types is None or "classic" in types:
            out = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value,
                    "group_type": "classic"}
                   for g in self.groups.values()
                   if g.group_id not in self.consumer_groups and (wanted is None or g.state.value.lower() in wanted)]
        if types is None or "consumer" in types:
            out += [{"group_id": gid, "protocol_type": "consumer", "group_state": cg.state, "group_type": "consumer"}
                    for gid, cg in self.consumer_groups.items() if wanted is None or cg.state.lower() in wanted]
        return out

    def describe_group(self, group_id: str, version: int = 5) -> dict[str, Any]:
        """The DescribeGroups entry of one group. A group that does not exist, or is not a
        classic group, is described as Dead; from v6 (KIP-1043) also with GROUP_ID_NOT_FOUND
        and Kafka's message, which Kafka's Admin (4.x) raises as GroupIdNotFoundException."""
        entry: dict[str, Any] = {"error_code": 0, "error_message": None, "group_id": group_id,
                                 "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                                 "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        err = self._check_group_id(group_id, allow_empty=True)
        if err is not None:
            entry["error_code"] = int(err)
            return entry
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer_groups or group.state is GroupState.DEAD:
            entry["group_state"] = GroupState.DEAD.value
            if version >= 6:
                entry["error_code"] = int(ErrorCode.GROUP_ID_NOT_FOUND)
                classic = group_id not in self.consumer_groups
                entry["error_message"] = f"Group {group_id} not found." if classic else (
                    f"Group {group_id} is not a classic group.")
            return entry
        entry.update(group.describe())
        return entry

    def group(self, group_id: str) -> Group | None:
        """The group's live state, for tools and tests (not to be mutated)."""
        return self.groups.get(group_id)
