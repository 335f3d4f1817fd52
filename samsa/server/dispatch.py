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
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
from collections.abc import Iterable
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
)
from samsa.protocol.schema import Out
from samsa.protocol.wire import I16, I32, DecodeError
from samsa.ratelimit import RateLimitedLog
from samsa.server.context import BrokerServices, RequestContext
from samsa.server.network import Connection
from samsa.server.responses import NO_RESPONSE, Pending
from samsa.server.sasl import sasl_failed

log = logging.getLogger("samsa.requests")
_KEY_VERSION = struct.Struct(">hh")
_BEFORE_AUTH = frozenset({17, 18, 36})  # SaslHandshake, ApiVersions, SaslAuthenticate



def supported_versions(modules: Iterable[ModuleType]) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of each handler module, by api key: what ApiVersions
    advertises."""
    return sorted({m.API_KEY: (m.API_KEY, m.MIN_VERSION, m.MAX_VERSION) for m in modules}.values())


class Dispatcher:
    def __init__(self, services: BrokerServices, modules: list[ModuleType]) -> None:
        self.services = services
        self.handlers: dict[int, ModuleType] = {m.API_KEY: m for m in modules}
        self._warn = RateLimitedLog(log, interval_s=10.0)

    def api_versions(self) -> list[tuple[int, int, int]]:
        return supported_versions(self.handlers.values())

    def __call__(self, conn: Connection, frame: bytearray) -> Any:
        sasl = conn.sasl
        if sasl is not None and sasl.raw_tokens:  # after a v0 SaslHandshake: a bare token
            return self._raw_token(conn, frame)
        api_key, version = _KEY_VERSION.unpack_from(frame, 0)
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
        ctx = RequestContext(self.services, conn, header)
        try:
            result = module.handle(ctx, body)
        except Exception as e:
            result = self._failed(ctx, e)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        if isinstance(result, Pending):
            return self._answer_later(ctx, result)
        if inspect.isawaitable(result):
            return self._after_io(ctx, result)
        try:
            return encode_response(api_key, version, header.correlation_id, result)
        except Exception as e:
            log.error("could not encode the answer to api %d v%d from %s", api_key, version, conn.peer_str,
                      exc_info=e)
            raise FrameError("internal error (see the log above); closing the connection") from None

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
            conn.principal = step.principal
            conn.sasl = None
        out = Out()
        out.extend(I32.pack(len(step.reply)))
        out.extend(step.reply)
        return out

    def _answer_later(self, ctx: RequestContext, pending: Pending) -> Pending:
        """A Pending of the response frame, from the handler's Pending of its body (a body that
        is already a frame, as a fetch answered from an append, goes as it is)."""
        out = Pending()
        header = ctx.header

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
            if not isinstance(body, Out):
                try:
                    body = encode_response(header.api_key, header.api_version, header.correlation_id, body)
                except Exception as e:  # a bug: this connection closes (logged there)
                    out.fail(e)
                    return
            out.complete(body)

        pending.on_done(done)
        out.on_cancel(pending.cancel)
        return out

    def _after_io(self, ctx: RequestContext, awaitable: Any) -> Pending:
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
        return self._answer_later(ctx, body)

    def _failed(self, ctx: RequestContext, e: Exception) -> dict[str, Any]:
        """The answer to a request whose handler raised: a Kafka error is the client's; the
        metadata store being away refuses only what needs it; anything else is a bug and
        closes the connection."""
        h, peer = ctx.header, ctx.conn.peer_str
        if isinstance(e, KafkaError):
            log.info("request api %d v%d from %s failed: %s", h.api_key, h.api_version, peer, e)
            return {"error_code": int(e.code), "error_message": e.message}
        if isinstance(e, StoreError):
            self._warn.warning(f"store:{h.api_key}", "request api %d v%d from %s needs the metadata store: %s",
                               h.api_key, h.api_version, peer, e)
            return {"error_code": int(ErrorCode.REQUEST_TIMED_OUT), "error_message": f"metadata store unavailable: {e}"}
        log.error("internal error handling api %d v%d from %s", h.api_key, h.api_version, peer, exc_info=e)
        raise FrameError("internal error (see the log above); closing the connection") from None

    def _unsupported(self, conn: Connection, frame: bytearray, api_key: int, version: int,
                     module: ModuleType | None) -> Out:
        (correlation_id,) = I32.unpack_from(frame, 4)
        log.info("unsupported request api %d v%d from %s", api_key, version, conn.peer_str)
        if api_key == 18:
            # A client probing with a newer ApiVersions gets a v0 answer listing what we speak.
            return encode_response(18, 0, correlation_id, {
                "error_code": int(ErrorCode.UNSUPPORTED_VERSION),
                "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in self.api_versions()],
            })
        out = Out()
        out.extend(I32.pack(6))
        out.extend(I32.pack(correlation_id))
        out.extend(I16.pack(int(ErrorCode.UNSUPPORTED_VERSION)))
        return out
