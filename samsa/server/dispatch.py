"""Frame → handler → response frame.

Each API lives in its own module under `samsa.handlers`, declaring `API_KEY`, `MIN_VERSION`,
`MAX_VERSION` and `handle(ctx, request)`, `ctx` a `RequestContext` (`context.py`: the broker's
services, built once, with the request's connection and header). ApiVersions is answered from
that same registry (`supported_versions`), so what the broker advertises is exactly what it
implements. A handler returns the response body
(a dict or Msg), a `Pending` of it (completed by a delayed operation of the purgatory: a
long-poll fetch, an acks=all produce, a group write, CreateTopics...), or NO_RESPONSE (acks=0).
A handler that must await the metadata store (CreateTopics writing to ZooKeeper) is a coroutine
for that I/O only; it returns a body or, to wait for a condition afterwards, a Pending.

Whatever the handler returns reaches the connection as an encoded frame or a Pending of one; an
exception (raised, or failing the Pending) becomes the client's error when it is a Kafka error
or the metadata store being away, and closes the connection when it is a bug.

Client quotas (`quotas.py`), once any is configured, take the `_with_quotas` path: the handler's
time is measured (request_percentage), and when its answer is ready a Produce's request size
is recorded (producer_byte_rate; the Fetch handler records its own bytes, consumer_byte_rate,
because a throttled fetch sends no data). The longest throttle time goes into the response's
`throttle_time_ms` and mutes the connection for as long (KIP-219); a response version whose
client does not throttle itself is held back for that time instead. SASL requests and
followers' fetches are exempt. Without quotas the request path pays one attribute check.

Request metrics (`metrics.py`), when on (`metrics.enabled`: the Prometheus endpoint is): each
request served is counted under its API's `RequestStats` (a fetch under FetchConsumer or
FetchFollower, and Fetch) and version, its response's error codes counted by a walker
generated from its schema (`StructCodec.count_errors`), and the stats named to the connection
(`conn.request_stats`), which times the request. Off, a request pays one attribute check.

The request log (Kafka's `kafka.request.logger`): with the logger `samsa.request.logger` at
DEBUG when the broker starts (`samsa broker start --request-log`), every request is logged as
it arrives, with its API, version, peer, client id and correlation id (to see, say, which
Fetch version a client negotiated). Off, it costs one attribute check per request.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from samsa.metadata.store import StoreError
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.framing import FrameError
from samsa.protocol.messages import (
    decode_request_body,
    decode_request_header,
    encode_response,
    request_codec,
    response_codec,
)
from samsa.protocol.schema import Out
from samsa.protocol.wire import I16, I32, DecodeError
from samsa.ratelimit import RateLimitedLog
from samsa.server.authorizer import api_names
from samsa.server.context import BrokerServices, RequestContext
from samsa.server.metrics import RequestMetrics, RequestStats
from samsa.server.network import Connection
from samsa.server.quotas import client_throttles
from samsa.server.responses import NO_RESPONSE, Pending
from samsa.server.sasl import authenticated, sasl_failed

log = logging.getLogger("samsa.requests")
request_log = logging.getLogger("samsa.request.logger")
Account = Callable[[Any], tuple[Any, int]]  # an answer -> (the answer with its throttle time, delay in ms)
_KEY_VERSION = struct.Struct(">hh")
_BEFORE_AUTH = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate
_QUOTA_EXEMPT = frozenset({17, 36})  # the authentication exchange
_PRODUCE, _FETCH = 0, 1


def supported_versions(modules: Iterable[ModuleType]) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of each handler module, by api key: what ApiVersions
    advertises."""
    return sorted({m.API_KEY: (m.API_KEY, m.MIN_VERSION, m.MAX_VERSION) for m in modules}.values())


class Dispatcher:
    def __init__(self, services: BrokerServices, modules: list[ModuleType]) -> None:
        self.services = services
        self.handlers: dict[int, ModuleType] = {m.API_KEY: m for m in modules}
        self._warn = RateLimitedLog(log, interval_s=10.0)
        self.metrics = RequestMetrics(supported_versions(modules), api_names(modules))
        self._stats = self.metrics.by_key
        self._error_counters: dict[int, Callable[[Any], dict[int, int] | None]] = {}  # by api key << 16 | version
        self._log_requests = request_log.isEnabledFor(logging.DEBUG)

    def api_versions(self) -> list[tuple[int, int, int]]:
        return supported_versions(self.handlers.values())

    def __call__(self, conn: Connection, frame: bytearray) -> Any:
        started = time.perf_counter() if self.services.quotas.enabled else 0.0  # (request_percentage)
        sasl = conn.sasl
        if sasl is not None and sasl.raw_tokens:  # after a v0 SaslHandshake: a bare token
            return self._raw_token(conn, frame)
        api_key, version = _KEY_VERSION.unpack_from(frame, 0)
        if conn.session_expiry and sasl is None and api_key != 17 and time.monotonic() > conn.session_expiry:
            self._warn.warning(f"sasl-expired:{conn.server.name}", "closing connection from %s (%s): its SASL "
                               "session expired (connections.max.reauth.ms) and it did not authenticate again",
                               conn.peer_str, conn.principal)
            raise FrameError("SASL session expired without re-authentication")
        if sasl is not None and api_key not in _BEFORE_AUTH:
            self._warn.warning(f"sasl-state:{conn.server.name}", "closing connection from %s: request api %d before "
                               "SASL authentication on listener %s", conn.peer_str, api_key, conn.server.name)
            raise FrameError(f"request api {api_key} before SASL authentication (ILLEGAL_SASL_STATE)")
        module = self.handlers.get(api_key)
        if module is None or not module.MIN_VERSION <= version <= module.MAX_VERSION:
            return self._unsupported(conn, frame, api_key, version, module)
        try:
            flexible = request_codec(api_key, version).flexible
            header, start = decode_request_header(frame, flexible)
            body = decode_request_body(api_key, version, frame, start)
        except DecodeError as e:
            raise FrameError(f"malformed request (api {api_key} v{version}): {e}") from None
        conn.client_id = header.client_id
        if self._log_requests:
            request_log.debug("Received %s v%d from %s (client id %s, correlation id %d)",
                              module.__name__.rsplit(".", 1)[-1], version, conn.peer_str, header.client_id,
                              header.correlation_id)
        ctx = RequestContext(self.services, conn, header)
        stats = None
        if self.metrics.enabled:
            stats = self._stats[api_key]
            if api_key == _FETCH:
                stats = (self.metrics.fetch_follower if getattr(body, "replica_id", -1) >= 0
                         else self.metrics.fetch_consumer)
            stats.count(version)
            conn.request_stats = stats
        if self.services.quotas.enabled and api_key not in _QUOTA_EXEMPT and (
                api_key != _FETCH or getattr(body, "replica_id", -1) < 0):  # (replication is no client's)
            return self._with_quotas(conn, ctx, module, body, len(frame), started, stats)
        try:
            result = module.handle(ctx, body)
        except Exception as e:
            result = self._failed(ctx, e, body)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        if isinstance(result, Pending):
            return self._answer_later(ctx, result, stats=stats)
        if inspect.isawaitable(result):
            return self._after_io(ctx, result, stats=stats)
        return self._encode(ctx, result, stats)

    def _count_errors(self, stats: RequestStats, api_key: int, version: int, body: Any) -> None:
        key = api_key << 16 | version
        count = self._error_counters.get(key)
        if count is None:
            count = self._error_counters[key] = response_codec(api_key, version).error_counter()
        found = count(body)
        if found:
            stats.add_errors(found)

    def _encode(self, ctx: RequestContext, body: Any, stats: RequestStats | None = None) -> Out:
        h = ctx.header
        if stats is not None and not isinstance(body, Out):
            count = self._error_counters.get(h.api_key << 16 | h.api_version)
            if count is None:
                self._count_errors(stats, h.api_key, h.api_version, body)
            else:
                found = count(body)
                if found:
                    stats.add_errors(found)
        try:
            return encode_response(h.api_key, h.api_version, h.correlation_id, body)
        except Exception as e:
            log.error("could not encode the answer to api %d v%d from %s", h.api_key, h.api_version,
                      ctx.conn.peer_str, exc_info=e)
            raise FrameError("internal error (see the log above); closing the connection") from None

    def _with_quotas(self, conn: Connection, ctx: RequestContext, module: ModuleType, body: Any, size: int,
                     started: float, stats: RequestStats | None) -> Any:
        """`__call__`'s path when client quotas are configured (see the module doc); `started`
        is when the request's decoding began."""
        acks = getattr(body, "acks", 1)
        try:
            result = module.handle(ctx, body)
        except Exception as e:
            result = self._failed(ctx, e, body)
        busy = time.perf_counter() - started
        quotas = self.services.quotas
        if result is NO_RESPONSE:  # acks=0: bandwidth only, and no response to carry the time
            conn.throttle(quotas.produce.record(ctx.principal, ctx.client_id, size))
            return NO_RESPONSE

        def account(answer: Any) -> tuple[Any, int]:
            return self._throttle(conn, ctx, answer, busy, size, acks)

        if isinstance(result, Pending):
            return self._answer_later(ctx, result, account, stats)
        if inspect.isawaitable(result):
            return self._after_io(ctx, result, account, stats)
        result, delay_ms = account(result)
        out = self._encode(ctx, result, stats)
        if not delay_ms:
            return out
        held = Pending()  # an old client's throttled response: held back
        held.on_cancel(conn.loop.call_later(delay_ms / 1000.0, held.complete, out).cancel)
        return held

    def _throttle(self, conn: Connection, ctx: RequestContext, answer: Any, busy: float, size: int,
                  acks: int) -> tuple[Any, int]:
        """Record this request against the client's quotas: the answer with its throttle time,
        and how long to hold it back (0: the client throttles itself). The connection is muted
        for the throttle time."""
        quotas = self.services.quotas
        principal, client_id = ctx.principal, ctx.client_id
        api_key = ctx.header.api_key
        ms = _throttle_time(answer)  # a fetch's own (consumer_byte_rate)
        if api_key == _PRODUCE:
            ms = max(ms, quotas.produce.record(principal, client_id, size))
        if api_key != _PRODUCE or acks != 0:
            ms = max(ms, quotas.request.record(principal, client_id, busy * 100.0))  # % of one second
        if ms <= 0:
            return answer, 0
        if isinstance(answer, dict):
            answer["throttle_time"] = ms
        elif answer is not None and not isinstance(answer, Out):
            answer.throttle_time = ms
        conn.throttle(ms)
        return answer, 0 if client_throttles(api_key, ctx.header.api_version) else ms

    def _raw_token(self, conn: Connection, frame: bytearray) -> Out:
        """The v0 flow: the frame is the mechanism's token and the answer a bare frame (the next
        frame is a token again until the mechanism is done); a failed authentication closes the
        connection (there is no error field to carry it)."""
        sasl = conn.sasl
        assert sasl is not None
        step = sasl.authenticate(bytes(frame))
        if step.failure is not None:
            sasl_failed(conn, sasl.mechanism, step.failure)
            raise FrameError("SASL authentication failed")
        if step.principal is not None:
            authenticated(conn, sasl, step.principal, int(self.services.config.get("connections.max.reauth.ms")),
                          False)  # (the v0 flow: no re-authentication)
        out = Out()
        out.extend(I32.pack(len(step.reply)))
        out.extend(step.reply)
        return out

    def _answer_later(self, ctx: RequestContext, pending: Pending, account: Account | None = None,
                      stats: RequestStats | None = None) -> Pending:
        """A Pending of the response frame, from the handler's Pending of its body (a body that
        is already a frame, as a fetch answered from an append, goes as it is); `account`
        applies the client's quotas to the body once it is ready."""
        out = Pending()
        header = ctx.header
        delay_ms = 0

        def done(body: Any, error: BaseException | None) -> None:
            if error is not None:
                if not isinstance(error, Exception):
                    out.fail(error)
                    return
                try:
                    body = self._failed(ctx, error)
                except FrameError as e:
                    out.fail(e)
                    return
            nonlocal delay_ms
            if account is not None:
                body, delay_ms = account(body)
            if not isinstance(body, Out):
                if stats is not None:
                    self._count_errors(stats, header.api_key, header.api_version, body)
                try:
                    body = encode_response(header.api_key, header.api_version, header.correlation_id, body)
                except Exception as e:  # a bug: this connection closes (logged there)
                    out.fail(e)
                    return
            if delay_ms:  # an old client's throttled response: held back
                timer = asyncio.get_running_loop().call_later(delay_ms / 1000.0, out.complete, body)
                out.on_cancel(timer.cancel)
                return
            out.complete(body)

        out.on_cancel(pending.cancel)  # (before: `done` may run now and hold the answer back on a timer)
        pending.on_done(done)
        return out

    def _after_io(self, ctx: RequestContext, awaitable: Any, account: Account | None = None,
                  stats: RequestStats | None = None) -> Pending:
        """A handler awaiting the metadata store: its task's result (a body, or a Pending of one
        when it then waits in the purgatory) as a Pending. A closed connection does not stop
        the task (its writes go on, as Kafka's do), only drops the answer."""
        body = Pending()
        task = asyncio.ensure_future(awaitable)
        cancelled = False

        def cancel() -> None:
            nonlocal cancelled
            cancelled = True

        def finished(t: asyncio.Future[Any]) -> None:
            if t.cancelled():
                body.fail(asyncio.CancelledError())
                return
            error = t.exception()
            if error is not None:
                body.fail(error)
                return
            result = t.result()
            if isinstance(result, Pending):
                if cancelled:
                    result.cancel()
                    return
                body.on_cancel(result.cancel)
                result.on_done(lambda v, e: body.fail(e) if e is not None else body.complete(v))
            else:
                body.complete(result)

        body.on_cancel(cancel)
        task.add_done_callback(finished)
        return self._answer_later(ctx, body, account, stats)

    def _failed(self, ctx: RequestContext, e: Exception, request: Any = None) -> dict[str, Any]:
        """The answer to a request whose handler raised: a Kafka error is the client's; the
        metadata store being away refuses only what needs it; anything else is a bug and
        closes the connection (a produce or fetch `request` then counts as failed for each of
        its partitions, Kafka's "unexpected failure")."""
        h, peer = ctx.header, ctx.conn.peer_str
        if isinstance(e, KafkaError):
            log.info("request api %d v%d from %s failed: %s", h.api_key, h.api_version, peer, e)
            return {"error_code": int(e.code), "error_message": e.message}
        if isinstance(e, StoreError):
            self._warn.warning(f"store:{h.api_key}", "request api %d v%d from %s needs the metadata store: %s",
                               h.api_key, h.api_version, peer, e)
            return {"error_code": int(ErrorCode.REQUEST_TIMED_OUT), "error_message": f"metadata store unavailable: {e}"}
        log.error("internal error handling api %d v%d from %s", h.api_key, h.api_version, peer, exc_info=e)
        if request is not None and h.api_key in (_PRODUCE, _FETCH):
            topics = request.topic_data if h.api_key == _PRODUCE else request.topics
            self.services.replicas.topic_stats.unexpected_failure(
                h.api_key, [(str(getattr(t, "name", None) or getattr(t, "topic", "")),
                             len(getattr(t, "partition_data", None) or getattr(t, "partitions", None) or ()))
                            for t in topics])
        raise FrameError("internal error (see the log above); closing the connection") from None

    def _unsupported(self, conn: Connection, frame: bytearray, api_key: int, version: int,
                     module: ModuleType | None) -> Out:
        (correlation_id,) = I32.unpack_from(frame, 4)
        if api_key == 18:
            # A client probing with a newer ApiVersions gets a v0 answer and asks again (KIP-511):
            # the normal negotiation of every newer client (Kafka 4.4's Java client sends v5 on
            # each connection), so not worth a line at INFO.
            log.debug("ApiVersions v%d from %s is newer than ours: answered with our versions", version,
                      conn.peer_str)
            # As Kafka (KIP-511), the answer lists ApiVersions' own range only: all the client
            # needs to ask again.
            return encode_response(18, 0, correlation_id, {
                "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                             for k, lo, hi in self.api_versions() if k == 18],
            })
        log.info("unsupported request api %d v%d from %s", api_key, version, conn.peer_str)
        out = Out()
        out.extend(I32.pack(6))
        out.extend(I32.pack(correlation_id))
        out.extend(I16.pack(int(ErrorCode.UNSUPPORTED_VERSION)))
        return out


def _throttle_time(answer: Any) -> int:
    """The throttle time a handler put in its answer (0 when none)."""
    if isinstance(answer, dict):
        return int(answer.get("throttle_time") or 0)
    if answer is None or isinstance(answer, Out):
        return 0
    return int(getattr(answer, "throttle_time", 0) or 0)
