"""Frame → handler → response frame.

Each API lives in its own module under `samsa.handlers`, declaring `API_KEY`, `MIN_VERSION`,
`MAX_VERSION` and `handle(ctx, request)`. ApiVersions is answered from that same registry, so
what the broker advertises is exactly what it implements. A handler returns the response body
(a dict or Msg), a `Pending` of it (long-poll fetch), an awaitable of it (acks=all), or
NO_RESPONSE (acks=0).
"""

from __future__ import annotations

import inspect
import logging
import struct
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from samsa.metadata.store import StoreError
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.ratelimit import RateLimitedLog
from samsa.protocol.messages import (
    RequestHeader,
    decode_request_body,
    decode_request_header,
    encode_response,
    request_codec,
)
from samsa.protocol.schema import Out
from samsa.protocol.wire import I16, I32, DecodeError
from samsa.server.network import NO_RESPONSE, Connection, FrameError, Pending

if TYPE_CHECKING:
    from samsa.server.broker import Broker

log = logging.getLogger("samsa.requests")
_KEY_VERSION = struct.Struct(">hh")


@dataclass
class RequestContext:
    broker: "Broker"
    conn: Connection
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.api_version


class Dispatcher:
    def __init__(self, broker: "Broker", modules: list[ModuleType]) -> None:
        self.broker = broker
        self.handlers: dict[int, ModuleType] = {m.API_KEY: m for m in modules}
        self._warn = RateLimitedLog(log, interval_s=10.0)

    def api_versions(self) -> list[tuple[int, int, int]]:
        return sorted((k, m.MIN_VERSION, m.MAX_VERSION) for k, m in self.handlers.items())

    def __call__(self, conn: Connection, frame: bytearray) -> Any:
        api_key, version = _KEY_VERSION.unpack_from(frame, 0)
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
        ctx = RequestContext(self.broker, conn, header)
        try:
            result = module.handle(ctx, body)
        except Exception as e:
            result = self._failed(ctx, e)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        if isinstance(result, Pending):
            cid = header.correlation_id
            # (a body that is already a frame, as a fetch answered from an append, goes as it is)
            return result.then(
                lambda body: body if isinstance(body, Out) else encode_response(api_key, version, cid, body))
        if inspect.isawaitable(result):
            return self._finish_later(ctx, result)
        return encode_response(api_key, version, header.correlation_id, result)

    async def _finish_later(self, ctx: RequestContext, pending: Any) -> Out:
        try:
            body = await pending
        except Exception as e:
            body = self._failed(ctx, e)
        header = ctx.header
        return encode_response(header.api_key, header.api_version, header.correlation_id, body)

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

    def _unsupported(self, conn: Connection, frame: bytearray, api_key: int, version: int, module: ModuleType | None) -> Out:
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
