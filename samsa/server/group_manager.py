"""Runs the group coordinator shards of the `__consumer_offsets` partitions this broker leads.

How it works: group G lives in partition abs(hash(G)) % offsets.topic.num.partitions of the
compacted internal topic `__consumer_offsets` (Kafka's rule, so clients and tools agree on
where a group is). Each partition this broker leads has one `GroupCoordinatorShard`, a
sans-io state machine (`samsa.coordinator`). This module is its I/O: it replays the
partition's log into the shard at start-up, runs every operation on it (`execute`), appends
the records each operation produces, and keeps one timer per shard at the shard's next
deadline (session expiry, rebalance timeouts, offset retention).

`execute(shard, op)` is the one way a request reaches a shard, and always returns a `Pending`
of the answer. `op(respond)` runs at once; its answer -- passed to `respond` during this
operation, or for a JoinGroup or SyncGroup parked in a rebalance, during a later one or a
timer's tick -- goes out once the records of the operation that produced it are in the log and
on every in-sync replica (the high watermark has passed them, as Kafka's coordinator runtime
defers a write's response; at most `offsets.commit.timeout.ms`: the records stay and will
replicate). That wait is a delayed operation of the purgatory (`DelayedGroupWrite`), watched
under the `__consumer_offsets` partition. With one replica the high watermark moves in the
append itself, and answers go out at once.

In a cluster the coordinator moves with leadership: when this broker becomes leader of a
partition of `__consumer_offsets` it replays it into a fresh shard; when it stops leading
it unloads the shard (requests parked in a rebalance are answered NOT_COORDINATOR) and drops
it; clients ask FindCoordinator again, which names the partition's leader from the cluster
view. The topic is created with
`offsets.topic.replication.factor` replicas: on a single embedded-store broker at start-up
(capped at the live brokers), in a ZooKeeper cluster on the first FindCoordinator once that
many brokers are alive, as Kafka does.

Compaction: `__consumer_offsets` is a compacted topic, cleaned by the broker's log cleaner
like any other (server/log_cleaner.py): the latest record per key survives, tombstones go
after delete.retention.ms, and nothing is cleaned past an open transaction. Replaying what is
left gives the same state (`GroupCoordinatorShard.compact_view` is that state as records).

Transactions: a TxnOffsetCommit's records are appended as a transactional batch of the
producer (its id and epoch, base sequence -1, the transactional attribute), as Kafka's
coordinator writes them; the offsets stay pending in the shard until the producer's marker is
appended to the partition (`on_txn_marker`, called by the WriteTxnMarkers path). Loading reads
the batch headers too: records of a transactional batch are replayed as pending until that
producer's control record.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from samsa.config import BrokerConfig
from samsa.coordinator.base import CoordinatorConfig, OutBatch
from samsa.coordinator.records import TxnMarker, TxnRecord, partition_for
from samsa.coordinator.shard import GroupCoordinatorShard
from samsa.protocol.control import decode_control_key
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import build_batch, decode_records, scan_batches
from samsa.server.admin import AdminManager
from samsa.server.cluster import ClusterView
from samsa.server.purgatory import DelayedOperation, Purgatory
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.responses import Pending
from samsa.server.topics import Topic


class GroupHost(Protocol):
    """What the group coordinator uses of its broker."""

    node_id: int
    config: BrokerConfig
    zk_mode: bool
    topics: dict[str, Topic]
    replicas: ReplicaManager
    admin: AdminManager

    @property
    def purgatory(self) -> Purgatory: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    @property
    def cluster(self) -> ClusterView: ...

    def topic_ready(self, name: str) -> bool: ...

    def endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]: ...


log = logging.getLogger("samsa.groups")

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}
READ_CHUNK = 16 << 20


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupManager:
    def __init__(self, broker: GroupHost) -> None:
        self.broker = broker
        self.shards: dict[int, GroupCoordinatorShard] = {}
        self.timers: dict[int, asyncio.TimerHandle] = {}
        self.num_partitions = int(broker.config.get("offsets.topic.num.partitions"))
        self._running = False  # an operation or tick is running on a shard
        self._answers: list[tuple[Pending, Any]] = []  # answers given during it
        # Rebalances counted by shards since unloaded (the totals must not go back): classic, consumer
        self.retired_rebalances = [0, 0]

    # -- start-up -------------------------------------------------------------------------------

    def config(self) -> CoordinatorConfig:
        keys = ("group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
                "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
                "offset.metadata.max.bytes", "group.consumer.heartbeat.interval.ms",
                "group.consumer.session.timeout.ms", "group.consumer.max.size")
        values = {k: self.broker.config.get(k) for k in keys}
        values["offsets.topic.num.partitions"] = self.num_partitions
        return CoordinatorConfig.from_broker_config(values)

    async def startup(self) -> None:
        """Single node: create `__consumer_offsets` now (shards load as its partitions get
        their leader). A ZooKeeper cluster creates it on the first FindCoordinator."""
        broker = self.broker
        if broker.zk_mode or OFFSETS_TOPIC in broker.topics:
            return
        await self.ensure_topic(cap_to_live=True)
        await broker.cluster.wait_until(lambda: broker.topic_ready(OFFSETS_TOPIC), 30)

    async def ensure_topic(self, cap_to_live: bool = False) -> bool:
        """True if `__consumer_offsets` exists; else create it when enough brokers are alive."""
        broker = self.broker
        if OFFSETS_TOPIC in broker.topics:
            return True
        rf = int(broker.config.get("offsets.topic.replication.factor"))
        live = len(broker.admin.live_brokers())
        if cap_to_live:
            rf = min(rf, live)
        elif live < rf:
            log.warning("Cannot create %s yet: offsets.topic.replication.factor=%d but %d brokers are alive",
                        OFFSETS_TOPIC, rf, live)
            return False
        configs = dict(OFFSETS_TOPIC_CONFIGS,
                       **{"segment.bytes": str(broker.config.get("offsets.topic.segment.bytes"))})
        try:
            await broker.admin.create_topic(OFFSETS_TOPIC, self.num_partitions, rf, configs)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("Could not create %s: %s", OFFSETS_TOPIC, e.message)
        return False

    def on_role(self, partition: Partition) -> None:
        """Leadership of an offsets partition changed: load its shard or drop it."""
        index = partition.index
        if partition.is_leader and index not in self.shards:
            t0 = time.monotonic()
            n = self._load(partition)
            log.info("Coordinating groups of %s-%d: loaded %d records in %.0f ms", OFFSETS_TOPIC, index, n,
                     (time.monotonic() - t0) * 1000)
        elif not partition.is_leader and index in self.shards:
            shard = self.shards.pop(index)
            timer = self.timers.pop(index, None)
            if timer is not None:
                timer.cancel()
            held = len(shard.groups)
            self._unload(shard)
            # (one line per partition that held groups: a broker losing all 50 says little else)
            log.log(logging.INFO if held else logging.DEBUG, "No longer coordinating groups of %s-%d (%d groups)",
                    OFFSETS_TOPIC, index, held)

    def _unload(self, shard: GroupCoordinatorShard) -> None:
        """Answer the requests parked in the shard (NOT_COORDINATOR) and drop its state. The
        answers go at once: they wait for no record, and this broker may write none."""
        self.retired_rebalances[0] += shard.completed_rebalances
        self.retired_rebalances[1] += shard.consumer_group_rebalances
        self._running = True
        try:
            shard.unload()
        except Exception:
            log.exception("unloading the group coordinator of %s-%d failed", OFFSETS_TOPIC, shard.partition)
        finally:
            self._running = False
            shard.drain_batches()
            answers, self._answers = self._answers, []
        for pending, body in answers:
            pending.complete(body)

    def _load(self, partition: Partition) -> int:
        shard = GroupCoordinatorShard(partition.index, self.config(), now_ms, topic_exists=self._topic_exists,
                                      topic_name_for_id=self._topic_name_for_id,
                                      topic_id_for_name=self._topic_id_for_name,
                                      topic_partitions=self._topic_partitions)
        records = list(self._read_records(partition))
        shard.replay(records)
        self.shards[partition.index] = shard
        self._schedule(partition.index)
        return len(records)

    @staticmethod
    def _read_records(partition: Partition) -> Any:
        """The partition's records for `GroupCoordinatorShard.replay`, oldest first: (key, value),
        a `TxnRecord` for each record of a transactional batch, a `TxnMarker` for each
        transaction marker (control batch)."""
        lg = partition.log
        offset = lg.log_start_offset
        while offset < lg.log_end_offset:
            sl = lg.read(offset, READ_CHUNK)
            if sl is None or sl.size == 0:
                break
            data = lg.read_bytes(sl)
            headers = scan_batches(data, verify_crc=False, allow_partial_tail=True)
            if not headers:
                break
            view = memoryview(data)
            for pos, h in headers:
                records = decode_records(view[pos:pos + h.size], h, verify_crc=False)
                if h.is_control:
                    for r in records:
                        commit = None if r.key is None or r.offset < offset else decode_control_key(r.key)
                        if commit is not None and h.producer_id >= 0:
                            yield TxnMarker(h.producer_id, commit)
                    continue
                txn = h.is_transactional and h.producer_id >= 0
                for r in records:
                    if r.offset >= offset and r.key is not None:
                        yield TxnRecord(r.key, r.value, h.producer_id) if txn else (r.key, r.value)
            offset = headers[-1][1].next_offset

    def _topic_name_for_id(self, topic_id: bytes) -> str | None:
        return next((t.name for t in self.broker.topics.values() if t.topic_id.bytes == topic_id), None)

    def _topic_id_for_name(self, name: str) -> bytes | None:
        t = self.broker.topics.get(name)
        return t.topic_id.bytes if t is not None else None

    def _topic_partitions(self, name: str) -> int | None:
        t = self.broker.topics.get(name)
        return len(t.partitions) if t is not None else None

    def _topic_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.topics.get(topic)
        return t is not None and partition in t.partitions

    # -- routing --------------------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def shard_for(self, group_id: str) -> GroupCoordinatorShard | None:
        return self.shards.get(self.partition_of(group_id))

    async def coordinator_for(self, group_id: str, listener: str) -> tuple[int, str, int] | None:
        broker = self.broker
        if OFFSETS_TOPIC not in broker.topics and not await self.ensure_topic(cap_to_live=not broker.zk_mode):
            return None
        index = self.partition_of(group_id)
        if index in self.shards:
            endpoints = broker.endpoints(listener)
            if not endpoints:
                return None
            node_id, host, port, _ = endpoints[0]
            return node_id, host, port
        state = broker.cluster.state(OFFSETS_TOPIC, index)
        if state is None or state.leader < 0 or state.leader == broker.node_id:
            return None
        ep = broker.cluster.endpoint(state.leader, listener)
        return None if ep is None else (state.leader, ep[0], ep[1])

    # -- running operations -------------------------------------------------------------------

    def execute(self, shard: GroupCoordinatorShard, op: Callable[[Callable[[Any], None]], None]) -> Pending:
        """Run `op(respond)` on `shard` now; a Pending of what it passes to `respond` (now, or
        during a later operation for a JoinGroup or SyncGroup that waits for the rest of its
        group), completed once the records of the operation that answered are replicated. An
        exception from `op`, or from appending its records, fails the Pending."""
        pending = Pending()

        def respond(body: Any) -> None:
            if self._running:
                self._answers.append((pending, body))
            else:  # (not during an operation: nothing was written for it)
                pending.complete(body)

        error = self._run(shard, lambda: op(respond))
        if error is not None:
            pending.fail(error)
        return pending

    def _run(self, shard: GroupCoordinatorShard, fn: Callable[[], object]) -> Exception | None:
        """`fn()` on the shard, then its records appended and the answers it gave released
        (once replicated; failed with the error if the append fails). Returns the exception of
        either step, if any."""
        error: Exception | None = None
        self._running = True
        try:
            fn()
        except Exception as e:
            error = e
        finally:
            self._running = False
        try:
            required = self.commit(shard)
        except Exception as e:  # not appended (leadership lost under it): every answer fails
            answers, self._answers = self._answers, []
            for pending, _ in answers:
                pending.fail(e)
            return error or e
        answers, self._answers = self._answers, []
        if answers:
            self._release(shard.partition, required, answers)
        return error

    def commit(self, shard: GroupCoordinatorShard) -> int | None:
        """Append what the shard produced and re-arm its timer.

        Returns the offset the partition's high watermark must reach before the answers may go
        out (every record written so far is on every in-sync replica: Kafka's acks=all for group
        writes; also after an operation that wrote nothing, as Kafka defers a write's answer
        behind earlier writes), or None when there is nothing to wait for."""
        batches = shard.drain_batches()
        required = None
        for i, batch in enumerate(batches):
            try:
                self._append(shard.partition, batch.records, batch)
            except Exception:
                for unwritten in batches[i:]:
                    shard.revert_txn_batch(unwritten)
                raise
        partition = self.broker.replicas.get(OFFSETS_TOPIC, shard.partition)
        if partition is not None and partition.is_leader and partition.hw < partition.log.log_end_offset:
            required = partition.log.log_end_offset
        self._schedule(shard.partition)
        return required

    def _release(self, index: int, required: int | None, answers: list[tuple[Pending, Any]]) -> None:
        partition = self.broker.replicas.get(OFFSETS_TOPIC, index)
        if required is None or partition is None:
            for pending, body in answers:
                pending.complete(body)
            return
        timeout_ms = int(self.broker.config.get("offsets.commit.timeout.ms"))
        self.broker.purgatory.try_complete_else_watch(DelayedGroupWrite(timeout_ms, partition, required, answers),
                                                      [partition])

    def _append(self, index: int, records: list[tuple[bytes, bytes | None]], batch: OutBatch | None = None) -> None:
        """Append `records` as one batch: plain, or transactional of `batch`'s producer."""
        partition = self.broker.replicas.get(OFFSETS_TOPIC, index)
        if partition is None or not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{index} is not led here")
        ts = now_ms()
        if batch is not None and batch.producer_id >= 0:
            buf = bytearray(build_batch([(k, v, [], ts) for k, v in records], producer_id=batch.producer_id,
                                        producer_epoch=batch.producer_epoch, base_sequence=-1, transactional=True))
        else:
            buf = bytearray(build_batch([(k, v, [], ts) for k, v in records]))
        outcome = partition.append(buf, scan_batches(buf), log_append_time=False)
        if outcome.error != 0:
            raise KafkaError(outcome.error, outcome.message)

    def _schedule(self, index: int) -> None:
        old = self.timers.pop(index, None)
        if old is not None:
            old.cancel()
        shard = self.shards.get(index)
        loop = self.broker.loop
        if shard is None or loop is None:
            return
        deadline = shard.next_deadline()
        if deadline is not None:
            delay = max(0.0, (deadline - now_ms()) / 1000)
            self.timers[index] = loop.call_later(delay, self._tick, index)

    def _tick(self, index: int) -> None:
        self.timers.pop(index, None)
        shard = self.shards.get(index)
        if shard is None:
            return
        error = self._run(shard, shard.tick)
        if error is not None:
            log.error("group coordinator tick failed on partition %d", index, exc_info=error)
            self._schedule(index)

    # -- transactions ---------------------------------------------------------------------------

    def on_txn_marker(self, index: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A transaction marker of `producer_id` was appended to `__consumer_offsets-<index>`
        (this broker leads it): its pending transactional offset commits become committed
        (`commit`) or are dropped (Kafka's GroupCoordinator.onTransactionCompleted). Writes
        nothing; without a shard for the partition (not loaded yet) there is nothing to do: the
        load replays the marker from the log."""
        shard = self.shards.get(index)
        if shard is None:
            return
        log.debug("%s %s-%d: transaction of producer %d (epoch %d) %s", "marker", OFFSETS_TOPIC, index,
                  producer_id, producer_epoch, "committed" if commit else "aborted")
        error = self._run(shard, lambda: shard.complete_txn(producer_id, commit))
        if error is not None:
            log.error("completing the transaction of producer %d on %s-%d failed", producer_id, OFFSETS_TOPIC,
                      index, exc_info=error)

    def rebalances(self) -> tuple[int, int]:
        """Rebalances completed since the start by the shards here (classic groups that became
        Stable, consumer groups' epoch bumps), those of shards since unloaded included."""
        shards = list(self.shards.values())
        return (self.retired_rebalances[0] + sum(s.completed_rebalances for s in shards),
                self.retired_rebalances[1] + sum(s.consumer_group_rebalances for s in shards))

    def shutdown(self) -> None:
        for t in self.timers.values():
            t.cancel()
        self.timers.clear()


class DelayedGroupWrite(DelayedOperation):
    """Answers of group operations waiting until `__consumer_offsets-N` is replicated up to
    `required` (or until this broker stops leading it: the answers then go as they are, and
    the client finds the new coordinator on its next request). At `offsets.commit.timeout.ms`
    they go out too, the records staying in the log to replicate."""

    __slots__ = ("answers", "partition", "required")

    def __init__(self, timeout_ms: int, partition: Partition, required: int,
                 answers: list[tuple[Pending, Any]]) -> None:
        super().__init__(timeout_ms)
        self.partition = partition
        self.required = required
        self.answers = answers

    def try_complete(self) -> bool:
        p = self.partition
        return not p.is_leader or p.hw >= self.required

    def on_complete(self) -> None:
        if self.expired:
            log.warning("%s: group records not replicated within offsets.commit.timeout.ms", self.partition)
        for pending, body in self.answers:
            pending.complete(body)

    def on_failure(self, error: Exception) -> None:
        for pending, _ in self.answers:
            pending.fail(error)
