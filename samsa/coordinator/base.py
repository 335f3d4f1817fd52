"""What every part of a coordinator shard shares: configuration, groups, timers, the record sink.

`GroupCoordinatorShard` (shard.py) is assembled from two halves that both build on `ShardBase`:
`MembershipMixin` (membership.py: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the
rebalance timers) and `OffsetsMixin` (offsets.py: OffsetCommit, OffsetFetch, OffsetDelete,
retention), and `TxnOffsetsMixin` (txn_offsets.py: TxnOffsetCommit, offsets pending until the
transaction's marker). State changes that Kafka persists are appended to `_records` as (key,
value) pairs of `__consumer_offsets` records -- a TxnOffsetCommit's go into a transactional
`OutBatch` of its producer instead; the broker drains the batches (`drain_batches`) and appends
them, in order, to the partition's log.

Timers are keyed (see timers.py):

    ("hb", group, member)       session expiry of a member (or its new-member join timeout)
    ("pending", group, member)  a member id handed out with MEMBER_ID_REQUIRED, not yet used
    ("join", group)             end of the join phase (initial delay or rebalance timeout)
    ("sync", group)             members that have not sent SyncGroup within the rebalance timeout
    ("retention",)              the periodic expiry of old offsets
    ("cg_hb", group, member)    session expiry of a consumer-protocol member (consumer.py)
    ("cg_rebal", group, member) revocation deadline of a consumer-protocol member (consumer.py)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from samsa.protocol.errors import ErrorCode

from .group import Callback, Group, Member
from .records import OffsetCommitValue, group_metadata_key, group_metadata_value, partition_for
from .timers import Timers

INT32_MAX = 2**31 - 1
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True)
class CoordinatorConfig:
    """Kafka's group coordinator settings (the `group.*` and `offsets.*` broker keys)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT32_MAX
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    # When set, requests for groups that hash to another partition get NOT_COORDINATOR.
    offsets_topic_num_partitions: int | None = None
    # The consumer group protocol (KIP-848): group.consumer.* keys.
    consumer_group_heartbeat_interval_ms: int = 5000
    consumer_group_session_timeout_ms: int = 45000
    consumer_group_max_size: int = INT32_MAX

    @classmethod
    def from_broker_config(cls, values: Mapping[str, Any]) -> CoordinatorConfig:
        """From parsed broker settings under Kafka's keys (absent keys keep Kafka's defaults)."""
        d = cls()

        def get(key: str, default: int) -> int:
            v = values.get(key)
            return default if v is None else int(v)

        minutes = values.get("offsets.retention.minutes")
        return cls(
            group_min_session_timeout_ms=get("group.min.session.timeout.ms", d.group_min_session_timeout_ms),
            group_max_session_timeout_ms=get("group.max.session.timeout.ms", d.group_max_session_timeout_ms),
            group_initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms",
                                                 d.group_initial_rebalance_delay_ms),
            group_max_size=get("group.max.size", d.group_max_size),
            offsets_retention_ms=d.offsets_retention_ms if minutes is None else int(minutes) * 60000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    d.offsets_retention_check_interval_ms),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", d.offset_metadata_max_bytes),
            offsets_topic_num_partitions=get("offsets.topic.num.partitions", 50)
            if "offsets.topic.num.partitions" in values else None,
            consumer_group_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms",
                                                     d.consumer_group_heartbeat_interval_ms),
            consumer_group_session_timeout_ms=get("group.consumer.session.timeout.ms",
                                                  d.consumer_group_session_timeout_ms),
            consumer_group_max_size=get("group.consumer.max.size", d.consumer_group_max_size),
        )


Record = tuple[bytes, bytes | None]
OffsetKey = tuple[str, str, int]  # (group, topic, partition)


class PendingOffset(NamedTuple):
    """A transactional offset commit waiting for its transaction's marker. `order` places its
    write among the shard's offset writes (Kafka keeps the record's log offset): at COMMIT it
    replaces the committed offset only if written after it."""

    value: OffsetCommitValue
    order: int


class OutBatch(NamedTuple):
    """Records to append as one batch: plain (`producer_id` -1), or transactional records of a
    producer's TxnOffsetCommit. `undo` restores the shard's pending offsets should the batch not
    be appended (`revert_txn_batch`): (key, the pending offset it replaced or None)."""

    producer_id: int
    producer_epoch: int
    records: list[Record]
    undo: tuple[tuple[OffsetKey, PendingOffset | None], ...] = ()


class Once:
    """A response callback that fires at most once, shaping the result for the API version."""

    __slots__ = ("_fn", "_shape", "done")

    def __init__(self, fn: Callable[[dict[str, Any]], None], shape: Callable[[dict[str, Any]], dict[str, Any]]):
        self._fn = fn
        self._shape = shape
        self.done = False

    def __call__(self, result: dict[str, Any]) -> None:
        if self.done:
            return
        self.done = True
        self._fn(self._shape(result))


def join_result(
    member_id: str,
    error: int,
    generation_id: int = -1,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    leader: str | None = "",
    skip_assignment: bool = False,
    members: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": int(error),
        "generation_id": generation_id,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "leader": leader or "",
        "skip_assignment": skip_assignment,
        "member_id": member_id,
        "members": members or [],
    }


def sync_result(error: int, protocol_type: str | None = None, protocol_name: str | None = None,
                assignment: bytes = b"") -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": int(error), "protocol_type": protocol_type,
            "protocol_name": protocol_name, "assignment": assignment}


class ShardBase:
    """State shared by the membership and offsets halves of a shard."""

    def __init__(
        self,
        partition: int,
        config: CoordinatorConfig,
        now_ms: Callable[[], int],
        topic_exists: Callable[[str, int], bool] | None = None,
        topic_name_for_id: Callable[[bytes], str | None] | None = None,
        topic_id_for_name: Callable[[str], bytes | None] | None = None,
    ) -> None:
        self.partition = partition
        self.config = config
        self._now = now_ms
        self._topic_exists = topic_exists
        self._topic_name_for_id = topic_name_for_id
        self._topic_id_for_name = topic_id_for_name
        self.groups: dict[str, Group] = {}
        self.timers = Timers()
        self._records: list[Record] = []  # plain records since the last batch was closed
        self._batches: list[OutBatch] = []  # closed batches, not drained yet
        self.active = True
        # Rebalances done by this shard's live operations (a replay counts none), for the
        # broker's metrics: classic groups that became Stable, consumer groups' epoch bumps.
        self.completed_rebalances = 0
        self.consumer_group_rebalances = 0

    # -- checks ---------------------------------------------------------------------------

    def _check_group_id(self, group_id: str | None, allow_empty: bool) -> ErrorCode | None:
        """Kafka's validateGroupStatus: a usable id, an active shard, the right partition."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        n = self.config.offsets_topic_num_partitions
        if n is not None and partition_for(group_id, n) != self.partition:
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """A static member must be the instance's current member id; any member must exist."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # -- records --------------------------------------------------------------------------

    def _emit(self, key: bytes, value: bytes | None) -> None:
        self._records.append((key, value))

    def _emit_txn(self, producer_id: int, producer_epoch: int, records: list[Record],
                  undo: tuple[tuple[OffsetKey, PendingOffset | None], ...]) -> None:
        """Records of a transactional batch of `producer_id`, after everything emitted so far."""
        self._close_plain_run()
        self._batches.append(OutBatch(producer_id, producer_epoch, records, undo))

    def _close_plain_run(self) -> None:
        if self._records:
            self._batches.append(OutBatch(-1, -1, self._records))
            self._records = []

    def drain_batches(self) -> list[OutBatch]:
        """The batches to append to the partition since the last drain, in order."""
        self._close_plain_run()
        out, self._batches = self._batches, []
        return out

    def drain_records(self) -> list[Record]:
        """The (key, value) records to append since the last drain, in order, without their
        batches (a transactional one's producer is lost: the broker uses `drain_batches`)."""
        return [r for b in self.drain_batches() for r in b.records]

    def _clear_output(self) -> None:
        self._records = []
        self._batches = []

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        """Persist the group (GroupMetadataValue v3) with the given assignment per member."""
        value = group_metadata_value(group.to_record(assignment))
        group.persisted = value
        self._emit(group_metadata_key(group.group_id), value)

    # -- callbacks and timers -------------------------------------------------------------

    @staticmethod
    def _invoke_join(member: Member, result: dict[str, Any]) -> bool:
        cb: Callback | None = member.awaiting_join
        if cb is None:
            return False
        member.awaiting_join = None
        cb(result)
        return True

    @staticmethod
    def _invoke_sync(member: Member, result: dict[str, Any]) -> bool:
        cb: Callback | None = member.awaiting_sync
        if cb is None:
            return False
        member.awaiting_sync = None
        cb(result)
        return True

    def _schedule_heartbeat(self, group: Group, member: Member, now: int, timeout_ms: int | None = None) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timers.set(("hb", group.group_id, member.member_id), now + timeout)

    def _cancel_member_timers(self, group: Group, member_id: str) -> None:
        self.timers.cancel(("hb", group.group_id, member_id))
        self.timers.cancel(("pending", group.group_id, member_id))

    def _cancel_group_timers(self, group: Group) -> None:
        gid = group.group_id
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_member_timers(group, member_id)
        self.timers.cancel(("join", gid))
        self.timers.cancel(("sync", gid))

    def _run_due(self, now: int) -> None:  # pragma: no cover - the shard provides it
        """Fire every timer due at `now` (GroupCoordinatorShard dispatches them)."""
        raise NotImplementedError
