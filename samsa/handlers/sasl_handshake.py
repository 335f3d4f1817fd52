"""SaslHandshake (17): the client names its SASL mechanism (server/sasl.py has the state machine).

v0: the tokens then follow as bare frames; v1: inside SaslAuthenticate requests. An unknown
mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones, a handshake outside
authentication (a PLAINTEXT listener, an already-handshaken connection) ILLEGAL_SASL_STATE;
both then close the connection, as Kafka's do. On a connection authenticated by SASL, a v1
handshake begins a re-authentication (KIP-368) with the same mechanism."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import RequestContext, begin_reauthentication

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    sasl = ctx.conn.sasl
    if sasl is None:  # authenticated already: a re-authentication (KIP-368), on a SASL listener
        sasl = begin_reauthentication(ctx.conn)
    if sasl is None:
        ctx.conn.close_after_reply()
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": []}
    code = sasl.handshake(req.mechanism, ctx.version)
    if code != ErrorCode.NONE:
        ctx.conn.close_after_reply()
    return {"error_code": int(code), "mechanisms": list(sasl.config.mechanisms)}
