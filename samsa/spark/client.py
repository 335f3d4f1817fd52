"""The Spark data source's Kafka client: Metadata, ListOffsets, raw Fetch and Produce over blocking sockets.

Why not confluent-kafka here: a consumer hands records one by one to Python, and the source
wants whole record batches as bytes (decoded into Arrow columns in one pass, `arrow.py`).
So the driver and every executor speak the protocol themselves with Samsa's codecs: one
blocking socket per broker, requests answered in order, leaders found through Metadata and
refreshed when a broker says NOT_LEADER_OR_FOLLOWER. Clients are pooled per process by
bootstrap string (`client_for`), never pickled: a reader carries options, not connections.
The sink writes the same way: `produce` sends record batches the caller sealed (one per
partition per request, as Produce v3+ requires), by leader, retrying retriable errors.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from samsa.protocol.client_security import ClientSecurity
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import FrameSplitter
from samsa.protocol.messages import decode_response, encode_request
from samsa.protocol.scram import SaslClientError

TopicPartition = tuple[str, int]
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
             ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
# Kafka's retriable produce errors; a retry may append a batch twice (at-least-once)
PRODUCE_RETRIABLE = RETRIABLE | {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.KAFKA_STORAGE_ERROR,
                                 ErrorCode.NETWORK_EXCEPTION}
PRODUCE_VERSION = 9  # flexible; Samsa and Kafka 4 accept 3-12


class ClientError(Exception):
    """A request failed for good: the message says which and why."""


class _Connection:
    def __init__(self, host: str, port: int, timeout: float, client_id: str,
                 security: ClientSecurity | None = None) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise ClientError(f"cannot connect to broker {host}:{port}: {e.strerror or e}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0
        self.frames = FrameSplitter()
        if security is not None and security.protocol != "PLAINTEXT":
            self._secure(host, port, security)

    def _secure(self, host: str, port: int, security: ClientSecurity) -> None:
        try:
            if security.tls:
                self.sock = security.tls_context().wrap_socket(self.sock, server_hostname=host)
            if security.sasl:
                security.login(self.request)
        except SaslClientError as e:
            self.sock.close()
            raise ClientError(f"broker {host}:{port}: {e}") from None
        except OSError as e:  # (ssl.SSLError included)
            self.sock.close()
            raise ClientError(f"TLS to broker {host}:{port} failed: {e}") from None

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        self.correlation_id += 1
        self.sock.sendall(bytes(encode_request(api_key, version, self.correlation_id, self.client_id, body)))

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        cid, msg = decode_response(api_key, version, self._read_frame())
        if cid != self.correlation_id:
            raise ClientError(f"response {cid} answers request {self.correlation_id}")
        return msg

    def _read_frame(self) -> bytearray:
        frames = self.frames
        while (frame := frames.next_frame()) is None:
            n = self.sock.recv_into(frames.buffer())
            if n == 0:
                raise ConnectionError("the broker closed the connection")
            frames.advance(n)
        return frame

    def close(self) -> None:
        self.sock.close()


class SamsaClient:
    def __init__(self, bootstrap: str, *, timeout: float = 30.0, client_id: str = "samsa-spark",
                 security: ClientSecurity | None = None, isolation_level: int = 0) -> None:
        self.bootstrap = [_hostport(x) for x in bootstrap.split(",") if x.strip()]
        if not self.bootstrap:
            raise ClientError("no bootstrap server given (kafka.bootstrap.servers is host:port[,host:port])")
        self.timeout = timeout
        self.client_id = client_id
        self.security = security
        self.isolation_level = isolation_level  # 1: read_committed (latest = the LSO, aborted records dropped)
        self.aborted: list[tuple[int, int]] = []  # the last fetch's aborted transactions (read_committed)
        self.brokers: dict[int, tuple[str, int]] = {}
        self.leaders: dict[TopicPartition, int] = {}
        self._conns: dict[tuple[str, int], _Connection] = {}
        self._lock = threading.Lock()

    # -- connections ------------------------------------------------------------------------

    def _conn(self, addr: tuple[str, int]) -> _Connection:
        c = self._conns.get(addr)
        if c is None:
            c = self._conns[addr] = _Connection(addr[0], addr[1], self.timeout, self.client_id, self.security)
        return c

    def _call(self, addr: tuple[str, int], api_key: int, version: int, body: dict[str, Any], *,
              expect_response: bool = True) -> Any:
        try:
            conn = self._conn(addr)
            if not expect_response:
                return conn.send(api_key, version, body)
            return conn.request(api_key, version, body)
        except (OSError, ConnectionError) as e:
            stale = self._conns.pop(addr, None)
            if stale is not None:
                stale.close()
            raise ClientError(f"request to broker {addr[0]}:{addr[1]} failed: {e}") from None

    def request(self, addr: tuple[str, int], api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the broker at `addr` over its pooled connection, for APIs this client
        has no method for (the dashboard's DescribeLogDirs); ClientError if it fails."""
        return self._call(addr, api_key, version, body)

    def _any(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        errors = []
        for addr in list(self.brokers.values()) + self.bootstrap:
            try:
                return self._call(addr, api_key, version, body)
            except ClientError as e:
                errors.append(str(e))
        raise ClientError("no broker reachable: " + "; ".join(dict.fromkeys(errors)))

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    # -- metadata ---------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None, *,
                 allow_auto_create: bool = False) -> dict[str, dict[int, int]]:
        """{topic: {partition: leader}} for `topics` (None: every topic); unknown topics are
        left out. Also refreshes the broker addresses and leaders used by the other calls.
        `allow_auto_create` lets the broker create unknown topics if its
        auto.create.topics.enable says so (as a producer's metadata request does)."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": allow_auto_create}
        resp = self._any(3, 9, body)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        out: dict[str, dict[int, int]] = {}
        for t in resp.topics:
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or t.name.startswith("__"):
                continue
            out[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
            for p in t.partitions:
                self.leaders[(t.name, p.partition_index)] = p.leader_id
        return out

    def _leader_addr(self, tp: TopicPartition) -> tuple[str, int]:
        leader = self.leaders.get(tp, -1)
        if leader < 0 or leader not in self.brokers:
            self.metadata([tp[0]])
            leader = self.leaders.get(tp, -1)
        if leader < 0 or leader not in self.brokers:
            raise ClientError(f"{tp[0]}-{tp[1]} has no leader (is the topic there and a broker up?)")
        return self.brokers[leader]

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[tuple[str, int], list[TopicPartition]]:
        groups: dict[tuple[str, int], list[TopicPartition]] = {}
        for tp in tps:
            groups.setdefault(self._leader_addr(tp), []).append(tp)
        return groups

    # -- offsets ----------------------------------------------------------------------------

    def list_offsets(self, tps: Iterable[TopicPartition], timestamp: int | dict[TopicPartition, int],
                     *, retries: int = 20) -> dict[TopicPartition, int]:
        """Offsets by timestamp (-2 earliest, -1 latest = the high watermark); -1 where no
        record has that timestamp or later."""
        todo = sorted(set(tps))
        out: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + self.timeout
        for attempt in itertools.count():
            retry: list[TopicPartition] = []
            try:
                by_leader = self._by_leader(todo)
            except ClientError:
                if time.monotonic() > deadline:
                    raise
                by_leader = {}
                retry = list(todo)
            for addr, group in by_leader.items():
                topics: dict[str, list[dict[str, int]]] = {}
                for t, p in group:
                    ts = timestamp[(t, p)] if isinstance(timestamp, dict) else timestamp
                    topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1,
                                                     "timestamp": ts})
                try:
                    wanted = [{"name": t, "partitions": ps} for t, ps in topics.items()]
                    resp = self._call(addr, 2, 7, {"replica_id": -1, "isolation_level": self.isolation_level,
                                                   "topics": wanted})
                except ClientError:  # the leader went away: find the new one
                    if time.monotonic() > deadline:
                        raise
                    retry.extend(group)
                    continue
                for t in resp.topics:
                    for p in t.partitions:
                        code = ErrorCode(p.error_code)
                        if code == ErrorCode.NONE:
                            out[(t.name, p.partition_index)] = p.offset
                        elif code in RETRIABLE:
                            retry.append((t.name, p.partition_index))
                        else:
                            raise ClientError(f"ListOffsets for {t.name}-{p.partition_index} failed: {code.name}")
            if not retry:
                return out
            if attempt >= retries and time.monotonic() > deadline:
                raise ClientError(f"ListOffsets kept failing for {retry} (leaders moving?)")
            todo = retry
            self.leaders = {k: v for k, v in self.leaders.items() if k not in retry}
            time.sleep(min(0.05 * (attempt + 1), 0.5))  # a leader is moving: back off, then ask again
        raise AssertionError("unreachable")

    # -- fetch ------------------------------------------------------------------------------

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int = 8 << 20, *, max_wait_ms: int = 500,
              retries: int = 20) -> tuple[bytes, int, int]:
        """(record batch bytes from `offset`, high watermark, log start offset) of one
        partition; the bytes may be empty (nothing yet) or end in a partial batch. read_committed:
        the bytes end at the last stable offset, which is returned in place of the high
        watermark, and `self.aborted` lists the aborted transactions among them."""
        deadline = time.monotonic() + self.timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._fetch_once(tp, offset, max_bytes, max_wait_ms)
            except ClientError:  # the leader went away (a failover): find the new one until the timeout
                if time.monotonic() > deadline:
                    raise
                self.leaders.pop(tp, None)
                time.sleep(min(0.05 * attempt, 0.5))
                continue
            part = resp.responses[0].partitions[0]
            code = ErrorCode(part.error_code)
            if code == ErrorCode.NONE:
                if self.isolation_level:
                    self.aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])]
                    return bytes(part.records or b""), part.last_stable_offset, part.log_start_offset
                return bytes(part.records or b""), part.high_watermark, part.log_start_offset
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                # Kafka's answer carries no offsets with the error: as its consumer does, ask
                # ListOffsets where the log starts and ends now
                start, end = part.log_start_offset, part.high_watermark
                if start < 0 or end < 0:
                    start = self.list_offsets([tp], -2)[tp]
                    end = self.list_offsets([tp], -1)[tp]
                raise OffsetOutOfRange(tp, offset, start, end)
            if code not in RETRIABLE:
                raise ClientError(f"Fetch of {tp[0]}-{tp[1]} at {offset} failed: {code.name}")
            if attempt >= retries and time.monotonic() > deadline:
                raise ClientError(f"Fetch of {tp[0]}-{tp[1]} kept failing with {code.name} (its leader is moving?)")
            self.leaders.pop(tp, None)
            time.sleep(min(0.05 * attempt, 0.5))

    def _fetch_once(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> Any:
        addr = self._leader_addr(tp)
        body = {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
                "isolation_level": self.isolation_level, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": tp[0], "partitions": [{
                    "partition": tp[1], "current_leader_epoch": -1, "fetch_offset": offset,
                    "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}]}],
                "forgotten_topics_data": [], "rack_id": ""}
        return self._call(addr, 1, 12, body)


    # -- produce ----------------------------------------------------------------------------

    def produce(self, batches: Mapping[TopicPartition, bytes], *, acks: int = -1, timeout_ms: int = 30_000,
                retries: int = 10, backoff_ms: int = 100,
                transactional_id: str | None = None) -> dict[TopicPartition, int]:
        """Append one sealed record batch to each topic-partition: {tp: base offset} (-1 with
        acks=0, which gets no answer). One Produce request per leader. Retriable errors
        (leader moved or dead, not enough replicas, connection lost, ...) are retried with
        growing backoff and fresh leaders, at least `retries` times and until the client's
        timeout (so a failover is ridden out, as `fetch` does); a batch may thus be written
        twice. Anything else raises ProduceError at once."""
        todo = dict(batches)
        out: dict[TopicPartition, int] = {}
        why: dict[TopicPartition, str] = {}
        deadline = time.monotonic() + self.timeout
        for attempt in itertools.count():
            retry: dict[TopicPartition, bytes] = {}
            groups: dict[tuple[str, int], list[TopicPartition]] = {}
            for tp in todo:
                try:
                    groups.setdefault(self._leader_addr(tp), []).append(tp)
                except ClientError as e:  # no leader now (an election?): ask again after the backoff
                    retry[tp], why[tp] = todo[tp], str(e)
            for addr, group in groups.items():
                topics: dict[str, list[dict[str, Any]]] = {}
                for t, p in group:
                    topics.setdefault(t, []).append({"index": p, "records": todo[(t, p)]})
                body = {"transactional_id": transactional_id, "acks": acks, "timeout": timeout_ms,
                        "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}
                try:
                    resp = self._call_slow(addr, body, acks, timeout_ms)
                except ClientError as e:
                    for tp in group:
                        retry[tp], why[tp] = todo[tp], str(e)
                    continue
                if resp is None:
                    out.update((tp, -1) for tp in group)
                    continue
                for t in resp.responses:
                    for p in t.partition_responses:
                        tp = (t.name, p.index)
                        code = ErrorCode(p.error_code)
                        if code == ErrorCode.NONE:
                            out[tp] = p.base_offset
                        elif code in PRODUCE_RETRIABLE:
                            detail = f" ({p.error_message})" if p.error_message else ""
                            retry[tp], why[tp] = todo[tp], code.name + detail
                        else:
                            raise ProduceError(tp, code, p.error_message)
            if not retry:
                return out
            if attempt >= retries and time.monotonic() > deadline:
                tp = min(retry)
                raise ClientError(f"Produce to {tp[0]}-{tp[1]} still failing after {attempt} retries: {why[tp]}")
            todo = retry
            for tp in retry:
                self.leaders.pop(tp, None)
            time.sleep(min(backoff_ms * (attempt + 1), 1000) / 1000)
        raise AssertionError("unreachable")

    def _call_slow(self, addr: tuple[str, int], body: dict[str, Any], acks: int, timeout_ms: int) -> Any:
        """A Produce request: the socket waits longer than the broker may (acks=all waits for
        the in-sync replicas up to `timeout_ms`)."""
        if acks == 0:
            self._call(addr, 0, PRODUCE_VERSION, body, expect_response=False)
            return None
        conn = self._conn(addr)
        conn.sock.settimeout(max(self.timeout, timeout_ms / 1000 + 5))
        try:
            return self._call(addr, 0, PRODUCE_VERSION, body)
        finally:
            if self._conns.get(addr) is conn:  # a failed call closed and dropped it
                conn.sock.settimeout(self.timeout)


class ProduceError(ClientError):
    """A partition refused a batch with an error retrying does not fix."""

    def __init__(self, tp: TopicPartition, code: ErrorCode, message: str | None) -> None:
        super().__init__(f"Produce to {tp[0]}-{tp[1]} failed: {code.name}" + (f" ({message})" if message else ""))
        self.tp, self.code = tp, code


class OffsetOutOfRange(ClientError):
    def __init__(self, tp: TopicPartition, offset: int, log_start: int, high_watermark: int) -> None:
        super().__init__(f"offset {offset} of {tp[0]}-{tp[1]} is out of range [{log_start}, {high_watermark}]")
        self.tp, self.offset, self.log_start, self.high_watermark = tp, offset, log_start, high_watermark


_POOL: dict[tuple[str, tuple[tuple[str, str], ...], int], SamsaClient] = {}
_POOL_LOCK = threading.Lock()


SECURITY_PREFIXES = ("security.protocol", "sasl.", "ssl.")


def security_params(kafka_params: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The `kafka.*` options that say how to connect (security.protocol, sasl.*, ssl.*)."""
    return tuple(sorted((k, v) for k, v in kafka_params if k.startswith(SECURITY_PREFIXES)))


def client_for(bootstrap: str, security: tuple[tuple[str, str], ...] = (), isolation_level: int = 0) -> SamsaClient:
    """One client per bootstrap string, security settings and isolation level per process
    (executors reuse theirs across tasks)."""
    key = (bootstrap, security, isolation_level)
    with _POOL_LOCK:
        c = _POOL.get(key)
        if c is None:
            try:
                settings = ClientSecurity.from_properties(dict(security))
            except ValueError as e:
                raise ClientError(str(e)) from None
            c = _POOL[key] = SamsaClient(bootstrap, security=settings, isolation_level=isolation_level)
        return c


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ClientError(f"bad bootstrap server {text.strip()!r}: expected host:port")
    return host.strip("[]"), int(port)
