"""Fetch (1): file slices of the log, long-polled until `min_bytes` arrive or `max_wait` passes.

A partition's data is a byte range of one segment, sent with sendfile. Limits are Kafka's:
`partition_max_bytes` per partition and `max_bytes` for the response, except that the first
partition with data returns at least its first whole batch so a consumer can always make
progress (KIP-74); a consumer's `max_bytes` is capped by the broker's `fetch.max.bytes`.
Consumers read up to the high watermark only; with `isolation_level` 1 (READ_COMMITTED) up to
the last stable offset (`Partition.last_stable_offset`: no record of an undecided transaction),
and each partition with records then carries the aborted transactions overlapping them
(`aborted_transactions`, from the segments' transaction indexes) so the consumer drops their
records. Every entry says the partition's `last_stable_offset`. A partition that never saw a
transaction costs nothing more either way: its LSO is its high watermark, and a log without
aborts answers the lookup at once.

Fetch sessions (KIP-227, `server/fetch_sessions.py`): a fetch that opens or continues a
session reads every partition of the session (those it names at their new positions, the
others where the session left them) and answers only those with news. A follower of
thousands of partitions then sends and receives a handful of entries per round trip.

A fetch with `replica_id` >= 0 comes from a follower: its fetch offset tells the leader what
it has (ISR and high watermark move, see `Partition.update_follower`), and it reads up to the
log end offset. Only the leader serves either kind (NOT_LEADER_OR_FOLLOWER); a
`current_leader_epoch` older than the leader's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.

A fetch that cannot be answered yet waits in the purgatory as a `DelayedFetch`, watched under
the partitions it waits on; no task or timer of its own. A read_committed fetch waits for the
last stable offset to move, which happens only with the high watermark or an append (a marker),
both of which wake it.

Authorization (as Kafka's): a consumer needs READ on each topic, a follower CLUSTER_ACTION on
the cluster; otherwise the partitions answer TOPIC_AUTHORIZATION_FAILED.

Versions (Kafka 3.9's: v4-v17). From v13 (KIP-516) topics are named by id, in the request and
the answer: an id no topic has is UNKNOWN_TOPIC_ID for its partitions, and a fetch session
opened with ids keys its partitions by (topic id, partition) (`fetch_sessions.py`). Inside this
module a request topic's `topic` is its key: the name, or from v13 the id (`_by_topic_id` makes
the request so). v14 would add OFFSET_MOVED_TO_TIERED_STORAGE (no tiered storage here). v15
(KIP-903) moves a follower's id into the tagged `replica_state`. v16 (KIP-951): a partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names the leader the broker knows
(`current_leader`: id and epoch), and the answer carries that leader's endpoint on the
client's listener (`node_endpoints`), so the client goes there without a Metadata round trip.
v17 (KIP-853) adds a follower's log directory id, which this broker has no use for.

A consumer under a `consumer_byte_rate` quota (`server/quotas.py`) has its response's record
bytes recorded when the answer is made; over the quota, the answer carries no data, only the
throttle time (the bytes are taken back, as Kafka does), and the dispatcher mutes the
connection. Its `max_bytes` is capped at what the quota allows in one measuring window.

Metrics (server/metrics.py): each partition a fetch reads counts once in its topic's fetch
requests (at the request's first read); the record bytes of the answer actually sent count in
its topics' bytes out (a consumer's) or replication bytes out (a follower's). A read keeps
(topic stats, bytes) of the partitions it found data in, so nothing walks the answer again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from samsa.protocol.batch import ATTR_CONTROL
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.fetch_tail import MAX_VERSION as TAIL_MAX_VERSION
from samsa.protocol.fetch_tail import FetchTailFrame
from samsa.protocol.messages import RequestHeader
from samsa.ratelimit import RateLimitedLog
from samsa.server.context import Op, Partition, RequestContext, ResourceType, TopicStats
from samsa.server.fetch_sessions import FINAL_EPOCH, FetchPlan
from samsa.server.purgatory import DelayedResponse
from samsa.storage.errors import OffsetOutOfRange, StorageError
from samsa.storage.partition_log import slice_next_offset

_storage_log = RateLimitedLog(logging.getLogger("samsa.storage"), interval_s=10.0)

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17
FIRST_TOPIC_ID_VERSION = 13  # KIP-516: topics by id
FIRST_LEADER_HINT_VERSION = 16  # KIP-951: current_leader and node_endpoints

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

_ATTRIBUTES_LOW = 22  # the low byte of a batch's attributes (int16 at 21)
_LEADER_HINT_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
_NO_HINTS: dict[int, dict[str, Any]] = {}  # (never written to)

# What `_read` returns: the topics' entries, the bytes found, the partitions with nothing to
# read yet, whether any partition had an error, (topic stats, bytes) of each partition read
# from (counted once the answer is made), and (v16+) the endpoints of the leaders it named to
# partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, by node id.
Served = list[tuple[TopicStats, int]]
ReadResult = tuple[list[dict[str, Any]], int, list[Partition], bool, Served, dict[int, dict[str, Any]]]


def _by_topic_id(req: Any) -> Any:
    """A Fetch v13+ request made as the rest of this module reads it, in place: each topic's
    (and forgotten topic's) `topic` is its id, and `replica_id` the follower's id where v15+
    puts it (`replica_state`; a consumer sends none)."""
    state = getattr(req, "replica_state", None)
    req.replica_id = state.replica_id if state is not None else getattr(req, "replica_id", -1)
    for t in req.topics:
        t.topic = t.topic_id
    for t in req.forgotten_topics_data or ():
        t.topic = t.topic_id
    return req


def handle(ctx: RequestContext, req: Any) -> Any:
    by_id = ctx.header.api_version >= FIRST_TOPIC_ID_VERSION
    if by_id:
        req = _by_topic_id(req)
    plan: FetchPlan | None = None
    consumer: RequestContext | None = None  # (whose quota the answer counts against)
    if getattr(req, "replica_id", -1) < 0:  # a consumer's response is capped by fetch.max.bytes, as in Kafka
        cap = ctx.config.get("fetch.max.bytes")
        quota = ctx.quotas.fetch
        if quota.enabled:
            consumer = ctx
            cap = max(1, min(cap, int(quota.max_value_in_window(ctx.principal, ctx.client_id))))
            if req.min_bytes > cap:
                req.min_bytes = cap
        if req.max_bytes <= 0 or req.max_bytes > cap:
            req.max_bytes = cap
    if getattr(req, "session_id", 0) or getattr(req, "session_epoch", FINAL_EPOCH) != FINAL_EPOCH:  # (v7+)
        plan = ctx.fetch_sessions.plan(req, privileged=getattr(req, "replica_id", -1) >= 0, uses_ids=by_id)
        if plan.error:
            return {"throttle_time": 0, "error_code": int(plan.error), "session_id": 0, "responses": []}
        req = _SessionRequest(req, plan.topics)
    responses, nbytes, waitable, errors, served, leaders = _read(ctx, req)
    if nbytes >= req.min_bytes or req.max_wait <= 0 or errors or not waitable:
        return _response(responses, plan, consumer, nbytes, served, getattr(req, "replica_id", -1) >= 0, leaders)
    # Watched now, before returning: an append handled before anything else runs must still
    # complete it (Kafka's tryCompleteElseWatch, whose first try is the read above).
    session_req = req
    op = DelayedFetch(req, waitable, lambda: _read(ctx, session_req, first=False), ctx.header, plan,
                      _positions(req, waitable, by_id) if plan is not None or len(waitable) > 1 else None, consumer)
    ctx.purgatory.watch(op, waitable)
    return op.pending


def _positions(req: Any, waitable: list[Partition], by_id: bool = False) -> dict[Partition, tuple[int, int]]:
    """Where the fetch waits on each partition with nothing to read yet: (fetch offset, the
    partition's leader epoch then)."""
    by_key = {(p.topic_id.bytes if by_id else p.topic, p.index): p for p in waitable}
    out: dict[Partition, tuple[int, int]] = {}
    for t in req.topics:
        for fp in t.partitions:
            p = by_key.get((t.topic, fp.partition))
            if p is not None:
                out[p] = (fp.fetch_offset, p.leader_epoch)
    return out


class _SessionRequest:
    """A fetch request as a session sees it: its own limits, the session's partitions."""

    __slots__ = ("isolation_level", "max_bytes", "max_wait", "min_bytes", "replica_id", "topics")

    def __init__(self, req: Any, topics: list[Any]) -> None:
        self.max_bytes, self.max_wait, self.min_bytes = req.max_bytes, req.max_wait, req.min_bytes
        self.replica_id = getattr(req, "replica_id", -1)
        self.isolation_level = getattr(req, "isolation_level", READ_UNCOMMITTED)
        self.topics = topics


class DelayedFetch(DelayedResponse):
    """A fetch waiting for data (Kafka's DelayedFetch), watched under the partitions it waits
    on: completed from inside the append (or high watermark move) that brings enough, before
    that produce's own response, or at `max_wait` with what there is.

    A consumer's fetch of one partition waiting at the log end is answered with the bytes the
    waking append just wrote, from memory (`FetchTailFrame`), whenever they are exactly what the
    general path would return; the general path (`read`: `_read` again) answers otherwise."""

    __slots__ = ("answer", "committed", "ctx", "fetch_offset", "hws", "leader_epoch", "max_bytes", "partition",
                 "plan", "positions", "read", "req", "tail")

    def __init__(self, req: Any, waitable: list[Partition], read: Callable[[], ReadResult], header: RequestHeader,
                 plan: FetchPlan | None = None, positions: dict[Partition, tuple[int, int]] | None = None,
                 ctx: RequestContext | None = None) -> None:
        super().__init__(req.max_wait)
        self.ctx = ctx  # a consumer's under a consumer_byte_rate quota
        self.req = req
        self.read = read
        self.plan = plan
        self.positions = positions
        self.answer: Any = None
        follower = getattr(req, "replica_id", -1) >= 0
        self.committed = not follower and getattr(req, "isolation_level", READ_UNCOMMITTED) == READ_COMMITTED
        # A follower also returns when a high watermark moves, so it learns the new one at once
        # (a leader elected later starts from it).
        self.hws = {(p.topic, p.index): p.hw for p in waitable} if follower else None
        self.tail: FetchTailFrame | None = None
        if (header.api_version <= TAIL_MAX_VERSION and not follower and plan is None and len(req.topics) == 1
                and len(req.topics[0].partitions) == 1
                and ctx is None):  # (a quota may change the answer: the general path)
            topic = req.topics[0]
            fp = topic.partitions[0]
            self.tail = FetchTailFrame(header.api_version, header.correlation_id, topic.topic, fp.partition)
            self.partition = waitable[0]
            self.fetch_offset = fp.fetch_offset
            self.leader_epoch = getattr(fp, "current_leader_epoch", -1)
            self.max_bytes = min(fp.partition_max_bytes, req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF)

    def try_complete(self) -> bool:
        # Runs inside whatever woke it (a produce's append); the purgatory keeps its exceptions
        # from escaping into that (this fetch's connection closes, logged there).
        tail = self.tail
        if tail is not None:
            # The batch the waking append just wrote, when that is exactly what `_read` would
            # return: at this fetch's offset, the high watermark now at the append's end, the
            # batch within the byte limits, no transaction undecided (the LSO is the high
            # watermark) and, read_committed, not a marker (whose abort the answer would name).
            # The bytes come from memory, already in the log: no read back, no general encoder.
            partition = self.partition
            appended = partition.just_appended
            if (appended is not None and appended[0] == self.fetch_offset and appended[1] == partition.hw
                    and self.req.min_bytes <= len(appended[2]) <= self.max_bytes and partition.is_leader
                    and (self.leader_epoch < 0 or self.leader_epoch == partition.leader_epoch)
                    and not partition.log.producers.has_unstable
                    and not (self.committed and appended[2][_ATTRIBUTES_LOW] & ATTR_CONTROL)):
                self.answer = tail.encode(partition.hw, partition.log.log_start_offset, appended[2])
                partition.stats.bytes_out += len(appended[2])
                return True
        # Otherwise (or fenced meanwhile) the general path: what `_read` finds now.
        responses, nbytes, waitable, errors, served, leaders = self.read()
        done = nbytes >= self.req.min_bytes or errors or not waitable
        if not done and self.hws is not None:
            done = any(p.hw != self.hws.get((p.topic, p.index), p.hw) for p in waitable)
        if done:
            self.answer = _response(responses, self.plan, self.ctx, nbytes, served, self.hws is not None, leaders)
        return bool(done)

    def try_complete_on(self, key: Any) -> bool:
        """After a change of one partition, with `positions` (a fetch of many partitions: a
        session's are thousands, and reading them all at every append made each append cost
        the whole session): only that partition is looked at. New data at its position, a new
        high watermark for a follower, or a new role: then the whole read, or, with min_bytes
        1, straight to completion (which reads)."""
        positions = self.positions
        where = None if positions is None else positions.get(key)
        if where is None:
            return self.try_complete()
        offset, epoch = where
        p = key
        if not p.is_leader or p.leader_epoch != epoch:
            return self.try_complete()  # (the read answers with the partition's error)
        hws = self.hws
        if hws is not None:  # a follower: up to the log end, and told of a new high watermark
            news = p.log.log_end_offset > offset or p.hw != hws.get((p.topic, p.index), p.hw)
        else:
            news = (p.last_stable_offset if self.committed else p.hw) > offset
        if not news:
            return False
        return self.req.min_bytes <= 1 or self.try_complete()

    def on_complete(self) -> None:
        answer = self.answer
        if answer is None:  # expired: what there is now
            responses, nbytes, _, _, served, leaders = self.read()
            answer = _response(responses, self.plan, self.ctx, nbytes, served, self.hws is not None, leaders)
        self.pending.complete(answer)


def _response(responses: list[dict[str, Any]], plan: FetchPlan | None = None, ctx: RequestContext | None = None,
              nbytes: int = 0, served: Served | None = None, follower: bool = False,
              leaders: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    if ctx is not None and nbytes:  # a consumer under a quota
        quota = ctx.quotas.fetch
        ms = quota.record(ctx.principal, ctx.client_id, nbytes)
        if ms:  # over the quota: no data, only the time to wait (Kafka's throttled response)
            quota.unrecord(ctx.principal, ctx.client_id, nbytes)
            session = plan.session_id if plan is not None and plan.incremental else 0
            return {"throttle_time": ms, "error_code": 0, "session_id": session, "responses": []}
    if served:
        if follower:
            for stats, size in served:
                stats.replication_bytes_out += size
        else:
            for stats, size in served:
                stats.bytes_out += size
    if plan is None:
        out = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}
    else:
        out = {"throttle_time": 0, "error_code": 0, "session_id": plan.session_id,
               "responses": plan.answer(responses)}
    if leaders:  # (v16+)
        out["node_endpoints"] = sorted(leaders.values(), key=lambda e: e["node_id"])
    return out


def _read(ctx: RequestContext, req: Any, first: bool = True) -> ReadResult:
    budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    replica_id = getattr(req, "replica_id", -1)
    follower = replica_id >= 0
    committed = not follower and getattr(req, "isolation_level", READ_UNCOMMITTED) == READ_COMMITTED
    version = ctx.header.api_version
    by_id = version >= FIRST_TOPIC_ID_VERSION
    hints: dict[int, dict[str, Any]] | None = {} if version >= FIRST_LEADER_HINT_VERSION else None
    live = ctx.cluster.brokers.__contains__
    replicas = ctx.replicas
    total = 0
    errors = False
    waitable = []
    responses = []
    served: Served = []
    secured = ctx.authorizer is not None
    cluster_action = secured and follower and ctx.authorize_cluster(Op.CLUSTER_ACTION)
    for t in req.topics:
        parts: list[dict[str, Any]] = []
        key = t.topic  # the name, or from v13 the id
        name = ctx.topic_name(key) if by_id else key
        responses.append({"topic": key, "topic_id": key, "partitions": parts} if by_id
                         else {"topic": key, "partitions": parts})
        if name is None:  # an id no topic has
            errors = True
            parts += [_part(fp.partition, ErrorCode.UNKNOWN_TOPIC_ID) for fp in t.partitions]
            continue
        if secured and not (cluster_action if follower else ctx.authorize(Op.READ, ResourceType.TOPIC, name)):
            errors = True
            parts += [_part(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for fp in t.partitions]
            continue
        for fp in t.partitions:
            partition = replicas.get(name, fp.partition)
            if partition is None:
                errors = True
                topics = ctx.topics
                known = name in topics and fp.partition in topics[name].partitions
                code = replicas.missing(name, fp.partition, known)
                parts.append(part := _part(fp.partition, code))
                if hints is not None and code in _LEADER_HINT_ERRORS:
                    _leader_hint(ctx, name, fp.partition, part, hints)
                continue
            if first:
                partition.stats.fetch_requests += 1
            try:
                partition.check_leader(getattr(fp, "current_leader_epoch", -1))
            except KafkaError as e:
                errors = True
                parts.append(part := _part(fp.partition, e.code))
                if hints is not None and e.code in _LEADER_HINT_ERRORS:
                    _leader_hint(ctx, name, fp.partition, part, hints)
                continue
            if follower and first:
                partition.update_follower(replica_id, fp.fetch_offset, live, getattr(fp, "log_start_offset", -1))
            hw = partition.high_watermark
            lso = partition.last_stable_offset
            log = partition.log
            entry = _part(fp.partition, ErrorCode.NONE, hw, log.log_start_offset, lso)
            limit = min(fp.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                parts.append(entry)
                continue
            try:
                sl = log.read(fp.fetch_offset, max(limit, 0),
                              max_offset=None if follower else lso if committed else hw, min_one_batch=(total == 0))
            except OffsetOutOfRange:
                errors = True
                # A consumer gets no offsets with the error, as from Kafka (it asks ListOffsets);
                # a Samsa follower is told the leader's log start, to restart its log there.
                parts.append(_part(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, hw, log.log_start_offset) if follower
                             else _part(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            except StorageError as e:  # damaged bytes where the read must go: an error, never a skip
                errors = True
                _storage_log.error(f"read {name}-{fp.partition}", "Cannot read %s-%d at offset %d: %s",
                                   name, fp.partition, fp.fetch_offset, e)
                parts.append(_part(fp.partition, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            except OSError as e:
                errors = True
                _storage_log.error(f"read {name}-{fp.partition}", "Cannot read %s-%d: %s", name, fp.partition, e)
                partition.storage_error(e)
                parts.append(_part(fp.partition, ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            if sl is not None and sl.size > 0:
                entry["records"] = sl
                total += sl.size
                served.append((partition.stats, sl.size))
                if committed:
                    entry["aborted_transactions"] = [
                        {"producer_id": pid, "first_offset": first}
                        for pid, first in log.collect_aborted_transactions(
                            fp.fetch_offset, min(lso, slice_next_offset(sl)) if log.has_aborted_transactions else lso)]
            else:
                waitable.append(partition)
            parts.append(entry)
    return responses, total, waitable, errors, served, hints or _NO_HINTS


def _leader_hint(ctx: RequestContext, topic: str, index: int, part: dict[str, Any],
                 hints: dict[int, dict[str, Any]]) -> None:
    """KIP-951 (v16+): the leader this broker knows of, in the partition's entry, and its
    endpoint on the client's listener among the answer's node endpoints (nothing when the
    leader is unknown, not live or has no such listener, as Kafka answers)."""
    state = ctx.cluster.state(topic, index)
    if state is None or state.leader < 0:
        return
    leader = state.leader
    if leader not in hints:
        if leader == ctx.node_id:
            own = ctx.endpoints(ctx.listener)
            if not own:
                return
            _, host, port, rack = own[0]
        else:
            info = ctx.cluster.brokers.get(leader)
            endpoint = info.endpoints.get(ctx.listener) if info is not None else None
            if info is None or endpoint is None:
                return
            (host, port), rack = endpoint, info.rack
        hints[leader] = {"node_id": leader, "host": host, "port": port, "rack": rack}
    part["current_leader"] = {"leader_id": leader, "leader_epoch": state.leader_epoch}


def _part(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1, lso: int | None = None) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": int(code),
        "high_watermark": hw,
        "last_stable_offset": hw if lso is None else lso,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
