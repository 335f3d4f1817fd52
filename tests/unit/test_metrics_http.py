"""The metrics endpoint's HTTP server against hostile and ordinary clients, in process: every
bad request costs its own connection only, and the server keeps answering."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from samsa.server import metrics_http
from samsa.server.metrics_http import MetricsServer

BODY = b"# TYPE x gauge\nx 1\n"


def run(test: Callable[[MetricsServer], Awaitable[None]], render: Callable[[], Awaitable[bytes]] | None = None) -> None:
    async def main() -> None:
        async def default() -> bytes:
            return BODY

        server = MetricsServer(asyncio.get_running_loop(), "127.0.0.1", 0, render or default)
        await server.start()
        try:
            await asyncio.wait_for(test(server), 20)
        finally:
            server.close()

    asyncio.run(main())


async def exchange(server: MetricsServer, data: bytes, read: bool = True) -> bytes:
    """Send `data`, then read until the server closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(data)
    await writer.drain()
    got = await reader.read() if read else b""
    writer.close()
    return got


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def test_get_metrics_answers_the_text_and_closes() -> None:
    async def test(server: MetricsServer) -> None:
        answer = await exchange(server, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")
        head, body = answer.split(b"\r\n\r\n", 1)
        assert status(answer) == 200 and body == BODY
        assert b"Content-Type: text/plain; version=0.0.4; charset=utf-8" in head
        assert f"Content-Length: {len(BODY)}".encode() in head
        head_only = await exchange(server, b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n")
        assert status(head_only) == 200 and head_only.endswith(b"\r\n\r\n")

    run(test)


@pytest.mark.parametrize("request_bytes,code", [
    (b"GET /other HTTP/1.1\r\n\r\n", 404),
    (b"GET / HTTP/1.1\r\n\r\n", 404),
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", 405),
    (b"GET /metrics\r\n\r\n", 400),
    (b"\x00\x00\x00\x10\x00\x12\x00\x03garbage\r\n\r\n", 400),
    (b"GET metrics HTTP/1.1\r\n\r\n", 400),
    (b"GET /metrics SPDY/3\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\n" + b"X-Big: " + b"a" * 10_000 + b"\r\n\r\n", 431),
])
def test_a_bad_request_gets_its_error_and_the_server_goes_on(request_bytes: bytes, code: int) -> None:
    async def test(server: MetricsServer) -> None:
        assert status(await exchange(server, request_bytes)) == code
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200

    run(test)


def test_an_endless_head_is_cut_at_its_limit() -> None:
    async def test(server: MetricsServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n")
        for _ in range(100):  # headers that never end
            if writer.is_closing():
                break
            writer.write(b"X-A: " + b"b" * 1000 + b"\r\n")
            try:
                await writer.drain()
            except ConnectionError:
                break
        try:
            answer = await reader.read()
        except ConnectionResetError:  # (it closed while our headers kept coming)
            answer = b""
        assert answer == b"" or status(answer) == 431
        writer.close()
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200

    run(test)


def test_a_slowloris_is_cut_and_others_are_served_meanwhile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_http, "HEAD_TIMEOUT_S", 0.3)

    async def test(server: MetricsServer) -> None:
        slow = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
        for _, w in slow:
            w.write(b"GET /metr")  # and nothing more
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200
        for r, w in slow:
            assert await r.read() == b""  # closed by the server
            w.close()
        assert not server.connections

    run(test)


def test_connections_over_the_limit_are_closed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_http, "MAX_CONNECTIONS", 3)

    async def test(server: MetricsServer) -> None:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        for _, w in held:
            w.write(b"GET")
            await w.drain()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
        try:
            assert await reader.read() == b""
        except ConnectionResetError:
            pass
        writer.close()
        for _, w in held:
            w.close()
        for _ in range(100):  # the server sees the closes on its next turns
            if not server.connections:
                break
            await asyncio.sleep(0.01)
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200

    run(test)


def test_scrapes_at_once_share_one_rendering() -> None:
    release = asyncio.Event()
    calls: list[int] = []

    async def render() -> bytes:
        calls.append(1)
        await release.wait()
        return BODY

    async def test(server: MetricsServer) -> None:
        scrapes = [asyncio.ensure_future(exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) for _ in range(4)]
        while len(server.connections) < 4 or server._rendering is None:
            await asyncio.sleep(0.005)
        release.set()
        answers = await asyncio.gather(*scrapes)
        assert all(status(a) == 200 and a.endswith(BODY) for a in answers)
        assert len(calls) == 1

    run(test, render)


def test_a_failing_rendering_is_a_500_and_the_next_one_works(caplog: pytest.LogCaptureFixture) -> None:
    fail = [True]

    async def render() -> bytes:
        if fail[0]:
            fail[0] = False
            raise RuntimeError("a bug")
        return BODY

    async def test(server: MetricsServer) -> None:
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 500
        assert status(await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200

    run(test, render)
    assert any("a bug" in r.getMessage() for r in caplog.records)


def test_a_client_that_leaves_mid_scrape_costs_nothing() -> None:
    release = asyncio.Event()

    async def render() -> bytes:
        await release.wait()
        return BODY * 100_000

    async def test(server: MetricsServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
        await writer.drain()
        while server._rendering is None:
            await asyncio.sleep(0.005)
        writer.close()
        release.set()
        answer: Any = await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert status(answer) == 200

    run(test, render)


def test_a_client_that_half_closes_after_its_request_still_gets_the_answer() -> None:
    async def test(server: MetricsServer) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        writer.write_eof()  # (as `printf ... | nc` does)
        answer = await reader.read()
        assert status(answer) == 200 and answer.endswith(BODY)
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metr")
        writer.write_eof()  # half a request, then nothing more: closed without an answer
        assert await reader.read() == b""
        writer.close()

    run(test)
