"""Listeners and connections: frames in, responses out, on raw non-blocking sockets.

How it works: each connection registers a reader callback with the event loop and pulls bytes
with `recv_into`. A frame is `int32 size` + body, cut by `protocol/framing.py`; small frames
are cut from a scratch buffer, large ones (a 1 MB produce) are received straight into a
bytearray of their own, which the produce path then rewrites in place (offsets) and appends to
the log with no copy.

Requests on one connection are processed as they arrive (a pipeline), but answered strictly in
order: each request takes a slot in `pending`; a slot is filled now (most requests) or later,
when the request's `Pending` completes (`responses.py`: a long-poll fetch from inside the
append that satisfies it, an acks=all produce when the high watermark passes its batch, both
delayed operations of the purgatory); the head of `pending` is written as soon as it is
filled. Closing the connection cancels the Pendings still waiting. Responses are
queues of byte chunks and file slices; file slices go out with `os.sendfile` (zero copy) and a
header chunk before one is sent with MSG_MORE. A response of at most `INLINE_MAX` bytes (a
consumer keeping up with the producers gets a few KB per fetch) is read into one chunk and
sent with a single `send` instead: one system call on the latency path, not two.

A frame that is malformed or larger than `socket.request.max.bytes` closes that connection with
one log line; the broker and every other connection carry on.

A client over its quota (`quotas.py`) is throttled as KIP-219 says: `throttle(ms)` stops reading
from the connection (requests already received wait too) until a timer of the loop ends it;
responses already made still go out. One timer per throttled connection, nothing else.

Request timing (`metrics.py`), on a listener with `timed` (the Prometheus endpoint is on): the
handler names the request's `RequestStats` in `request_stats` while it runs; the connection
stamps the read that brought the request, the handler's start and end, the answer being ready,
handed to the socket, and its last byte sent (`sent` counts the bytes the socket took: an
answer is out once `sent` passes where its bytes ended in the write queue). Untimed, a request
pays one flag check.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
from collections import deque
from collections.abc import Callable
from time import perf_counter
from typing import Any

from samsa.protocol.framing import FrameError, FrameSplitter
from samsa.protocol.schema import Out
from samsa.ratelimit import RateLimitedLog
from samsa.server.connection_quotas import ConnectionQuotas, Limits
from samsa.server.metrics import RequestStats
from samsa.server.responses import NO_RESPONSE, Pending
from samsa.server.sasl import ListenerSasl, SaslAuthenticator
from samsa.server.tls import principal_of
from samsa.storage.log import Log

__all__ = ["ANONYMOUS", "NO_RESPONSE", "Connection", "FrameError", "Listener", "Pending"]

log = logging.getLogger("samsa.network")

SCRATCH = 256 * 1024
# Every connection receives into this one buffer (callbacks run one at a time) and copies out
# what it got. `recv(SCRATCH)` would allocate 256 KiB per call: above malloc's mmap threshold,
# so each small request cost an mmap, a page fault, an mremap and a munmap (~20% of the
# broker's CPU at 10k small produces and fetches a second).
_SCRATCH_VIEW = memoryview(bytearray(SCRATCH))
MAX_PENDING = 500  # requests in flight on one connection before we stop reading (queued.max.requests)
MAX_QUEUED_OUT = 32 * 1024 * 1024  # bytes waiting to be written before we stop reading
INLINE_MAX = 64 * 1024  # responses up to this size with file slices: pread + one send, no sendfile
ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal for a client that has not authenticated


class _Slot:
    __slots__ = ("done", "out", "stats", "t0", "t1", "t2", "t3", "t4", "waiting")

    def __init__(self) -> None:
        self.done = False
        self.out: Out | None = None
        self.waiting: Pending | None = None
        self.stats: RequestStats | None = None  # timed: the request's metrics (then t0..t4 are set)
        self.t0 = self.t1 = self.t2 = self.t3 = self.t4 = 0.0  # (see the module doc)


class Connection:
    def __init__(self, server: Listener, sock: socket.socket, peer: Any) -> None:
        self.server = server
        self.loop = server.loop
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.peer_str = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.quotas = server.quotas
        self.max_pending = server.max_pending
        self.last_active = 0.0
        self._held = 0  # bytes the splitter held at the last count (ConnectionQuotas' memory)
        self.frames = FrameSplitter(min_size=8, max_size=server.max_request_size, what="request",
                                    max_size_name="socket.request.max.bytes", scratch=_SCRATCH_VIEW)
        self.pending: deque[_Slot] = deque()
        self.wqueue: deque[Any] = deque()  # memoryview chunks or (fd, offset, count) lists
        self.queued_out = 0
        self.writing = False
        self.reading = False
        self.closed = False
        self.client_id: str | None = None
        # Who the client is: set by the SASL authenticator once the connection has authenticated
        # (later); requests read it through their context (`RequestContext.principal`).
        self.principal = ANONYMOUS
        self.state: dict[str, Any] = {}  # per-connection state for handlers
        # On a SASL listener until the client has authenticated (sasl.py; the dispatcher and the
        # SaslHandshake/SaslAuthenticate handlers use it); None otherwise.
        self.sasl: SaslAuthenticator | None = None
        self.sasl_mechanism: str | None = None  # how it authenticated (re-authentication keeps it)
        self.session_expiry = 0.0  # monotonic time its SASL session ends (0: never; KIP-368)
        self.closing_after_reply = False
        self.throttled = False  # muted by a quota until `_unthrottle` runs
        self._unthrottle: asyncio.TimerHandle | None = None
        # Request timing (see the module doc)
        self.timed: bool = server.timed
        self.request_stats: RequestStats | None = None  # set by the handler of the request being dispatched
        self.read_at = 0.0
        self.sent = 0  # bytes the socket has taken
        self.sending: deque[tuple[int, _Slot]] = deque()  # timed answers written, not all sent yet

    @property
    def listener(self) -> str:
        """The name of the listener this connection came in on (PLAINTEXT, SSL, ...)."""
        return self.server.name

    # -- reading --------------------------------------------------------------------------------

    def start(self) -> None:
        self._resume_reading()

    def _resume_reading(self) -> None:
        if not self.reading and not self.closed and not self.closing_after_reply and not self.throttled:
            self.loop.add_reader(self.fd, self._on_readable)
            self.reading = True

    def _pause_reading(self) -> None:
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False

    def _on_readable(self) -> None:
        frames = self.frames
        try:
            n = self.sock.recv_into(frames.buffer())
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            log.debug("connection %s read error: %s", self.peer_str, e)
            self.close()
            return
        if not n:
            self.close()
            return
        frames.advance(n)
        self._process_frames()

    def _process_frames(self) -> None:
        """Dispatch every whole frame received (bytes are in `frames`)."""
        frames = self.frames
        quotas = self.quotas
        self.last_active = quotas.now
        if self.timed:
            self.read_at = perf_counter()
        if quotas.memory_limit > 0:
            self._cut_frames()
            return
        try:
            while not self.closed and not self.throttled:
                frame = frames.next_frame()
                if frame is None:
                    break
                self._dispatch(frame)
        except FrameError as e:
            log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()

    def _cut_frames(self) -> None:
        """`_on_readable`'s frame loop under queued.max.request.bytes: a large request starts
        only while the broker's requests hold less than that; what this one holds is counted."""
        frames, quotas = self.frames, self.quotas
        if self.timed:
            self.read_at = perf_counter()
        allow = quotas.memory_available()
        try:
            while not self.closed and not self.throttled:
                frame = frames.next_frame(allow)
                if frame is None:
                    if frames.blocked:  # wait for memory, reading nothing
                        self._pause_reading()
                        quotas.wait_for_memory(self)
                    break
                self._dispatch(frame)
        except FrameError as e:
            log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()
        held = frames.held
        if held != self._held and not self.closed:
            quotas.hold(held - self._held)
            self._held = held

    def retry_frames(self) -> None:
        """Memory was released: cut what is buffered, then read again (ConnectionQuotas)."""
        if self.closed:
            return
        self._cut_frames()
        if not self.frames.blocked and len(self.pending) <= self.max_pending and self.queued_out <= MAX_QUEUED_OUT:
            self._resume_reading()

    def stalled_mid_request(self) -> bool:
        """Part of a request arrived and the rest has not (ConnectionQuotas' stall check)."""
        return self.frames.held > 0 and not self.frames.blocked and not self.throttled

    def throttle(self, ms: int) -> None:
        """Read and dispatch nothing from this client for `ms` milliseconds from now (a quota's
        throttle time, KIP-219); a longer throttle already in force stays."""
        if ms <= 0 or self.closed:
            return
        until = self.loop.time() + ms / 1000.0
        timer = self._unthrottle
        if timer is not None:
            if timer.when() >= until:
                return
            timer.cancel()
        self.throttled = True
        self._pause_reading()
        self._unthrottle = self.loop.call_at(until, self._end_throttle)

    def _end_throttle(self) -> None:
        self._unthrottle = None
        self.throttled = False
        if self.closed:
            return
        self.last_active = self.quotas.now
        if self.frames.held:
            self._process_frames()  # requests received before the mute
        if (not self.throttled and not self.frames.blocked and len(self.pending) <= self.max_pending
                and self.queued_out <= MAX_QUEUED_OUT):
            self._resume_reading()

    def _dispatch(self, frame: bytearray) -> None:
        timed = self.timed
        t1 = 0.0
        if timed:
            self.request_stats = None
            t1 = perf_counter()
        try:
            result = self.server.handler(self, frame)
        except FrameError as e:
            log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()
            return
        stats = self.request_stats if timed else None
        if result is NO_RESPONSE:
            if stats is not None:
                stats.record_no_response(self.read_at, t1, perf_counter())
            return
        slot = _Slot()
        if stats is not None:
            slot.stats = stats
            slot.t0 = self.read_at
            slot.t1 = t1
            slot.t2 = slot.t3 = perf_counter()
        self.pending.append(slot)
        if isinstance(result, Out) or result is None:
            slot.done = True
            slot.out = result
            if len(self.pending) == 1:
                self._flush_pending()
        else:
            slot.waiting = result
            result.on_done(lambda out, error, s=slot: self._pending_done(s, out, error))
        if len(self.pending) > self.max_pending:
            self._pause_reading()

    def _pending_done(self, slot: _Slot, out: Out | None, error: BaseException | None) -> None:
        """Fill `slot` with its response, or close the connection on the request's error."""
        slot.waiting = None
        if self.closed:
            return
        if slot.stats is not None:
            slot.t3 = perf_counter()
        if error is not None:
            if isinstance(error, FrameError):
                log.warning("closing connection from %s: %s", self.peer_str, error)
            else:
                log.error("internal error on a request from %s", self.peer_str, exc_info=error)
            self.close()
            return
        slot.done = True
        slot.out = out
        self._flush_pending()

    def _flush_pending(self) -> None:
        pending = self.pending
        while pending and pending[0].done:
            slot = pending.popleft()
            out = slot.out
            if out is not None:
                self._enqueue(out)
            stats = slot.stats
            if stats is not None:  # timed: sent once `sent` passes its end
                slot.t4 = perf_counter()
                if out is None:  # (nothing to send)
                    stats.record(slot.t0, slot.t1, slot.t2, slot.t3, slot.t4, slot.t4)
                else:
                    self.sending.append((self.sent + self.queued_out, slot))
        if self.queued_out > MAX_QUEUED_OUT or len(pending) > self.max_pending:
            self._pause_reading()
        elif not self.reading and not self.frames.blocked:
            self._resume_reading()
        if self.wqueue and not self.writing:
            self._on_writable()

    # -- writing --------------------------------------------------------------------------------

    def _answers_sent(self) -> None:
        """Record the timed answers whose last byte the socket has taken."""
        sending, sent = self.sending, self.sent
        now = perf_counter()
        while sending and sending[0][0] <= sent:
            slot = sending.popleft()[1]
            assert slot.stats is not None
            slot.stats.record(slot.t0, slot.t1, slot.t2, slot.t3, slot.t4, now)

    def _enqueue(self, out: Out) -> None:
        slices = out.slices
        if slices and out.total_size <= INLINE_MAX:
            try:
                chunk = _inline(out)
            except (FrameError, OSError) as e:  # as a failed sendfile would: this connection only
                log.warning("closing connection from %s: %s", self.peer_str, e)
                self.close()
                return
            self.wqueue.append(memoryview(chunk))
            self.queued_out += len(chunk)
            return
        view = memoryview(out)
        start = 0
        for pos, sl in slices:
            if pos > start:
                self.wqueue.append(view[start:pos])
            if sl.size:
                self.wqueue.append([sl.fd, sl.position, sl.size])
            start = pos
        if start < len(out):
            self.wqueue.append(view[start:])
        self.queued_out += out.total_size

    def close_after_reply(self) -> None:
        """Read nothing more; close once what is queued (the reply being made) is written."""
        self.closing_after_reply = True
        self._pause_reading()

    def _on_writable(self) -> None:
        q = self.wqueue
        sock = self.sock
        sent_any = bool(q)
        try:
            while q:
                item = q[0]
                if isinstance(item, memoryview):
                    flags = socket.MSG_MORE if len(q) > 1 else 0
                    n = sock.send(item, flags)
                    self.queued_out -= n
                    self.sent += n
                    if n < len(item):
                        q[0] = item[n:]
                        break
                    q.popleft()
                else:
                    fd, offset, count = item
                    n = os.sendfile(self.fd, fd, offset, count)
                    if n == 0:
                        raise FrameError("log segment shrank under a fetch")
                    self.queued_out -= n
                    self.sent += n
                    if n < count:
                        item[1] += n
                        item[2] -= n
                        break
                    q.popleft()
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.ECONNRESET):
                log.debug("connection %s write error: %s", self.peer_str, e)
            self.close()
            return
        except FrameError as e:
            log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()
            return
        if self.sending:
            self._answers_sent()
        if not q and self.closing_after_reply and not self.pending:
            self.close()
            return
        if q and not self.writing:
            self.loop.add_writer(self.fd, self._on_writable)
            self.writing = True
        elif not q and self.writing:
            self.loop.remove_writer(self.fd)
            self.writing = False
        if sent_any:
            self.last_active = self.quotas.now
        if not q and not self.reading and len(self.pending) <= self.max_pending and not self.frames.blocked:
            self._resume_reading()

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pause_reading()
        if self._unthrottle is not None:
            self._unthrottle.cancel()
            self._unthrottle = None
        if self.writing:
            self.loop.remove_writer(self.fd)
            self.writing = False
        self.wqueue.clear()
        waiting = [slot.waiting for slot in self.pending if slot.waiting is not None]
        self.pending.clear()
        for w in waiting:
            w.cancel()
        try:
            self.sock.close()
        except OSError:
            pass
        self.server.connections.discard(self)
        self.quotas.removed(self, self._held)
        self._held = 0


_TLS_RAW = memoryview(bytearray(SCRATCH))  # TLS records as they arrive (then decrypted into `frames`)
_TLS_FILE = memoryview(bytearray(SCRATCH))  # fetched file bytes on their way into TLS records
_TLS_OUT_PIECE = 64 * 1024
_tls_log = RateLimitedLog(log, 10.0)


class TlsConnection(Connection):
    """A connection on an SSL listener: the same frames and responses, through an
    `ssl.SSLObject` over two memory BIOs, so that the socket stays this module's (non-blocking,
    on the loop's reader and writer callbacks). Responses are encrypted in memory: file slices
    are read in (no sendfile under TLS). A failed handshake, a plaintext client, or any TLS
    error closes the connection with one rate-limited log line."""

    def __init__(self, server: Listener, sock: socket.socket, peer: Any) -> None:
        super().__init__(server, sock, peer)
        assert server.ssl_context is not None
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = server.ssl_context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.handshaking = True

    def _on_readable(self) -> None:
        try:
            n = self.sock.recv_into(_TLS_RAW)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            log.debug("connection %s read error: %s", self.peer_str, e)
            self.close()
            return
        if not n:
            self.close()
            return
        self.incoming.write(_TLS_RAW[:n])
        self._drain()

    def _drain(self) -> None:
        """Handshake, then decrypt what arrived into frames and dispatch them."""
        if self.handshaking:
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self._send_tls()
                return
            except (ssl.SSLError, OSError, ValueError) as e:
                self._tls_failed("TLS handshake", e)
                return
            self.handshaking = False
            self._send_tls()
            principal = principal_of(self.tls.getpeercert(), self.server.principal_rules)
            if principal is not None:
                self.principal = principal
        frames = self.frames
        # One read returns one TLS record's plaintext, and clients send small records
        # (librdkafka's are ~2 KB): this loop runs ~500 times per MB, so it does little. The
        # SSLObject's own method is called (not ssl.py's wrapper of it), and the frames are
        # cut only once no large frame is half-received.
        read = self.tls._sslobj.read  # type: ignore[attr-defined]
        while self.reading and not self.closed and not frames.blocked:
            try:
                if frames.mid_frame:  # the rest of a large frame: straight into it
                    if frames.fill(read):
                        self._process_frames()
                        continue
                else:
                    buf = frames.buffer()
                    try:
                        n = read(len(buf), buf)  # (with a buffer: how many bytes)
                    finally:
                        del buf  # (the frame buffer may grow next: no view of it may be left here)
                    if n:
                        frames.advance(n)
                        if not frames.mid_frame:
                            self._process_frames()
                        continue
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                pass
            except (ssl.SSLError, ValueError) as e:
                self._tls_failed("TLS", e)
                return
            # A read of 0 bytes: the client's close_notify (no data raises SSLWantReadError).
            self._shut_down()
            return
        self._send_tls()  # (TLS 1.3 session tickets and the like)

    def _shut_down(self) -> None:
        try:
            self.tls.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        self.close_after_reply()
        self._send_tls()
        if not self.wqueue:
            self.close()

    def _resume_reading(self) -> None:
        was = self.reading
        super()._resume_reading()
        if not was and self.reading and (self.tls.pending() or self.incoming.pending):
            self.loop.call_soon(self._drain)  # decrypted bytes wait: the socket will not say so

    def _tls_failed(self, what: str, e: BaseException) -> None:
        _tls_log.warning(f"tls {self.server.name}", "%s failed with %s on listener %s: %s; closing the connection",
                         what, self.peer_str, self.server.name, getattr(e, "reason", None) or e)
        self.close()

    def _send_tls(self) -> None:
        data = self.outgoing.read()
        if data:
            self.wqueue.append(memoryview(data))
            self.queued_out += len(data)
            if not self.writing:
                self._on_writable()

    def _enqueue(self, out: Out) -> None:
        """Encrypt the response part by part: its bytes as they are, its file slices read in
        256 KiB pieces into one reused buffer; the TLS records go to the write queue in 64 KiB
        pieces. (One whole-response copy, a join and one big read of the BIO each allocated
        ~1 MB per fetch: page faults that cost more than the encryption.)"""
        view = memoryview(out)
        start = 0
        try:
            for pos, sl in out.slices:
                if pos > start:
                    self._encrypt(view[start:pos])
                if sl.size:
                    self._encrypt_file(sl.fd, sl.position, sl.size)
                start = pos
            if start < len(view):
                self._encrypt(view[start:])
        except (FrameError, OSError, ssl.SSLError) as e:
            log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()

    def _encrypt(self, data: memoryview) -> None:
        while data:
            n = self.tls.write(data)
            data = data[n:]
        outgoing, wqueue = self.outgoing, self.wqueue
        while outgoing.pending:
            chunk = outgoing.read(_TLS_OUT_PIECE)
            wqueue.append(memoryview(chunk))
            self.queued_out += len(chunk)

    def _encrypt_file(self, fd: int, position: int, size: int) -> None:
        buf = _TLS_FILE
        while size:
            want = min(size, len(buf))
            n = os.preadv(fd, [buf[:want]], position)
            if n <= 0:
                raise FrameError("log segment shrank under a fetch")
            self._encrypt(buf[:n])
            position += n
            size -= n


def _inline(out: Out) -> bytes:
    """`out` with its file slices read in: the whole response as one chunk."""
    view = memoryview(out)
    parts: list[Any] = []
    start = 0
    for pos, sl in out.slices:
        parts.append(view[start:pos])
        if sl.size:
            data = Log.read_bytes(sl)
            if len(data) != sl.size:  # short only when the file shrank
                raise FrameError("log segment shrank under a fetch")
            parts.append(data)
        start = pos
    parts.append(view[start:])
    return b"".join(parts)


class ListenError(OSError):
    """A listener's address cannot be bound; the message names the listener and the address."""

    def __str__(self) -> str:
        return str(self.strerror)


class Listener:
    """One listening socket (a Kafka listener such as PLAINTEXT://127.0.0.1:9092)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        name: str,
        host: str,
        port: int,
        handler: Callable[[Connection, bytearray], Any],  # Out, None (nothing to send), Pending or NO_RESPONSE
        max_request_size: int,
        *,
        quotas: ConnectionQuotas | None = None,
        max_pending: int = MAX_PENDING,  # queued.max.requests
        backlog: int = 1024,  # socket.listen.backlog.size
        ssl_context: ssl.SSLContext | None = None,  # an SSL listener's (tls.py)
        principal_rules: list[Any] | None = None,  # ssl.principal.mapping.rules, parsed
        sasl: ListenerSasl | None = None,  # a SASL listener's mechanisms and users (sasl.py)
        timed: bool = False,  # connections time their requests (metrics.py; the Prometheus endpoint is on)
        send_buffer: int = -1,  # socket.send.buffer.bytes: each connection's SO_SNDBUF (-1: the OS's)
        receive_buffer: int = -1,  # socket.receive.buffer.bytes: SO_RCVBUF (-1: the OS's)
    ) -> None:
        self.loop = loop
        self.name = name
        self.host = host
        self.port = port
        self.handler = handler
        self.max_request_size = max_request_size
        self.quotas = quotas if quotas is not None else ConnectionQuotas(loop, Limits)
        self.max_pending = max_pending
        self.backlog = backlog
        self.connections: set[Connection] = set()
        self.sock: socket.socket | None = None
        self._accepting = False
        self.ssl_context = ssl_context
        self.principal_rules = principal_rules if principal_rules is not None else [None]
        self.connection_class: type[Connection] = TlsConnection if ssl_context is not None else Connection
        self.sasl = sasl
        self.timed = timed
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.accepted = 0  # connections accepted since the start (closed: accepted - len(connections))

    def start(self) -> None:
        """Bind and listen; a ListenError naming the listener and its address if that fails."""
        where = f"{self.host or '0.0.0.0'}:{self.port}"
        try:
            infos = socket.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        except socket.gaierror as e:
            raise ListenError(errno.EADDRNOTAVAIL,
                              f"listener {self.name} cannot resolve {where}: {e.strerror}") from None
        family, _, _, _, addr = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.receive_buffer != -1:  # (on the listening socket, as Kafka: before the window is agreed)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            sock.bind(addr)
            sock.listen(self.backlog)
        except OSError as e:
            sock.close()
            hint = " (another process listens there: stop it or choose another port)" \
                if e.errno == errno.EADDRINUSE else ""
            raise ListenError(e.errno, f"listener {self.name} cannot listen on {where}: {e.strerror}{hint}") from None
        sock.setblocking(False)
        self.sock = sock
        self.port = sock.getsockname()[1]

    def serve(self) -> None:
        """Start accepting: connections made since start() waited in the backlog."""
        self._start_accepting()

    def _start_accepting(self) -> None:
        if self.sock is not None and not self._accepting:
            self.loop.add_reader(self.sock.fileno(), self._on_accept)
            self._accepting = True

    def _stop_accepting(self) -> None:
        if self.sock is not None and self._accepting:
            self.loop.remove_reader(self.sock.fileno())
            self._accepting = False

    def _on_accept(self) -> None:
        assert self.sock is not None
        quotas = self.quotas
        for _ in range(64):
            if quotas.at_max():  # max.connections: the rest wait in the backlog until one closes
                self._stop_accepting()
                quotas.pause_accepting(self._start_accepting)
                return
            try:
                csock, peer = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # The socket stays readable: without a pause this would spin at 100% CPU.
                    self._stop_accepting()
                    quotas.accept_failed(self.name, e, self._start_accepting)
                else:
                    log.warning("accept failed on %s: %s", self.name, e)
                return
            host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
            if not quotas.admit(host):  # max.connections.per.ip: closed at once, as Kafka does
                csock.close()
                continue
            csock.setblocking(False)
            try:
                csock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.send_buffer != -1:
                    csock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            except OSError:
                pass
            conn = self.connection_class(self, csock, peer)
            if self.sasl is not None:
                conn.sasl = SaslAuthenticator(self.sasl)
                # Until it has authenticated, a client sends small frames only (Kafka's bound):
                # no one can make the broker hold 100 MB without credentials.
                conn.frames.max_size = min(conn.frames.max_size, self.sasl.max_receive)
                conn.frames.max_size_name = "sasl.server.max.receive.size"
            self.connections.add(conn)
            self.accepted += 1
            quotas.added(conn)
            conn.start()

    def close_connections(self) -> int:
        """Close every connection (the listener goes on accepting); returns how many."""
        conns = list(self.connections)
        for conn in conns:
            conn.close()
        return len(conns)

    def close(self) -> None:
        if self.sock is not None:
            self._stop_accepting()
            self.sock.close()
            self.sock = None
        for conn in list(self.connections):
            conn.close()
