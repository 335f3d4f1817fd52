"""The frame splitter: whole frames out of any chunking of a byte stream, large frames received
in place into a bytearray that grows as bytes arrive, sizes refused as soon as they are read.
Then the four readers built on it, each over a real socket: the broker's connection, the
replica fetcher's, the Spark client's and the CLI's, with the errors each raised before."""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.cli.client import raw_request
from samsa.cli.common import CliError
from samsa.protocol import framing
from samsa.protocol.framing import FrameError, FrameSplitter
from samsa.protocol.messages import encode_response
from samsa.server import network, replica_fetcher
from samsa.server.connection_quotas import ConnectionQuotas, Limits
from samsa.spark.client import _Connection


def framed(*bodies: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def body(n: int, seed: int = 0) -> bytes:
    return bytes((seed + i) % 251 for i in range(n))


def backing(view: memoryview) -> bytearray:
    """The bytearray a view handed out by `buffer()` looks into."""
    assert isinstance(view.obj, bytearray)
    return view.obj


def drain(frames: FrameSplitter) -> list[bytes]:
    out = []
    while (f := frames.next_frame()) is not None:
        out.append(bytes(f))
    return out


def receive(frames: FrameSplitter, data: bytes, chunks: list[int] | None = None) -> list[bytes]:
    """Drive `frames` as a socket reader does: recv_into(buffer()), advance(n), next_frame()...
    `chunks` caps what each "recv" delivers (the kernel hands out what it has)."""
    got: list[bytes] = []
    pos, i = 0, 0
    while pos < len(data):
        cap = chunks[i % len(chunks)] if chunks else len(data)
        i += 1
        into = frames.buffer()
        n = min(len(into), cap, len(data) - pos)
        into[:n] = data[pos : pos + n]
        del into  # a view of the splitter's buffer must not outlive the next call (nor be released)
        frames.advance(n)
        pos += n
        got += drain(frames)
    return got


def request_splitter(max_size: int = 1 << 20, **kw: object) -> FrameSplitter:
    return FrameSplitter(min_size=8, max_size=max_size, what="request",
                         max_size_name="socket.request.max.bytes", **kw)  # type: ignore[arg-type]


# -- whole frames and chunking -------------------------------------------------------------------


def test_whole_frame_then_need_more_data() -> None:
    frames = FrameSplitter()
    assert frames.next_frame() is None
    frames.feed(framed(b"hello"))
    frame = frames.next_frame()
    assert isinstance(frame, bytearray) and frame == b"hello"
    assert frames.next_frame() is None


def test_many_frames_in_one_chunk_in_order() -> None:
    bodies = [body(n, n) for n in (0, 1, 7, 8, 100, 3000)]
    frames = FrameSplitter()
    frames.feed(framed(*bodies))
    assert drain(frames) == bodies


def test_every_split_point_of_a_stream() -> None:
    bodies = [body(9, 1), body(0), body(40, 2), body(200, 3), body(8, 4)]
    data = framed(*bodies)
    for cut in range(len(data) + 1):
        frames = FrameSplitter(scratch=bytearray(64))  # the 200-byte frame goes in place
        frames.feed(data[:cut])
        got = drain(frames)
        frames.feed(data[cut:])
        assert got + drain(frames) == bodies, cut


def test_one_byte_at_a_time_through_buffer_and_advance() -> None:
    bodies = [body(10), body(300, 5), body(8)]
    frames = FrameSplitter(scratch=bytearray(32), prealloc=16)
    assert receive(frames, framed(*bodies), chunks=[1]) == bodies


def test_frames_are_writable_and_independent() -> None:
    frames = FrameSplitter()
    frames.feed(framed(b"aaaa", b"bbbb"))
    first, second = frames.next_frame(), frames.next_frame()
    assert first is not None and second is not None
    first[0:4] = b"xxxx"  # the produce path rewrites a frame in place
    assert second == b"bbbb"


def test_a_shared_scratch_serves_several_splitters() -> None:
    scratch = bytearray(16)
    a, b = FrameSplitter(scratch=scratch), FrameSplitter(scratch=scratch)
    da, db = framed(body(5, 1), body(30, 2)), framed(body(12, 3))
    got: dict[str, list[bytes]] = {"a": [], "b": []}
    pa = pb = 0
    while pa < len(da) or pb < len(db):
        for name, frames, data, pos in (("a", a, da, pa), ("b", b, db, pb)):
            if pos >= len(data):
                continue
            into = frames.buffer()
            n = min(len(into), 5, len(data) - pos)
            into[:n] = data[pos : pos + n]
            del into
            frames.advance(n)
            got[name] += drain(frames)
            if name == "a":
                pa += n
            else:
                pb += n
    assert got == {"a": [body(5, 1), body(30, 2)], "b": [body(12, 3)]}


# -- a large frame, received in place --------------------------------------------------------------


def test_large_frame_is_received_into_the_bytearray_handed_out() -> None:
    big = body(100_000, 7)
    data = framed(big, b"after!!!")
    frames = FrameSplitter(scratch=bytearray(1024), prealloc=None)  # (growing: the next test)
    into = frames.buffer()
    into[:1024] = data[:1024]
    del into
    frames.advance(1024)
    assert frames.next_frame() is None
    into = frames.buffer()  # now the rest of the frame: its own buffer, not the scratch
    target = backing(into)
    assert len(into) == len(big) - 1020 and len(target) == len(big)
    del into
    pos = 1024
    while True:
        into = frames.buffer()
        assert backing(into) is target
        n = min(len(into), 4096)
        into[:n] = data[pos : pos + n]
        del into
        frames.advance(n)
        pos += n
        frame = frames.next_frame()
        if frame is not None:
            break
    assert frame is target and frame == big  # the same bytearray: no copy on the way out
    assert pos == 4 + len(big)
    assert receive(frames, data[pos:]) == [b"after!!!"]


def test_a_promised_size_is_allocated_as_bytes_arrive() -> None:
    size = 1_000_000
    data = framed(body(size, 3))
    frames = FrameSplitter(scratch=bytearray(4096), prealloc=64 * 1024)
    frames.feed(data[:4096])
    assert frames.next_frame() is None
    sizes, pos = [], 4096
    while pos < len(data):
        into = frames.buffer()
        sizes.append(len(backing(into)))
        assert len(backing(into)) <= max(64 * 1024, 2 * (pos - 4))  # at most twice what arrived
        n = min(len(into), 10_000)
        into[:n] = data[pos : pos + n]
        del into
        frames.advance(n)
        pos += n
    frame = frames.next_frame()
    assert frame == data[4:] and len(frame) == size
    assert sorted(set(sizes)) == [64 * 1024, 128 * 1024, 256 * 1024, 512 * 1024, size]


def test_a_length_prefix_alone_takes_a_small_bound_whatever_it_promises() -> None:
    """The slowloris case: 4 bytes promising 100 MB cost the default first allocation."""
    frames = FrameSplitter(scratch=bytearray(64 * 1024))
    frames.feed(struct.pack(">i", 100_000_000))
    assert frames.next_frame() is None and frames.receiving_large
    assert frames.held <= 16 * 1024
    frames.feed(b"x" * 40_000)  # what a peer actually sends is what it costs, a few times at most
    assert frames.next_frame() is None and frames.held <= 2 * 40_000


def test_a_large_frame_is_not_started_while_not_allowed() -> None:
    frames = FrameSplitter(scratch=bytearray(1024))
    frames.feed(framed(b"small!!!", body(5000, 2))[:2000])
    assert frames.next_frame(allow_large=False) == b"small!!!"  # small ones are cut as ever
    assert frames.next_frame(allow_large=False) is None and frames.blocked
    assert not frames.receiving_large and frames.held == 2000 - 12  # nothing taken for it
    assert frames.next_frame() is None and not frames.blocked and frames.receiving_large
    frames.feed(framed(body(5000, 2))[2000 - 12:])
    assert frames.next_frame() == body(5000, 2)


def test_prealloc_none_allocates_the_whole_frame_at_once() -> None:
    frames = FrameSplitter(scratch=bytearray(64), prealloc=None)
    frames.feed(framed(body(10_000))[:64])
    assert frames.next_frame() is None
    into = frames.buffer()
    assert len(backing(into)) == 10_000
    del into


def test_feed_across_the_end_of_a_large_frame() -> None:
    bodies = [body(500, 1), body(3), body(700, 2), body(9)]
    data = framed(*bodies)
    frames = FrameSplitter(scratch=bytearray(32), prealloc=100)
    frames.feed(data[:40])
    assert drain(frames) == []
    frames.feed(data[40:])  # the rest of the first, then a small one, a large one, a small one
    assert drain(frames) == bodies


# -- sizes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [7, 0, -1, -(2**31)])
def test_request_too_small_for_a_header(size: int) -> None:
    frames = request_splitter()
    frames.feed(struct.pack(">i", size))  # refused before any of the body arrives
    with pytest.raises(FrameError) as e:
        frames.next_frame()
    assert str(e.value) == f"malformed frame: size {size} is too small for a request header"


def test_request_over_the_limit() -> None:
    frames = request_splitter(max_size=1000)
    frames.feed(struct.pack(">i", 1001))
    with pytest.raises(FrameError) as e:
        frames.next_frame()
    assert str(e.value) == "request of 1001 bytes exceeds socket.request.max.bytes=1000"


def test_request_sizes_at_the_bounds_pass() -> None:
    frames = request_splitter(max_size=1000)
    bodies = [body(8), body(1000)]
    frames.feed(framed(*bodies))
    assert drain(frames) == bodies


def test_response_has_no_minimum_but_no_negative_size() -> None:
    frames = FrameSplitter()
    frames.feed(framed(b""))
    assert frames.next_frame() == b""
    frames.feed(struct.pack(">i", -1))
    with pytest.raises(ValueError, match="size -1 is too small for a response header"):
        frames.next_frame()


def test_response_of_any_int32_size_is_accepted_by_default() -> None:
    frames = FrameSplitter()
    frames.feed(struct.pack(">i", 2**31 - 1) + b"abc")
    assert frames.next_frame() is None  # waits for the body, allocating only what it may
    into = frames.buffer()
    assert len(backing(into)) <= 2 << 20
    del into


def test_the_error_stays_after_later_frames_in_the_chunk() -> None:
    frames = request_splitter()
    frames.feed(framed(body(8)) + struct.pack(">i", 3) + b"xyz")
    assert frames.next_frame() == body(8)  # frames before the bad one are handed out
    with pytest.raises(FrameError):
        frames.next_frame()


# -- random chunking --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.one_of(st.integers(8, 80), st.integers(81, 3000)), min_size=1, max_size=12),
    chunks=st.lists(st.integers(1, 700), min_size=1, max_size=20),
    scratch=st.sampled_from([16, 64, 256, 1024]),
    prealloc=st.sampled_from([1, 100, 1000, None]),
    use_feed=st.booleans(),
    native=st.booleans(),
)
def test_random_chunking(sizes: list[int], chunks: list[int], scratch: int, prealloc: int | None,
                         use_feed: bool, native: bool) -> None:
    """With `native`, large frames' bytearrays are made and grown by the C helper, not zeroed;
    without, in Python (zeroed)."""
    with pure_python_buffers(not native):
        _random_chunking(sizes, chunks, scratch, prealloc, use_feed)


@contextmanager
def pure_python_buffers(on: bool) -> Iterator[None]:
    saved = framing._uninit, framing._grow_native
    if on:
        framing._uninit, framing._grow_native = bytearray, None
    try:
        yield
    finally:
        framing._uninit, framing._grow_native = saved


def test_large_frames_are_not_zeroed_first_when_the_helper_is_built() -> None:
    pytest.importorskip("samsa.protocol._recwalk")
    assert framing._uninit is not bytearray and framing._grow_native is not None


def _random_chunking(sizes: list[int], chunks: list[int], scratch: int, prealloc: int | None,
                     use_feed: bool) -> None:
    bodies = [body(n, i) for i, n in enumerate(sizes)]
    data = framed(*bodies)
    frames = request_splitter(scratch=bytearray(scratch), prealloc=prealloc)
    if not use_feed:
        assert receive(frames, data, chunks) == bodies
        return
    got: list[bytes] = []
    pos, i = 0, 0
    while pos < len(data):
        n = chunks[i % len(chunks)]
        frames.feed(memoryview(data)[pos : pos + n])
        pos, i = pos + n, i + 1
        got += drain(frames)
    assert got == bodies


# -- the readers built on it ------------------------------------------------------------------------


def test_broker_connection_cuts_small_and_large_frames(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    got: list[bytearray] = []

    def handler(conn: Any, frame: bytearray) -> Any:
        got.append(frame)
        return network.NO_RESPONSE

    server = SimpleNamespace(loop=loop, connections=set(), max_request_size=2 << 20, handler=handler,
                             quotas=ConnectionQuotas(loop, Limits), max_pending=500, timed=False)
    conn = network.Connection(server, ours, ("peer", 1))  # type: ignore[arg-type]
    bodies = [body(8, 1), body(300_000, 2), body(100, 3), body(1_100_000, 4), body(9, 5)]
    data = framed(*bodies)
    try:
        for pos in range(0, len(data), 50_000):
            theirs.sendall(data[pos : pos + 50_000])
            while select.select([ours], [], [], 0)[0]:
                conn._on_readable()
        assert [bytes(f) for f in got] == bodies and all(type(f) is bytearray for f in got)
        theirs.sendall(struct.pack(">i", 7))
        with caplog.at_level(logging.WARNING, "samsa.network"):
            conn._on_readable()
        assert conn.closed
        assert caplog.messages == [
            "closing connection from peer:1: malformed frame: size 7 is too small for a request header"]
    finally:
        conn.close()
        theirs.close()
        loop.close()


API_VERSIONS = 18


def api_versions_response(n: int) -> bytes:
    """A response to the first request of a connection (correlation id 1), ~6n bytes of body."""
    keys = [{"api_key": i % 100, "min_version": 0, "max_version": 1} for i in range(n)]
    return bytes(encode_response(API_VERSIONS, 0, 1, {"error_code": 0, "api_keys": keys}))


@contextmanager
def scripted_peer(*chunks: bytes, hold: float = 0) -> Iterator[int]:
    """A one-connection server: reads the request, sends `chunks` a moment apart, waits `hold`
    seconds, closes."""
    lsock = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = lsock.accept()
        with conn:
            try:
                conn.recv(65536)
                for c in chunks:
                    conn.sendall(c)
                    time.sleep(0.005)
                time.sleep(hold)
            except OSError:
                pass  # the client gave up first

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield lsock.getsockname()[1]
    finally:
        t.join(5)
        lsock.close()


def pieces(data: bytes, n: int) -> list[bytes]:
    return [data[i : i + n] for i in range(0, len(data), n)]


RESPONSE = api_versions_response(30_000)  # ~180 KB: larger than a client's 64 KiB scratch


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])  # the broker runs on uvloop
@pytest.mark.parametrize("prealloc", [None, 1024])  # 1024: the response's bytearray grows 8 times
def test_replica_fetcher_connection(loop: str, prealloc: int | None) -> None:
    async def request(*chunks: bytes, timeout: float = 5, hold: float = 0) -> Any:
        with scripted_peer(*chunks, hold=hold) as port:
            conn = replica_fetcher.Connection("test")
            conn.frames = FrameSplitter(prealloc=prealloc)
            await asyncio.get_running_loop().create_connection(lambda: conn, "127.0.0.1", port)
            try:
                return await conn.request(API_VERSIONS, 0, {}, timeout)
            finally:
                conn.close()
                await asyncio.sleep(0.01)  # let the transport close

    async def main() -> None:
        msg = await request(*pieces(RESPONSE, 7_000))
        assert len(msg.api_keys) == 30_000
        with pytest.raises(asyncio.IncompleteReadError):  # the leader went away mid-response
            await request(RESPONSE[:100_000])
        with pytest.raises(ValueError, match="size -2 is too small"):
            await request(struct.pack(">i", -2))
        with pytest.raises(TimeoutError):
            await request(RESPONSE[:2], timeout=0.2, hold=0.5)

    uvloop = pytest.importorskip("uvloop") if loop == "uvloop" else None
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None) as runner:
        runner.run(main())


def test_spark_client_connection() -> None:
    with scripted_peer(*pieces(RESPONSE, 7_000)) as port:
        c = _Connection("127.0.0.1", port, 5, "test")
        assert len(c.request(API_VERSIONS, 0, {}).api_keys) == 30_000
        c.close()
    with scripted_peer(RESPONSE[:100_000]) as port:
        c = _Connection("127.0.0.1", port, 5, "test")
        with pytest.raises(ConnectionError, match="the broker closed the connection"):
            c.request(API_VERSIONS, 0, {})
        c.close()
    with scripted_peer(struct.pack(">i", -2)) as port:
        c = _Connection("127.0.0.1", port, 5, "test")
        with pytest.raises(ValueError):
            c.request(API_VERSIONS, 0, {})
        c.close()


def test_cli_raw_request() -> None:
    with scripted_peer(*pieces(RESPONSE, 7_000)) as port:
        assert len(raw_request("127.0.0.1", port, API_VERSIONS, 0, {}, 5).api_keys) == 30_000
    with scripted_peer(RESPONSE[:100_000]) as port, pytest.raises(CliError, match="connection closed by the broker"):
        raw_request("127.0.0.1", port, API_VERSIONS, 0, {}, 5)


def test_fill_receives_a_large_frame_piece_by_piece_growing_as_it_goes() -> None:
    """`fill` (the TLS path: one record's plaintext per read) puts the pieces where `buffer`
    and `advance` would, grows the frame's bytearray as the bytes arrive, stops when the
    source has nothing (0) and keeps what came before an exception."""
    import os

    body = os.urandom(10_000)
    stream = struct.pack(">i", len(body)) + body
    frames = FrameSplitter(scratch=bytearray(256), prealloc=1024)
    frames.feed(stream[:200])
    assert frames.next_frame() is None and frames.mid_frame
    pos = 200
    calls = 0

    def read(n: int, into: memoryview) -> int:
        nonlocal pos, calls
        calls += 1
        if calls == 5:
            raise TimeoutError("the source fails once")
        if calls == 9:
            return 0  # nothing more for now
        k = min(n, 700, len(stream) - pos)
        into[:k] = stream[pos:pos + k]
        pos += k
        return k

    with pytest.raises(TimeoutError):
        frames.fill(read)
    assert frames.fill(read) is False and frames.mid_frame
    assert frames.fill(read) is True and not frames.mid_frame
    assert frames.next_frame() == body
    assert frames.next_frame() is None
