"""The connection's write path: a response's file slices go out whole and in place, small
responses as one `send` (pread in), large ones through `sendfile`; a slice whose file shrank
closes that connection and sends nothing of the response.

Runs a real Connection over a socketpair; the listener under it is a stand-in (only its loop
and connection set are used).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.protocol.schema import Out
from samsa.server import network
from samsa.server.connection_quotas import ConnectionQuotas, Limits
from samsa.storage import FileSlice


@pytest.fixture
def pair() -> Iterator[tuple[network.Connection, socket.socket]]:
    loop = asyncio.new_event_loop()
    ours, theirs = socket.socketpair()
    for s in (ours, theirs):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    ours.setblocking(False)
    server = SimpleNamespace(loop=loop, connections=set(), max_request_size=1 << 20,
                             quotas=ConnectionQuotas(loop, Limits), max_pending=500, timed=False)
    conn = network.Connection(server, ours, "test")  # type: ignore[arg-type]
    server.connections.add(conn)
    yield conn, theirs
    conn.close()
    theirs.close()
    loop.close()


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    data = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


def _response(fd: int, position: int, size: int) -> Out:
    out = Out()
    out += b"HEAD"
    out.slices.append((len(out), FileSlice(fd, position, size, 0)))
    out += b"TAIL"
    return out


def _receive(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    sock.settimeout(5)
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        assert chunk, "connection closed early"
        got += chunk
    return bytes(got)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"sendfile": 0}
    real = os.sendfile

    def counting(*args: Any) -> int:
        counts["sendfile"] += 1
        return real(*args)

    monkeypatch.setattr(network.os, "sendfile", counting)
    return counts


def test_small_response_is_one_chunk_read_from_the_file(pair: Any, segment: Any, calls: dict[str, int]) -> None:
    conn, peer = pair
    fd, data = segment
    size = network.INLINE_MAX - 8
    conn._enqueue(_response(fd, 1000, size))
    assert len(conn.wqueue) == 1 and isinstance(conn.wqueue[0], memoryview)
    conn._on_writable()
    assert _receive(peer, size + 8) == b"HEAD" + data[1000:1000 + size] + b"TAIL"
    assert calls["sendfile"] == 0
    assert not conn.wqueue and conn.queued_out == 0 and not conn.closed


def test_large_response_goes_out_by_sendfile(pair: Any, segment: Any, calls: dict[str, int]) -> None:
    conn, peer = pair
    fd, data = segment
    size = network.INLINE_MAX + 1
    conn._enqueue(_response(fd, 7, size))
    conn._on_writable()
    assert _receive(peer, size + 8) == b"HEAD" + data[7:7 + size] + b"TAIL"
    assert calls["sendfile"] >= 1
    assert conn.queued_out == 0 and not conn.closed


def test_empty_slice_and_several_slices_keep_their_places(pair: Any, segment: Any) -> None:
    conn, peer = pair
    fd, data = segment
    out = Out()
    out += b"A"
    out.slices.append((len(out), FileSlice(fd, 0, 0, 0)))
    out += b"B"
    out.slices.append((len(out), FileSlice(fd, 10, 5, 0)))
    out += b"C"
    out.slices.append((len(out), FileSlice(fd, 100, 3, 0)))
    conn._enqueue(out)
    conn._on_writable()
    assert _receive(peer, 11) == b"AB" + data[10:15] + b"C" + data[100:103]


def test_a_shrunk_segment_closes_the_connection_and_sends_nothing(pair: Any, segment: Any) -> None:
    conn, peer = pair
    fd, data = segment
    conn._enqueue(_response(fd, len(data) - 10, 100))  # runs past the end of the file
    assert conn.closed and not conn.wqueue
    peer.settimeout(5)
    assert peer.recv(100) == b""  # closed, with no partial response before it


def test_an_unreadable_segment_closes_the_connection(pair: Any, tmp_path: Path) -> None:
    conn, peer = pair
    fd = os.open(tmp_path, os.O_RDONLY)  # a directory: pread fails (EISDIR)
    try:
        conn._enqueue(_response(fd, 0, 10))
    finally:
        os.close(fd)
    assert conn.closed and not conn.wqueue
    peer.settimeout(5)
    assert peer.recv(100) == b""
