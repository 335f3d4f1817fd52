"""SaslAuthenticate (36): one SASL token each way, after a v1 SaslHandshake (server/sasl.py).

A mechanism that needs another round (SCRAM's server-first message) answers NONE with its
token and waits for the next SaslAuthenticate. Success sets the connection's principal; from
then on it is served as any connection. A
failure is answered SASL_AUTHENTICATION_FAILED with the reason and closes the connection; a
SaslAuthenticate out of turn is ILLEGAL_SASL_STATE and closes it too. The session lasts
connections.max.reauth.ms (0: for ever), said as the session lifetime (KIP-368): the client must
authenticate again on the connection before then, as the same principal."""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import RequestContext, authenticated
from samsa.server.responses import Pending

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


def _answer(code: ErrorCode, message: str | None = None, auth: bytes = b"", lifetime_ms: int = 0) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message, "auth_bytes": auth, "session_lifetime": lifetime_ms}


def _after_delay(ctx: RequestContext, answer: dict[str, Any]) -> Pending | dict[str, Any]:
    """A failed login is answered connection.failed.authentication.delay.ms late, as Kafka does:
    password guessing gets slow, and the client cannot retry at once."""
    delay_ms = int(ctx.config.get("connection.failed.authentication.delay.ms"))
    if delay_ms <= 0:
        return answer
    pending = Pending()
    asyncio.get_running_loop().call_later(delay_ms / 1000, pending.complete, answer)
    return pending


def handle(ctx: RequestContext, req: Any) -> Pending | dict[str, Any]:
    conn = ctx.conn
    sasl = conn.sasl
    if sasl is None or sasl.state != "authenticate" or sasl.raw_tokens:
        conn.close_after_reply()
        return _answer(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate without a SaslHandshake v1 before it")
    step = sasl.authenticate(bytes(req.auth_bytes))
    if step.failure is not None:
        sasl.log_failure(conn, step.failure)
        conn.close_after_reply()
        return _after_delay(ctx, _answer(ErrorCode.SASL_AUTHENTICATION_FAILED, step.message))
    if step.principal is not None:
        reauth_ms = int(ctx.config.get("connections.max.reauth.ms"))
        refused = authenticated(conn, sasl, step.principal, reauth_ms, ctx.version >= 1)
        if refused is not None:
            sasl.log_failure(conn, refused)
            conn.close_after_reply()
            return _after_delay(ctx, _answer(ErrorCode.SASL_AUTHENTICATION_FAILED, f"Authentication failed: {refused}"))
        return _answer(ErrorCode.NONE, None, step.reply, reauth_ms)
    return _answer(ErrorCode.NONE, None, step.reply)
