"""Frame splitter: Kafka's `int32 size` + body frames cut out of a byte stream, with no I/O.

How it works (sans-io, as h11): the caller owns the socket; the splitter owns the buffers.

    frames = FrameSplitter(min_size=8, max_size=limit, what="request",
                           max_size_name="socket.request.max.bytes")
    n = sock.recv_into(frames.buffer())   # or: frames.feed(data) with bytes you already have
    frames.advance(n)
    while (frame := frames.next_frame()) is not None:
        handle(frame)                        # a bytearray holding the body, size prefix removed

`buffer()` is where the next bytes should land. Between frames it is the scratch buffer (one
the caller shares, such as the broker's 256 KiB receive buffer, or one of the splitter's own);
`advance(n)` copies what landed there into the splitter's buffer, from which `next_frame()` cuts
whole frames: one bytearray per frame, the only copy. A frame larger than the scratch whose
rest has not arrived yet gets a bytearray of its own: `buffer()` is then the unfilled part of
it, so the rest of a 1 MB produce goes from the kernel straight into the bytearray handed to
the caller, which may rewrite it in place. The view `buffer()` returns is for one receive:
neither keep it past the next call on the splitter nor release it (it may be the scratch).

A size is checked as soon as its 4 bytes are in, before the body arrives: below `min_size` (8
for requests: api key, version, correlation id) or above `max_size` it raises `FrameError` (a
ValueError), and the splitter is not usable after that: close the connection.

Memory follows the bytes that arrived, not the size a peer promised: a frame's own bytearray
starts at eight times what has arrived of it (at least `prealloc`, 16 KiB; at most its size)
and doubles, never past the size, each time it is full. A producer's 1 MiB request usually
comes with a first read of 64-256 KiB, so it takes one or two allocations; a 4-byte prefix
promising 100 MB costs 16 KiB, then at most eight times what was actually sent (thousands of
such connections once pinned 2 MiB each, and 100 MB each before that). Each growth costs a
copy: 1 MB frames arriving in 64 KiB pieces take ~1.3x the framing time of one allocation
(`bench/bench_framing.py`), the price of not trusting the prefix. Growing reallocs the
bytearray. With the C helper (`_recwalk.uninit`/`grow`) neither the first allocation nor a
growth zeroes the memory: the socket fills every byte before the frame is handed out (zeroing
was 5% of the broker's CPU at 1 KiB acks=all). Without it, `bytearray(n)` zeroes, and growing
fills the new part with zeros read from a read-only anonymous mapping (zero pages: no memory
behind them; a fresh `bytes(n)` each time costs page faults that made growing ten times
slower). A bytearray with a live view cannot be resized: hence the rule
above. `bench/bench_framing.py` measures all this.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")
INT32_MAX = 0x7FFFFFFF
DEFAULT_SCRATCH = 64 * 1024  # a splitter's own scratch buffer when the caller gives none
PREALLOC = 16 << 10  # a large frame's first allocation when little of it has arrived
FIRST_GROWTH = 8  # ... else this many times what has
_ZEROS_SIZE = 64 << 20
_zeros: memoryview | None = None  # _ZEROS_SIZE zero bytes, mapped on first use

_grow_native: Callable[[bytearray, int], None] | None
try:
    from samsa.protocol._recwalk import grow as _grow_native
    from samsa.protocol._recwalk import uninit as _uninit
except ImportError:  # not built: zeroed bytearrays
    _uninit = bytearray
    _grow_native = None


class FrameError(ValueError):
    """The stream cannot be trusted any further: close the connection. Raised here for a size
    prefix out of bounds; the broker raises it too for a malformed request (`server/`)."""


class FrameSplitter:
    """Cuts `int32 size` + body frames out of a byte stream; see the module comment.

    `min_size`/`max_size` bound the body size (`max_size=None`: any int32); `what` and
    `max_size_name` word the errors ("request of N bytes exceeds socket.request.max.bytes=M").
    `scratch` is the buffer handed out between frames (default: a 64 KiB one of its own); a
    shared one must be advanced over before anyone else receives into it. Frames larger than
    the scratch are received into a bytearray of their own.
    """

    __slots__ = ("min_size", "max_size", "what", "max_size_name", "prealloc", "blocked",
                 "_scratch", "_direct_over", "_buf", "_big", "_view", "_pos", "_size", "_done")

    def __init__(
        self,
        *,
        min_size: int = 0,
        max_size: int | None = None,
        what: str = "response",
        max_size_name: str = "max_size",
        scratch: bytearray | memoryview | None = None,
        prealloc: int | None = PREALLOC,
    ) -> None:
        self.min_size = min_size
        self.max_size = INT32_MAX if max_size is None else max_size
        self.what = what
        self.max_size_name = max_size_name
        self.prealloc = INT32_MAX if prealloc is None else max(prealloc, 1)
        self._scratch = memoryview(bytearray(DEFAULT_SCRATCH) if scratch is None else scratch)
        self._direct_over = len(self._scratch)
        self._buf = bytearray()  # bytes received and not yet cut into frames
        self._big: bytearray | None = None  # the large frame being received in place
        self._view: memoryview | None = None  # ... and a view of it, for buffer()
        self._pos = 0  # bytes of it received
        self._size = 0  # its size
        self._done: bytearray | None = None  # a large frame complete, not yet handed out
        self.blocked = False  # next_frame(allow_large=False) stopped before a large frame

    # -- bytes in -----------------------------------------------------------------------------

    def buffer(self) -> memoryview:
        """Where to receive the next bytes (`sock.recv_into`); then call `advance(n)`. Not to
        be kept or released (see the module comment)."""
        big = self._big
        if big is None:
            return self._scratch
        pos = self._pos
        if pos == len(big):
            self._grow()
        return self._view[pos:]  # type: ignore[index]

    @property
    def mid_frame(self) -> bool:
        """A large frame is being received in place and is not complete: nothing to cut yet."""
        return self._big is not None

    def fill(self, read: Callable[[int, memoryview], int]) -> bool:
        """Receive the rest of the large frame in progress with `read(max, into) -> n`, called
        until the frame is complete (True) or it returns 0 (False: more later). What `read`
        raises propagates, with every byte received before it counted. For sources that give a
        little at a time (a TLS record per call): one Python call per piece, nothing else."""
        big, view = self._big, self._view
        assert big is not None and view is not None
        pos, size = self._pos, self._size
        try:
            while pos < size:
                end = len(big)
                if pos == end:
                    self._pos = pos
                    self._grow()
                    view = self._view
                    assert view is not None
                    end = len(big)
                n = read(end - pos, view[pos:end])
                if not n:
                    return False
                pos += n
        finally:
            self._pos = pos
        self._done, self._big, self._view = big, None, None
        return True

    def advance(self, n: int) -> None:
        """`n` bytes were received into `buffer()`."""
        big = self._big
        if big is None:
            buf = self._buf
            buf += self._scratch[:n]
            return
        pos = self._pos = self._pos + n
        if pos == self._size:
            self._done, self._big, self._view = big, None, None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes received elsewhere (copied; `buffer()`/`advance()` avoid the copy)."""
        if self._big is None:
            self._buf += data
            return
        with memoryview(data) as view, view.cast("B") as src:
            pos = 0
            while pos < len(src) and self._big is not None:
                into = self.buffer()
                k = min(len(into), len(src) - pos)
                into[:k] = src[pos : pos + k]
                del into
                self.advance(k)
                pos += k
            if pos < len(src):
                self._buf += src[pos:]

    # -- frames out ---------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Bytes of memory this splitter holds for frames not handed out yet."""
        return len(self._buf) + (len(self._big) if self._big is not None else 0) + (
            len(self._done) if self._done is not None else 0)

    @property
    def receiving_large(self) -> bool:
        """A large frame has started and not all of it has arrived."""
        return self._big is not None

    def next_frame(self, allow_large: bool = True) -> bytearray | None:
        """The next whole frame's body, or None: more bytes are needed. Raises FrameError.

        With `allow_large=False`, a frame larger than the scratch whose rest has not arrived
        is not started (no memory is taken for it): None, with `blocked` set, and the caller
        stops receiving until it may start one (a broker-wide memory bound)."""
        self.blocked = False
        done = self._done
        if done is not None:
            self._done = None
            return done
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        if size < self.min_size or size > self.max_size:
            raise self._size_error(size)
        end = 4 + size
        if len(buf) >= end:
            frame = buf[4:end]
            del buf[:end]
            return frame
        if size > self._direct_over:
            if not allow_large:
                self.blocked = True
                return None
            self._start_big(size)
        return None

    def _size_error(self, size: int) -> FrameError:
        if size < self.min_size:
            return FrameError(f"malformed frame: size {size} is too small for a {self.what} header")
        return FrameError(f"{self.what} of {size} bytes exceeds {self.max_size_name}={self.max_size}")

    # -- a large frame, received in place -----------------------------------------------------

    def _start_big(self, size: int) -> None:
        """Move the start of a frame too large for the scratch into a bytearray of its own."""
        buf = self._buf
        have = len(buf) - 4
        big = _uninit(min(size, max(self.prealloc, FIRST_GROWTH * have)))
        view = memoryview(big)
        with memoryview(buf) as src:
            view[:have] = src[4:]  # one copy (`big[:have] = ...` would copy a memoryview twice)
        buf.clear()
        self._big, self._view, self._pos, self._size = big, view, have, size

    def _grow(self) -> None:
        """The large frame's bytearray is full: double it (at most to the frame's size)."""
        global _zeros
        big = self._big
        assert big is not None and self._view is not None
        self._view.release()  # a bytearray with a live view cannot be resized
        want = min(self._size, 2 * len(big))
        if _grow_native is not None:
            _grow_native(big, want)
        else:
            if _zeros is None:
                _zeros = memoryview(mmap.mmap(-1, _ZEROS_SIZE, prot=mmap.PROT_READ))
            while len(big) < want:
                big += _zeros[: want - len(big)]
        self._view = memoryview(big)
