"""The transaction coordinator: the transactional ids of the `__transaction_state` partitions this
broker leads, their writes, markers and timers (Kafka's TransactionCoordinator,
TransactionStateManager and TransactionMarkerChannelManager).

Where an id lives: partition abs(javaHash(id)) % transaction.state.log.num.partitions of the
compacted internal topic `__transaction_state` (Kafka's rule; FindCoordinator key_type 1 names
that partition's leader). The topic is created as `__consumer_offsets` is: at start-up on a
single embedded-store broker, on the first FindCoordinator in a ZooKeeper cluster once
`transaction.state.log.replication.factor` brokers are alive.

Each led partition has a `TxnShard` (coordinator/transactions.py), rebuilt by replaying the
partition's log when this broker becomes its leader, dropped when it stops leading. Its
coordinator epoch is the partition's leader epoch: markers carry it, so a partition refuses
the markers of a deposed coordinator.

A change is decided by a pure function of the state machine, appended to the partition's log
as one record, installed in the shard at once (the next request sees it), and answered once
the high watermark passes it (acks=all, `transaction.state.log.min.isr`); Kafka's error
mapping: a lost leadership is NOT_COORDINATOR, too few in-sync replicas or a timeout
COORDINATOR_NOT_AVAILABLE.

Ending a transaction (EndTxn, a fencing InitProducerId, the timeout abort) writes
PrepareCommit/PrepareAbort, answers, then sends the markers: WriteTxnMarkers to the leader of
each partition in the transaction (in process when that is this broker), retried until each
is written or its topic is gone; then CompleteCommit/CompleteAbort is written. A coordinator
that takes over a partition with transactions in Prepare* sends their markers again, so a
commit interrupted by a crash completes everywhere.

KIP-890 part 1: a partition leader asks `verify` before the first transactional append of a
producer to a partition (AddPartitionsToTxn v4+ VerifyOnly when the coordinator is elsewhere);
with transaction version 2 (`add=True`) the coordinator adds the partition itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Protocol

from samsa.config import BrokerConfig
from samsa.coordinator import transactions as tx
from samsa.coordinator.records import partition_for
from samsa.coordinator.transactions import TopicPartition, TxnMetadata, TxnShard, TxnState
from samsa.coordinator.txn_records import encode_key, encode_value
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import build_batch, iter_all_records, scan_batches
from samsa.ratelimit import RateLimitedLog
from samsa.server.admin import AdminManager
from samsa.server.cluster import ClusterView
from samsa.server.producer_ids import ProducerIdManager
from samsa.server.purgatory import DelayedOperation, Purgatory
from samsa.server.replica_fetcher import Connection, FetcherHost, connect_broker
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.responses import Pending
from samsa.server.topics import Topic

log = logging.getLogger("samsa.transactions")
_marker_log = RateLimitedLog(log, interval_s=10.0)

TXN_TOPIC = "__transaction_state"
TXN_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "unclean.leader.election.enable": "false"}
READ_CHUNK = 16 << 20
MARKER_RETRY_S = 0.1
WRITE_TXN_MARKERS = 27
ADD_PARTITIONS_TO_TXN = 24
RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.NETWORK_EXCEPTION})


def now_ms() -> int:
    return int(time.time() * 1000)


class TxnHost(FetcherHost, Protocol):
    """What the transaction coordinator uses of its broker."""

    zk_mode: bool
    topics: dict[str, Topic]
    replicas: ReplicaManager
    admin: AdminManager
    producer_ids: ProducerIdManager

    @property
    def purgatory(self) -> Purgatory: ...

    @property
    def cluster(self) -> ClusterView: ...

    def topic_ready(self, name: str) -> bool: ...

    def endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]: ...


# The in-process writer of markers (server/txn_markers.py, set by the broker): one marker, as a
# WriteTxnMarkers request has it -> {(topic, partition): error} once written and replicated.
LocalMarkerWriter = Callable[[dict[str, Any]], Awaitable[dict[TopicPartition, ErrorCode]]]


class TransactionManager:
    def __init__(self, broker: TxnHost) -> None:
        self.broker = broker
        self.shards: dict[int, TxnShard] = {}
        self.num_partitions = int(broker.config.get("transaction.state.log.num.partitions"))
        self.channels = BrokerChannels(broker)
        self.write_local_markers: LocalMarkerWriter | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sending: set[tuple[int, str]] = set()  # (shard, transactional id) whose markers are in flight
        self._timers: list[asyncio.TimerHandle] = []

    @property
    def config(self) -> BrokerConfig:
        return self.broker.config

    # -- start-up, leadership ---------------------------------------------------------------------

    async def startup(self) -> None:
        """Single node: create `__transaction_state` now; a cluster creates it on first use."""
        broker = self.broker
        if broker.zk_mode or TXN_TOPIC in broker.topics:
            return
        await self.ensure_topic(cap_to_live=True)
        await broker.cluster.wait_until(lambda: broker.topic_ready(TXN_TOPIC), 30)

    async def ensure_topic(self, cap_to_live: bool = False) -> bool:
        broker = self.broker
        if TXN_TOPIC in broker.topics:
            return True
        rf = int(self.config.get("transaction.state.log.replication.factor"))
        live = len(broker.admin.live_brokers())
        if cap_to_live:
            rf = min(rf, live)
        elif live < rf:
            log.warning("Cannot create %s yet: transaction.state.log.replication.factor=%d but %d brokers are "
                        "alive", TXN_TOPIC, rf, live)
            return False
        min_isr = min(int(self.config.get("transaction.state.log.min.isr")), rf)
        configs = dict(TXN_TOPIC_CONFIGS, **{
            "segment.bytes": str(self.config.get("transaction.state.log.segment.bytes")),
            "min.insync.replicas": str(min_isr)})
        try:
            await broker.admin.create_topic(TXN_TOPIC, self.num_partitions, rf, configs)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("Could not create %s: %s", TXN_TOPIC, e.message)
        return False

    def start_timers(self, loop: asyncio.AbstractEventLoop) -> None:
        abort_every = int(self.config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        expire_every = int(self.config.get("transaction.remove.expired.transaction.cleanup.interval.ms"))

        def every(interval_ms: int, fn: Callable[[], None]) -> None:
            def tick() -> None:
                try:
                    fn()
                except Exception:
                    log.exception("transaction coordinator timer failed")
                self._timers.append(loop.call_later(interval_ms / 1000, tick))
            self._timers.append(loop.call_later(interval_ms / 1000, tick))

        every(max(abort_every, 10), self.abort_timed_out)
        every(max(expire_every, 10), self.expire_ids)

    def on_role(self, partition: Partition) -> None:
        """Leadership of a `__transaction_state` partition changed: load its shard or drop it."""
        index = partition.index
        shard = self.shards.get(index)
        if partition.is_leader and (shard is None or shard.coordinator_epoch != partition.leader_epoch):
            if shard is not None:
                shard.unloaded = True
            t0 = time.monotonic()
            shard = TxnShard(index, partition.leader_epoch)
            n = 0

            def records() -> Iterable[tuple[bytes, bytes | None]]:
                nonlocal n
                for kv in _read_records(partition):
                    n += 1
                    yield kv

            shard.replay(records())
            self.shards[index] = shard
            # (one line per partition with something in it: a broker taking all 50 says little else)
            log.log(logging.INFO if n else logging.DEBUG,
                    "Coordinating transactions of %s-%d (coordinator epoch %d): loaded %d records, %d ids, in "
                    "%.0f ms", TXN_TOPIC, index, shard.coordinator_epoch, n, len(shard.txns),
                     (time.monotonic() - t0) * 1000)
            for meta in list(shard.txns.values()):  # a commit or abort the last coordinator left unfinished
                if meta.state in tx.PREPARING:
                    self._start_markers(shard, meta)
        elif not partition.is_leader and shard is not None:
            shard.unloaded = True
            del self.shards[index]
            log.log(logging.INFO if shard.txns else logging.DEBUG,
                    "No longer coordinating transactions of %s-%d (%d ids)", TXN_TOPIC, index, len(shard.txns))

    def shutdown(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        self.channels.close()

    # -- routing ------------------------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _shard(self, transactional_id: str) -> TxnShard | ErrorCode:
        """The shard of the id, or the error telling the client where to go."""
        shard = self.shards.get(self.partition_of(transactional_id))
        if shard is not None and not shard.unloaded:
            return shard
        return ErrorCode.NOT_COORDINATOR

    async def coordinator_for(self, transactional_id: str, listener: str) -> tuple[int, str, int] | None:
        broker = self.broker
        if TXN_TOPIC not in broker.topics and not await self.ensure_topic(cap_to_live=not broker.zk_mode):
            return None
        index = self.partition_of(transactional_id)
        if index in self.shards:
            endpoints = broker.endpoints(listener)
            if not endpoints:
                return None
            node_id, host, port, _ = endpoints[0]
            return node_id, host, port
        state = broker.cluster.state(TXN_TOPIC, index)
        if state is None or state.leader < 0 or state.leader == broker.node_id:
            return None
        ep = broker.cluster.endpoint(state.leader, listener)
        return None if ep is None else (state.leader, ep[0], ep[1])

    # -- writing ------------------------------------------------------------------------------------

    async def _write(self, shard: TxnShard, meta: TxnMetadata | None, transactional_id: str) -> ErrorCode:
        """Append `meta` (None: a tombstone) for the id, install it, and wait until it is
        replicated. Kafka's error mapping for the coordinator's own writes."""
        if shard.unloaded:
            return ErrorCode.NOT_COORDINATOR
        partition = self.broker.replicas.get(TXN_TOPIC, shard.partition)
        if partition is None or not partition.is_leader or partition.leader_epoch != shard.coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        topic = self.broker.topics.get(TXN_TOPIC)
        min_isr = topic.min_insync_replicas if topic is not None else 1
        if len(partition.isr) < min_isr:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        value = None if meta is None else encode_value(meta.to_value())
        buf = bytearray(build_batch([(encode_key(transactional_id), value, [], now_ms())]))
        outcome = partition.append(buf, scan_batches(buf), log_append_time=False)
        if outcome.error != ErrorCode.NONE:
            if outcome.error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
                return ErrorCode.NOT_COORDINATOR
            if outcome.error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if meta is None:
            shard.remove(transactional_id)
        else:
            shard.apply(meta)
        required = partition.log.log_end_offset
        if partition.hw >= required:
            return ErrorCode.NONE
        done = Pending()
        timeout_ms = int(self.config.get("request.timeout.ms"))
        self.broker.purgatory.try_complete_else_watch(_DelayedTxnWrite(timeout_ms, partition, required, done),
                                                      [partition])
        code: ErrorCode = await _wait(done)
        return code

    # -- InitProducerId -----------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > int(self.config.get("transaction.max.timeout.ms")):
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        shard = self._shard(transactional_id)
        if isinstance(shard, ErrorCode):
            return shard, -1, -1
        new_pid: int | None = None
        if tx.needs_new_producer_id(shard.get(transactional_id)):
            new_pid = await self.broker.producer_ids.next()
            shard = self._shard(transactional_id)  # (still ours after the wait?)
            if isinstance(shard, ErrorCode):
                return shard, -1, -1
        meta = shard.get(transactional_id)
        now = now_ms()
        if meta is None:
            assert new_pid is not None
            result: TxnMetadata | ErrorCode = tx.new_transactional_id(transactional_id, new_pid, timeout_ms, now)
        else:
            result = tx.init_producer_id(meta, timeout_ms, expected, now, new_pid)
        if isinstance(result, ErrorCode):
            return result, -1, -1
        if result.state == TxnState.PREPARE_EPOCH_FENCE:
            # The previous producer is fenced; its transaction is aborted; this one retries.
            aborting = tx.end_txn(result, result.producer_id, result.producer_epoch, False, now, from_client=False)
            if not isinstance(aborting, TxnMetadata):
                return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
            log.info("Transactional id %s: a new producer fenced epoch %d; aborting its open transaction",
                     transactional_id, meta.producer_epoch if meta is not None else -1)
            error = await self._write(shard, aborting, transactional_id)
            if error == ErrorCode.NONE:
                self._start_markers(shard, aborting)
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            return error, -1, -1
        error = await self._write(shard, result, transactional_id)
        if error != ErrorCode.NONE:
            return error, -1, -1
        log.debug("Transactional id %s: producer id %d epoch %d", transactional_id, result.producer_id,
                  result.producer_epoch)
        return ErrorCode.NONE, result.producer_id, result.producer_epoch

    # -- AddPartitionsToTxn, AddOffsetsToTxn, verification ------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition], client_tv: int | None = None) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        shard = self._shard(transactional_id)
        if isinstance(shard, ErrorCode):
            return shard
        if (shard.partition, transactional_id) in self._sending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        result = tx.add_partitions(shard.get(transactional_id), producer_id, producer_epoch, partitions, now_ms(),
                                   client_tv)
        if isinstance(result, ErrorCode):
            return result
        return await self._write(shard, result, transactional_id)

    def verify_local(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        if not transactional_id:
            return {tp: ErrorCode.INVALID_REQUEST for tp in partitions}
        shard = self._shard(transactional_id)
        if isinstance(shard, ErrorCode):
            return {tp: shard for tp in partitions}
        return tx.verify_partitions(shard.get(transactional_id), producer_id, producer_epoch, partitions)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int,
                     *, add: bool = False) -> ErrorCode:
        """KIP-890: NONE if `topic`-`partition` is (with `add`: now is) in the producer's open
        transaction; else the coordinator's error (the caller maps it for its client)."""
        tp = (topic, partition)
        index = self.partition_of(transactional_id)
        if index in self.shards:
            if add:
                return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp], client_tv=2)
            return self.verify_local(transactional_id, producer_id, producer_epoch, [tp])[tp]
        state = self.broker.cluster.state(TXN_TOPIC, index)
        if state is None or state.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": producer_epoch, "verify_only": not add,
                                  "topics": [{"name": topic, "partitions": [partition]}]}]}
        try:
            resp = await self.channels.request(state.leader, ADD_PARTITIONS_TO_TXN, 5, body, lane="verify")
        except (OSError, TimeoutError, EOFError, ConnectionError, asyncio.IncompleteReadError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if resp.error_code:
            return ErrorCode(resp.error_code)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if t.name == topic and p.partition_index == partition:
                        return ErrorCode(p.partition_error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    # -- EndTxn -------------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      client_tv: int) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        shard = self._shard(transactional_id)
        if isinstance(shard, ErrorCode):
            return shard, -1, -1
        meta = shard.get(transactional_id)
        new_pid = None
        if client_tv >= 2 and meta is not None and meta.epoch_exhausted and (
                meta.state == TxnState.ONGOING or not commit and meta.state in tx.IDLE):
            new_pid = await self.broker.producer_ids.next()
            shard = self._shard(transactional_id)
            if isinstance(shard, ErrorCode):
                return shard, -1, -1
            meta = shard.get(transactional_id)
        if (shard.partition, transactional_id) in self._sending and meta is not None \
                and meta.state not in tx.PREPARING:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        result = tx.end_txn(meta, producer_id, producer_epoch, commit, now_ms(), client_tv=client_tv,
                            new_producer_id=new_pid)
        if isinstance(result, ErrorCode):
            return result, -1, -1
        if isinstance(result, tuple):
            return result
        error = await self._write(shard, result, transactional_id)
        if error != ErrorCode.NONE:
            return error, -1, -1
        self._start_markers(shard, result)
        if result.client_tv >= 2:
            if result.next_producer_id != tx.NO_PRODUCER_ID:
                return ErrorCode.NONE, result.next_producer_id, 0
            return ErrorCode.NONE, result.producer_id, result.producer_epoch
        return ErrorCode.NONE, -1, -1

    # -- markers ------------------------------------------------------------------------------------

    def _start_markers(self, shard: TxnShard, meta: TxnMetadata) -> None:
        key = (shard.partition, meta.transactional_id)
        if key in self._sending:
            return
        self._sending.add(key)
        task = asyncio.get_running_loop().create_task(self._complete(shard, meta.transactional_id),
                                                      name=f"txn-markers-{meta.transactional_id}")
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            self._sending.discard(key)
            if not t.cancelled() and t.exception() is not None:
                log.error("Sending the markers of %s failed", meta.transactional_id, exc_info=t.exception())

        task.add_done_callback(done)

    async def _complete(self, shard: TxnShard, transactional_id: str) -> None:
        """Write the markers of a preparing transaction everywhere, then Complete*."""
        meta = shard.get(transactional_id)
        if meta is None or meta.state not in tx.PREPARING:
            return
        commit = meta.state == TxnState.PREPARE_COMMIT
        left = set(meta.partitions)
        epoch = tx.marker_epoch(meta)
        backoff = MARKER_RETRY_S
        while left:
            if shard.unloaded or shard.get(transactional_id) is not meta:
                return  # another coordinator (or a newer load of this one) takes over
            left = {tp for tp in left if tp[0] in self.broker.topics}  # (a deleted topic needs no marker)
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in left:
                st = self.broker.cluster.state(*tp)
                by_leader.setdefault(st.leader if st is not None else -1, []).append(tp)
            results = await asyncio.gather(*(self._send_markers(node, tps, meta.producer_id, epoch, commit,
                                                                shard.coordinator_epoch)
                                             for node, tps in by_leader.items()))
            fenced = False
            for res in results:
                for tp, code in res.items():
                    if code == ErrorCode.NONE or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and tp[0] not in \
                            self.broker.topics:
                        left.discard(tp)
                    elif code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED):
                        # A newer epoch or coordinator has written there: this one is stale.
                        _marker_log.warning(f"fenced:{transactional_id}", "Markers of %s refused by %s-%d: %s; "
                                            "leaving it to the newer coordinator", transactional_id, tp[0], tp[1],
                                            code.name)
                        fenced = True
                    else:
                        _marker_log.info(f"retry:{tp}", "Marker of %s for %s-%d: %s; retrying", transactional_id,
                                         tp[0], tp[1], code.name)
            if fenced:
                return
            if left:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        current = shard.get(transactional_id)
        if shard.unloaded or current is not meta:
            return
        done = tx.complete(meta, now_ms())
        error = await self._write(shard, done, transactional_id)
        if error != ErrorCode.NONE:
            log.info("Writing %s of %s: %s (the next coordinator completes it)", done.state.display,
                     transactional_id, error.name)
        else:
            log.debug("Transaction of %s %s", transactional_id, "committed" if commit else "aborted")

    async def _send_markers(self, node: int, tps: list[TopicPartition], producer_id: int, epoch: int, commit: bool,
                            coordinator_epoch: int) -> dict[TopicPartition, ErrorCode]:
        if node < 0:
            return {tp: ErrorCode.LEADER_NOT_AVAILABLE for tp in tps}
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        marker = {"producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
                  "coordinator_epoch": coordinator_epoch,
                  "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        if node == self.broker.node_id:
            writer = self.write_local_markers
            if writer is None:
                return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in tps}
            return await writer(marker)
        try:
            resp = await self.channels.request(node, WRITE_TXN_MARKERS, 1, {"markers": [marker]}, lane="markers")
        except (OSError, TimeoutError, EOFError, ConnectionError, asyncio.IncompleteReadError):
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in tps}
        out: dict[TopicPartition, ErrorCode] = {}
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    # -- timers -------------------------------------------------------------------------------------

    def abort_timed_out(self) -> None:
        """Abort every open transaction older than its timeout (its producer is fenced)."""
        now = now_ms()
        for shard in list(self.shards.values()):
            for meta in list(shard.txns.values()):
                if tx.timed_out(meta, now) and (shard.partition, meta.transactional_id) not in self._sending:
                    self._spawn(self._abort_timed_out(shard, meta))

    async def _abort_timed_out(self, shard: TxnShard, meta: TxnMetadata) -> None:
        if shard.get(meta.transactional_id) is not meta:
            return
        aborting = tx.abort_for_timeout(meta, now_ms())
        log.info("Aborting the transaction of %s (producer id %d, epoch %d): open longer than its timeout of %d ms",
                 meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.timeout_ms)
        error = await self._write(shard, aborting, meta.transactional_id)
        if error == ErrorCode.NONE:
            self._start_markers(shard, aborting)

    def expire_ids(self) -> None:
        """Forget transactional ids idle for transactional.id.expiration.ms (a tombstone)."""
        now = now_ms()
        expiration = int(self.config.get("transactional.id.expiration.ms"))
        for shard in list(self.shards.values()):
            for meta in list(shard.txns.values()):
                if tx.expired(meta, now, expiration) and (shard.partition, meta.transactional_id) not in self._sending:
                    self._spawn(self._expire(shard, meta))

    async def _expire(self, shard: TxnShard, meta: TxnMetadata) -> None:
        if shard.get(meta.transactional_id) is not meta:
            return
        if await self._write(shard, None, meta.transactional_id) == ErrorCode.NONE:
            log.info("Transactional id %s expired (unused for transactional.id.expiration.ms)", meta.transactional_id)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- describing ---------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"error_code": 0, "transactional_id": transactional_id, "transaction_state": "",
                                 "transaction_timeout": 0, "transaction_start_time": -1, "producer_id": -1,
                                 "producer_epoch": -1, "topics": []}
        if not transactional_id:
            entry["error_code"] = int(ErrorCode.INVALID_REQUEST)
            return entry
        shard = self._shard(transactional_id)
        if isinstance(shard, ErrorCode):
            entry["error_code"] = int(shard)
            return entry
        meta = shard.get(transactional_id)
        if meta is None:
            entry["error_code"] = int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            return entry
        topics: dict[str, list[int]] = {}
        for t, p in sorted(meta.partitions):
            topics.setdefault(t, []).append(p)
        entry.update(transaction_state=meta.state.display, transaction_timeout=meta.timeout_ms,
                     transaction_start_time=meta.start_ms, producer_id=meta.producer_id,
                     producer_epoch=meta.producer_epoch,
                     topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()])
        return entry

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int) -> list[dict[str, Any]]:
        now = now_ms()
        out = []
        for shard in self.shards.values():
            for meta in shard.txns.values():
                if states and meta.state.display not in states:
                    continue
                if producer_ids and meta.producer_id not in producer_ids:
                    continue
                if min_duration_ms >= 0 and (meta.state != TxnState.ONGOING or meta.start_ms < 0
                                             or now - meta.start_ms < min_duration_ms):
                    continue
                out.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                            "transaction_state": meta.state.display})
        return out


def _read_records(partition: Partition) -> Iterable[tuple[bytes, bytes | None]]:
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
        whole = headers[-1][0] + headers[-1][1].size
        for r in iter_all_records(memoryview(data)[:whole], verify_crc=False):
            if r.offset >= offset and r.key is not None:
                yield r.key, r.value
        offset = headers[-1][1].next_offset


async def _wait(pending: Pending) -> Any:
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def done(value: Any, error: BaseException | None) -> None:
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)

    pending.on_done(done)
    return await fut


class _DelayedTxnWrite(DelayedOperation):
    """A coordinator write waiting for `__transaction_state-N`'s high watermark to pass it."""

    __slots__ = ("done", "partition", "required")

    def __init__(self, timeout_ms: int, partition: Partition, required: int, done: Pending) -> None:
        super().__init__(timeout_ms)
        self.partition = partition
        self.required = required
        self.done = done

    def try_complete(self) -> bool:
        p = self.partition
        return not p.is_leader or p.hw >= self.required

    def on_complete(self) -> None:
        p = self.partition
        if not p.is_leader:
            self.done.complete(ErrorCode.NOT_COORDINATOR)
        elif p.hw >= self.required:
            self.done.complete(ErrorCode.NONE)
        else:
            self.done.complete(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def on_failure(self, error: Exception) -> None:
        self.done.complete(ErrorCode.UNKNOWN_SERVER_ERROR)


class BrokerChannels:
    """Connections to the other brokers, on the inter-broker listener, for the coordinator's
    requests: one per broker and lane ("markers", "verify": a marker waiting for its replicas
    never holds up a produce's verification), one request at a time each, reconnected on
    failure."""

    def __init__(self, broker: FetcherHost) -> None:
        self.broker = broker
        self.conns: dict[tuple[int, str], Connection] = {}
        self.locks: dict[tuple[int, str], asyncio.Lock] = {}
        self.salted: dict[tuple[str, bytes, int], bytes] = {}
        self.timeout_s = max(int(broker.config.get("request.timeout.ms")) / 1000, 1.0)

    async def request(self, node_id: int, api_key: int, version: int, body: dict[str, Any], lane: str = "") -> Any:
        key = (node_id, lane)
        lock = self.locks.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self.conns.get(key)
            if conn is None or conn.error is not None or conn.transport is None or conn.transport.is_closing():
                ep = self.broker.cluster.endpoint(node_id, self.broker.inter_broker_listener)
                conn = await connect_broker(self.broker, node_id, ep, f"samsa-txn-coordinator-{self.broker.node_id}",
                                            self.timeout_s, self.salted)
                if conn is None:
                    raise ConnectionError(f"cannot connect to broker {node_id}")
                self.conns[key] = conn
            try:
                return await conn.request(api_key, version, body, self.timeout_s)
            except BaseException:
                conn.close()
                self.conns.pop(key, None)
                raise

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
