"""Followers: one fetcher per leader broker copies the leader's log, batch for batch.

How it works (Kafka's ReplicaFetcherThread, as one asyncio task per leader): the fetcher
keeps one connection to the leader and, for the partitions it follows there, loops:

1. Truncate. A partition that just became a follower (new leader or new leader epoch) asks
   the leader with OffsetForLeaderEpoch where its own latest epoch ends on the leader, and
   truncates its log there, so records a deposed leader wrote but never replicated are
   dropped rather than kept (KIP-101/KIP-279). Without an epoch it truncates to its high
   watermark.
2. Fetch with `replica_id` = this broker, from each log end offset. The leader learns from
   that offset what the follower has (ISR, high watermark) and answers with record batches
   up to its own log end offset; they are appended as they are (offsets and leader epochs
   set by the leader), the follower's high watermark becomes min(leader HW, its LEO), and
   its log start offset follows the leader's.

Errors: NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_* pause the partition briefly
(the store will say who leads now); OFFSET_OUT_OF_RANGE below the leader's log start restarts
the log there, above it truncates again; a broken connection reconnects with backoff.

A partition whose log is being swapped for its copy in another log dir (`swapping_log`,
server/alter_log_dirs.py) is paused the same way: what was fetched for it meanwhile is dropped
and fetched again.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from samsa.config import BrokerConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import FrameError, FrameSplitter
from samsa.protocol.messages import decode_response, encode_request
from samsa.protocol.records import InvalidRecords, scan_batches
from samsa.ratelimit import RateLimitedLog
from samsa.server import sasl_client
from samsa.server.replica_manager import Partition
from samsa.storage.errors import StorageError


class Endpoints(Protocol):
    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None: ...


class FetcherHost(Protocol):
    """What the replica fetchers use of their broker."""

    node_id: int
    config: BrokerConfig
    inter_broker_listener: str
    inter_broker_ssl: ssl.SSLContext | None  # the inter-broker listener's TLS (None: plaintext)
    inter_broker_sasl: sasl_client.SaslLogin | None  # what it logs in with on a SASL listener
    loop: asyncio.AbstractEventLoop

    @property
    def cluster(self) -> Endpoints: ...

    def topic_config(self, topic: str, key: str) -> object: ...

log = logging.getLogger("samsa.replication")
_auth_log = RateLimitedLog(log, 30.0)

FETCH_VERSION = 12
EPOCH_VERSION = 4
PAUSE_S = 0.2
NO_THROTTLE = 2**63 - 1  # the rate configs default to Long.MAX_VALUE: no throttle
THROTTLE_RECHECK_S = 0.5  # a throttled follower's wait reads the rate again this often
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID}


@dataclass(eq=False)
class Followed:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    paused_until: float = 0.0


class LeaderGone(Exception):
    pass


Position = tuple[int, int, int, int]  # (fetch offset, leader epoch, log start offset, max bytes)


@dataclass
class FetchSessionState:
    """This fetcher's side of a fetch session with its leader (KIP-227, `fetch_sessions.py`):
    after one full fetch, each fetch names only the partitions whose position changed, and
    the ones that left (forgotten); the leader answers only what has news."""

    session_id: int = 0
    epoch: int = 0  # 0: the next fetch is a full one, opening a session (closing `session_id`'s)
    sent: dict[tuple[str, int], Position] = field(default_factory=dict)

    def request(self, wanted: dict[tuple[str, int], Position]) -> tuple[int, int, dict[tuple[str, int], Position],
                                                                        list[tuple[str, int]]]:
        """(session id, epoch, partitions to name, partitions to forget) for the next fetch."""
        if self.epoch == 0:
            return self.session_id, 0, dict(wanted), []
        changed = {k: v for k, v in wanted.items() if self.sent.get(k) != v}
        return self.session_id, self.epoch, changed, [k for k in self.sent if k not in wanted]

    def answered(self, session_id: int, epoch: int, named: dict[tuple[str, int], Position],
                 forgotten: list[tuple[str, int]]) -> None:
        if epoch == 0:
            self.sent = {}
            if session_id == 0:  # the leader keeps no session for us: full fetches, each opening one
                self.session_id = 0
                return
            self.session_id, self.epoch = session_id, 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < 0x7FFFFFFF else 1
        self.sent.update(named)
        for k in forgotten:
            self.sent.pop(k, None)

    def reset(self) -> None:
        """Start again with a full fetch (closing the old session on the leader, if any)."""
        self.epoch = 0
        self.sent = {}


class Connection(asyncio.BufferedProtocol):
    """One request at a time to the leader, with our own codecs. The leader's responses are
    received straight into the frame splitter's buffer: the rest of a large fetch response
    goes from the socket into the bytearray it is decoded from, with no copy on the way."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.reauth_at = 0.0  # when to authenticate again (KIP-368; 0: never)
        self.correlation_id = 0
        self.frames = FrameSplitter()
        self.transport: asyncio.Transport | None = None
        self.ready: deque[bytearray] = deque()  # whole responses not yet asked for
        self.error: BaseException | None = None  # why the connection ended, once it has
        self.waiter: asyncio.Future[None] | None = None

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
        assert self.transport is not None
        if self.error is not None or self.transport.is_closing():
            # uvloop raises RuntimeError on a write to a closed transport: say what it is
            raise self.error or ConnectionResetError("the connection to the leader is closed")
        self.correlation_id += 1
        self.transport.write(bytes(encode_request(api_key, version, self.correlation_id, self.client_id, body)))
        frame = await asyncio.wait_for(self._next_frame(), timeout)
        cid, msg = decode_response(api_key, version, frame)
        if cid != self.correlation_id:
            raise ConnectionError(f"response {cid} to request {self.correlation_id}")
        return msg

    async def _next_frame(self) -> bytearray:
        while not self.ready:
            if self.error is not None:
                raise self.error
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.ready.popleft()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.BufferedProtocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        frames = self.frames
        frames.advance(nbytes)
        try:
            while (frame := frames.next_frame()) is not None:
                self.ready.append(frame)
        except FrameError as e:  # raised to the fetcher, as readexactly's ValueError was
            self._end(e)
            self.close()
            return
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        # EOF mid-response raises what StreamReader.readexactly raised
        self._end(exc if exc is not None else asyncio.IncompleteReadError(b"", None))

    def _end(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _reauth_time(lifetime_ms: int) -> float:
    """When to re-authenticate a session of `lifetime_ms`: at 85% of it, as Kafka's clients
    (with a long fetch wait still ahead, a later start could miss the end)."""
    return time.monotonic() + 0.85 * lifetime_ms / 1000 if lifetime_ms > 0 else 0.0


async def connect_broker(broker: FetcherHost, node_id: int, ep: tuple[str, int] | None, client_id: str,
                         timeout_s: float, salted: dict[tuple[str, bytes, int], bytes]) -> Connection | None:
    """A connection to broker `node_id` at `ep` on the inter-broker listener, with its TLS and
    SASL login (the replica fetchers, the transaction coordinator's markers); None if it cannot
    be made now (said in the log when TLS or SASL refused it)."""
    if ep is None:
        return None
    conn = Connection(client_id)
    tls = broker.inter_broker_ssl
    try:
        await asyncio.wait_for(asyncio.get_running_loop().create_connection(
            lambda: conn, *ep, ssl=tls, server_hostname=ep[0] if tls is not None else None), 5)
    except (TimeoutError, OSError) as e:  # (ssl.SSLError is an OSError)
        if isinstance(e, ssl.SSLError):
            log.warning("TLS to broker %d (%s:%d) failed: %s", node_id, ep[0], ep[1], e)
        return None
    login = broker.inter_broker_sasl
    if login is not None:
        try:
            lifetime_ms = await sasl_client.authenticate(conn.request, login, timeout_s, salted)
        except sasl_client.SaslClientError as e:
            _auth_log.warning(f"sasl:{node_id}", "SASL %s authentication as %s to broker %d (%s:%d) "
                              "failed: %s", login.mechanism, login.username, node_id, ep[0], ep[1], e)
            conn.close()
            return None
        except (TimeoutError, OSError, EOFError, ConnectionError, asyncio.IncompleteReadError):
            conn.close()
            return None
        conn.reauth_at = _reauth_time(lifetime_ms)
    return conn


class LeaderFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.parts: dict[tuple[str, int], Followed] = {}
        self.changed = asyncio.Event()
        self.stopped = False
        self.session = FetchSessionState()
        self.task = manager.broker.loop.create_task(self.run(), name=f"fetcher-{leader_id}")

    def stop(self) -> None:
        self.stopped = True
        self.task.cancel()

    async def run(self) -> None:
        backoff = 0.05
        while not self.stopped:
            if not self.parts:
                self.changed.clear()
                await self.changed.wait()
                continue
            conn = await self._connect()
            if conn is None:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            self.session.reset()  # a new connection starts a new session
            try:
                while not self.stopped and self.parts:
                    if conn.reauth_at and time.monotonic() >= conn.reauth_at:
                        await self._reauthenticate(conn)
                    await self._truncate(conn)
                    if not await self._fetch(conn):
                        self.changed.clear()
                        try:
                            await asyncio.wait_for(self.changed.wait(), PAUSE_S)
                        except TimeoutError:
                            pass
            except (TimeoutError, OSError, EOFError, ConnectionError, asyncio.IncompleteReadError) as e:
                log.info("Replica fetcher to broker %d: %s; reconnecting", self.leader_id, type(e).__name__)
                await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Replica fetcher to broker %d failed; restarting it", self.leader_id)
                await asyncio.sleep(1.0)
            finally:
                conn.close()

    async def _connect(self) -> Connection | None:
        manager = self.manager
        return await connect_broker(manager.broker, self.leader_id, manager.endpoint(self.leader_id),
                                    f"samsa-replica-fetcher-{manager.broker.node_id}", manager.timeout_s,
                                    manager.salted)

    async def _reauthenticate(self, conn: Connection) -> None:
        """KIP-368: the leader limits sessions (connections.max.reauth.ms): authenticate again on
        the connection before its session ends (a failure ends the connection)."""
        login = self.manager.broker.inter_broker_sasl
        assert login is not None
        try:
            lifetime_ms = await sasl_client.authenticate(conn.request, login, self.manager.timeout_s,
                                                         self.manager.salted)
        except sasl_client.SaslClientError as e:
            raise ConnectionError(f"re-authentication to broker {self.leader_id} failed: {e}") from None
        conn.reauth_at = _reauth_time(lifetime_ms)

    # -- truncation ---------------------------------------------------------------------------

    async def _truncate(self, conn: Connection) -> None:
        f: Followed | None
        todo = [f for f in self.parts.values() if f.truncating and f.paused_until <= time.monotonic()]
        if not todo:
            return
        asks: dict[str, list[dict[str, int]]] = {}
        for f in todo:
            p = f.partition
            latest = p.log.leader_epochs.latest_epoch()
            if latest is None:
                self._truncate_to(f, p.hw, "no leader epoch")
                continue
            asks.setdefault(p.topic, []).append(
                {"partition": p.index, "current_leader_epoch": f.leader_epoch, "leader_epoch": latest})
        if not asks:
            return
        body = {"replica_id": self.manager.broker.node_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in asks.items()]}
        resp = await conn.request(23, EPOCH_VERSION, body, self.manager.timeout_s)
        for t in resp.topics:
            for r in t.partitions:
                f = self.parts.get((t.topic, r.partition))
                if f is None or not f.truncating:
                    continue
                code = ErrorCode(r.error_code)
                if code != ErrorCode.NONE:
                    f.paused_until = time.monotonic() + PAUSE_S
                    continue
                p = f.partition
                leo = p.log.log_end_offset
                mine = p.log.leader_epochs.latest_epoch()
                if r.end_offset < 0:
                    target = min(p.hw, leo)
                elif r.leader_epoch == mine:
                    target = min(r.end_offset, leo)
                else:
                    _, own_end = p.log.leader_epochs.end_offset_for(r.leader_epoch, leo)
                    target = r.end_offset if own_end < 0 else min(r.end_offset, own_end)
                self._truncate_to(f, target, f"leader epoch {r.leader_epoch} ends at {r.end_offset} on the leader")

    def _truncate_to(self, f: Followed, offset: int, why: str) -> None:
        p = f.partition
        if p.swapping_log:  # (truncated after the swap, from the same answer asked again)
            f.paused_until = time.monotonic() + PAUSE_S
            return
        f.truncating = False
        if offset >= p.log.log_end_offset:
            return
        log.info("Truncating %s from %d to %d (%s)", p, p.log.log_end_offset, offset, why)
        if p.log.truncate_to(max(offset, 0)):
            p.reload_producer_state()
        p.hw = min(p.hw, p.log.log_end_offset)

    # -- fetch --------------------------------------------------------------------------------

    async def _fetch(self, conn: Connection) -> bool:
        f: Followed | None
        """One fetch round; False when there was nothing to fetch for (all paused/truncating)."""
        now = time.monotonic()
        ready = [f for f in self.parts.values() if not f.truncating and f.paused_until <= now]
        if not ready:
            return False
        cfg = self.manager.broker.config
        max_bytes = int(cfg.get("replica.fetch.max.bytes"))
        wanted = {(f.partition.topic, f.partition.index): (f.partition.log.log_end_offset, f.leader_epoch,
                                                           f.partition.log.log_start_offset, max_bytes)
                  for f in ready}
        session_id, epoch, named, forgotten = self.session.request(wanted)
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (topic, index), (offset, leader_epoch, log_start, part_max) in named.items():
            by_topic.setdefault(topic, []).append({
                "partition": index, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": log_start, "partition_max_bytes": part_max})
        gone: dict[str, list[int]] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        body = {"replica_id": self.manager.broker.node_id, "max_wait": self.manager.max_wait_ms,
                "min_bytes": 1, "max_bytes": int(cfg.get("replica.fetch.response.max.bytes")),
                "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()],
                "rack_id": ""}
        resp = await conn.request(1, FETCH_VERSION, body, self.manager.timeout_s + self.manager.max_wait_ms / 1000)
        if resp.error_code:
            code = ErrorCode(resp.error_code)
            if code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
                log.info("Fetch session with broker %d ended (%s); starting a new one", self.leader_id, code.name)
                self.session.reset()
                return True
            log.warning("Fetch from broker %d failed: %s", self.leader_id, code.name)
            self.session.reset()
            for f in ready:
                f.paused_until = time.monotonic() + PAUSE_S
            return True
        self.session.answered(resp.session_id, epoch, named, forgotten)
        throttled = 0
        throttled_parts: list[Partition] = []
        for t in resp.responses:
            for r in t.partitions:
                f = self.parts.get((t.topic, r.partition_index))
                if f is not None and f in ready:
                    self._apply(f, r)
                    if r.records and self.manager.throttled(f.partition):
                        throttled += len(r.records)
                        throttled_parts.append(f.partition)
        if throttled:
            await self._pay_throttle(throttled, throttled_parts)
        return True

    async def _pay_throttle(self, nbytes: int, parts: list[Partition]) -> None:
        """Wait until `nbytes` of throttled replicas' data are paid for at
        follower.replication.throttled.rate, so that they fetch at most that many bytes a second.
        The rate and the replicas' throttle are read again as the wait goes: a throttle raised or
        removed meanwhile (`reassign-partitions --execute --additional --throttle`, `--verify`)
        applies at once, not after a wait priced at the old rate."""
        owed = float(nbytes)
        while owed > 0 and not self.stopped:
            rate = int(self.manager.broker.config.get("follower.replication.throttled.rate"))
            if rate >= NO_THROTTLE or not any(self.manager.throttled(p) for p in parts):
                return
            step = min(owed / max(rate, 1), THROTTLE_RECHECK_S)
            await asyncio.sleep(step)
            owed -= step * max(rate, 1)

    def _apply(self, f: Followed, r: Any) -> None:
        p = f.partition
        if p.swapping_log:
            f.paused_until = time.monotonic() + PAUSE_S
            return
        code = ErrorCode(r.error_code)
        if code == ErrorCode.NONE:
            data = r.records
            if data:
                self._append(f, data)
            p.set_follower_hw(r.high_watermark)
            if r.log_start_offset > p.log.log_start_offset:
                try:
                    p.log.delete_records_before(min(r.log_start_offset, p.log.log_end_offset))
                except StorageError as e:
                    log.warning("%s: could not move the log start offset to %d: %s", p, r.log_start_offset, e)
            p.wake()
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if p.log.log_end_offset < r.log_start_offset:
                log.info("%s: the leader's log starts at %d, past ours (%d); restarting the log there",
                         p, r.log_start_offset, p.log.log_end_offset)
                p.log.truncate_fully_and_start_at(r.log_start_offset)
                p.reload_producer_state()
                p.hw = p.log.log_end_offset
            else:
                f.truncating = True
        elif code in RETRIABLE:
            f.paused_until = time.monotonic() + PAUSE_S
        else:
            log.warning("%s: fetch from broker %d failed with %s", p, self.leader_id, code.name)
            f.paused_until = time.monotonic() + 1.0

    def _append(self, f: Followed, data: Any) -> None:
        p = f.partition
        buf = data if isinstance(data, (bytes, bytearray)) else bytes(data)
        try:
            headers = scan_batches(buf, verify_crc=True, allow_partial_tail=True)
        except InvalidRecords as e:
            log.warning("%s: corrupt batch from broker %d (%s); fetching again", p, self.leader_id, e)
            f.paused_until = time.monotonic() + PAUSE_S
            return
        if not headers:
            return
        last_pos, last = headers[-1]
        end = last_pos + last.size
        try:
            p.append_replicated(memoryview(buf)[:end], headers)
        except StorageError as e:
            log.warning("%s: follower append failed (%s); truncating again", p, e)
            f.truncating = True
        except OSError as e:  # the disk refused: fetched again after a pause (or the dir failed)
            log.warning("%s: cannot append what broker %d sent: %s", p, self.leader_id, e)
            f.paused_until = time.monotonic() + PAUSE_S
            p.storage_error(e)


class ReplicaFetcherManager:
    def __init__(self, broker: FetcherHost) -> None:
        self.broker = broker
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.following: dict[tuple[str, int], int] = {}
        self.max_wait_ms = int(broker.config.get("replica.fetch.wait.max.ms"))
        self.timeout_s = max(int(broker.config.get("replica.socket.timeout.ms")) / 1000, 1.0)
        self.salted: dict[tuple[str, bytes, int], bytes] = {}  # SCRAM: PBKDF2 results, per (password, salt, rounds)

    def endpoint(self, leader_id: int) -> tuple[str, int] | None:
        return self.broker.cluster.endpoint(leader_id, self.broker.inter_broker_listener)

    def throttled(self, p: Partition) -> bool:
        """Kafka's replication quota: this follower replica is listed in the topic's
        follower.replication.throttled.replicas and the broker has a rate."""
        if int(self.broker.config.get("follower.replication.throttled.rate")) >= NO_THROTTLE:
            return False
        value = self.broker.topic_config(p.topic, "follower.replication.throttled.replicas") or ""
        replicas = [x.strip() for x in str(value).split(",") if x.strip()]
        return "*" in replicas or f"{p.index}:{self.broker.node_id}" in replicas

    def follow(self, p: Partition, leader_id: int, leader_epoch: int) -> None:
        key = (p.topic, p.index)
        self.unfollow(p)
        if leader_id < 0:
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None or fetcher.stopped:
            fetcher = self.fetchers[leader_id] = LeaderFetcher(self, leader_id)
        fetcher.parts[key] = Followed(p, leader_epoch)
        fetcher.changed.set()
        self.following[key] = leader_id

    def unfollow(self, p: Partition) -> None:
        key = (p.topic, p.index)
        leader = self.following.pop(key, None)
        if leader is None:
            return
        fetcher = self.fetchers.get(leader)
        if fetcher is not None:
            fetcher.parts.pop(key, None)
            if not fetcher.parts:
                fetcher.stop()
                del self.fetchers[leader]

    def shutdown(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
        self.following.clear()
