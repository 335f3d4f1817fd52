"""Micro-benchmark of the broker's receive path: frames cut out of a byte stream.

    .venv/bin/python bench/bench_framing.py             # best of 3 processes x 5 rounds
    .venv/bin/python bench/bench_framing.py --procs 5 --rounds 9

"new" is the broker's own `network.Connection._on_readable` (today: `protocol.framing`);
"old" is the hand-written reader it had before (kept here, verbatim, to compare against);
"zeroed" is "new" with large frames' bytearrays zeroed (without the C helper's `uninit`/`grow`).
Both run on a real `Connection` (its `_dispatch`, a handler that only counts frames and
returns NO_RESPONSE) over a fake socket whose `recv_into` copies the next piece of a prepared
stream, as the kernel would: one whole frame per call, or 64 KiB per call, the frames of a
pipelining client straddling the pieces. Large frames arrive in 64 KiB pieces. Each reader
runs in processes of its own, old and new alternating; the best round is shown, per frame,
beside the fake socket's own cost ("recv only"): what is left of a figure after that is the
framing. Times are CPU time of the process (the machine is shared: time spent waiting for a
core is not ours).
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from samsa.server import network
from samsa.server.network import SCRATCH, Connection, FrameError
from samsa.server.responses import NO_RESPONSE

PIECE = 64 * 1024
_SIZE = struct.Struct(">i")
_SCRATCH_VIEW = memoryview(bytearray(SCRATCH))  # the old reader's own, as network.py had it


class OldConnection(Connection):
    """The reader as it was before protocol/framing.py (network.py at fedfbcf)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rbuf = bytearray()
        self.frame: bytearray | None = None
        self.frame_view: memoryview | None = None
        self.frame_pos = 0

    def _on_readable(self) -> None:
        try:
            if self.frame is not None:
                assert self.frame_view is not None
                n = self.sock.recv_into(self.frame_view[self.frame_pos :])
                if n == 0:
                    self.close()
                    return
                self.frame_pos += n
                if self.frame_pos == len(self.frame):
                    frame = self.frame
                    self.frame = self.frame_view = None
                    self._dispatch(frame)
                return
            n = self.sock.recv_into(_SCRATCH_VIEW)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            network.log.debug("connection %s read error: %s", self.peer_str, e)
            self.close()
            return
        if not n:
            self.close()
            return
        rbuf = self.rbuf
        rbuf += _SCRATCH_VIEW[:n]
        try:
            self._cut_frames()
        except FrameError as e:
            network.log.warning("closing connection from %s: %s", self.peer_str, e)
            self.close()

    def _cut_frames(self) -> None:
        rbuf = self.rbuf
        max_size = self.server.max_request_size
        while len(rbuf) >= 4 and not self.closed:
            (size,) = _SIZE.unpack_from(rbuf, 0)
            if size < 8:
                raise FrameError(f"malformed frame: size {size} is too small for a request header")
            if size > max_size:
                raise FrameError(
                    f"request of {size} bytes exceeds socket.request.max.bytes={max_size}"
                )
            if len(rbuf) - 4 >= size:
                frame = rbuf[4 : 4 + size]
                del rbuf[: 4 + size]
                self._dispatch(frame)
                continue
            if size > SCRATCH:
                # Receive the rest of this big frame straight into a buffer of its own.
                self.frame = bytearray(size)
                self.frame_view = memoryview(self.frame)
                have = len(rbuf) - 4
                self.frame_view[:have] = rbuf[4:]
                self.frame_pos = have
                rbuf.clear()
            return


class FakeSocket:
    """`recv_into` hands out the prepared pieces in order, as much of each as fits."""

    def __init__(self, pieces: list[memoryview]) -> None:
        self.pieces = pieces
        self.i = 0
        self.off = 0

    def fileno(self) -> int:
        return -1

    def recv_into(self, view: memoryview) -> int:
        piece = self.pieces[self.i]
        off = self.off
        k = min(len(view), len(piece) - off)
        view[:k] = piece[off : off + k]
        off += k
        if off == len(piece):
            self.i += 1
            self.off = 0
        else:
            self.off = off
        return k

    def close(self) -> None:
        pass


def frame(size: int) -> bytes:
    body = bytearray(size)
    body[:8] = struct.pack(">hhi", 0, 9, 1)
    return struct.pack(">i", size) + bytes(body)


def whole_frames(n: int, size: int) -> list[memoryview]:
    one = memoryview(frame(size))
    return [one] * n


def stream_pieces(n: int, size: int) -> list[memoryview]:
    stream = memoryview(frame(size) * n)
    return [stream[i : i + PIECE] for i in range(0, len(stream), PIECE)]


def big_frames(n: int, size: int) -> list[memoryview]:
    one = memoryview(frame(size))
    pieces = [one[i : i + PIECE] for i in range(0, len(one), PIECE)]
    return pieces * n


def run(cls: type[Connection], pieces: list[memoryview], n_frames: int, size: int) -> float:
    got = [0, 0]

    def handler(conn: Connection, f: bytearray) -> Any:
        got[0] += 1
        got[1] += len(f)
        return NO_RESPONSE

    loop = asyncio.new_event_loop()
    server = SimpleNamespace(loop=loop, connections=set(), max_request_size=100 << 20, handler=handler,
                             quotas=network.ConnectionQuotas(loop, network.Limits),
                             max_pending=network.MAX_PENDING, timed=False, name="PLAINTEXT")
    sock = FakeSocket(pieces)
    conn = cls(server, sock, ("bench", 0))  # type: ignore[arg-type]
    read = conn._on_readable
    total = len(pieces)
    t0 = time.process_time()
    while sock.i < total:
        read()
    dt = time.process_time() - t0
    loop.close()
    assert got == [n_frames, n_frames * size] and not conn.closed, (got, conn.closed)
    return dt


def recv_only(pieces: list[memoryview]) -> float:
    """The fake socket alone (into a 256 KiB buffer): the part of each figure that is not framing."""
    sock = FakeSocket(pieces)
    view = _SCRATCH_VIEW
    total = len(pieces)
    t0 = time.process_time()
    while sock.i < total:
        sock.recv_into(view)
    return time.process_time() - t0


CASES: list[tuple[str, Callable[[int, int], list[memoryview]], int, int]] = [
    ("100k x 200 B frames, one per recv", whole_frames, 100_000, 200),
    ("100k x 200 B frames, 64 KiB per recv", stream_pieces, 100_000, 200),
    ("100k x 4 KiB frames, 64 KiB per recv", stream_pieces, 100_000, 4096),
    ("300 x 1 MB frames (1,000,000 B), 64 KiB per recv", big_frames, 300, 1_000_000),
    ("300 x 1 MiB + 100 B frames, 64 KiB per recv", big_frames, 300, (1 << 20) + 100),
    ("40 x 8 MiB frames, 64 KiB per recv", big_frames, 40, 8 << 20),
]


IMPLS: dict[str, Callable[[list[memoryview], int, int], float]] = {
    "recv": lambda pieces, n, size: recv_only(pieces),
    "old": lambda pieces, n, size: run(OldConnection, pieces, n, size),
    "new": lambda pieces, n, size: run(Connection, pieces, n, size),
    "zeroed": lambda pieces, n, size: zeroed(pieces, n, size),
}


def zeroed(pieces: list[memoryview], n: int, size: int) -> float:
    """"new" with large frames' bytearrays zeroed when made and grown (framing's pure-Python
    path, i.e. without the C helper's uninit/grow)."""
    from samsa.protocol import framing
    framing._uninit, framing._grow_native = bytearray, None
    return run(Connection, pieces, n, size)


def child(case: int, impl: str, rounds: int) -> None:
    _, make, n, size = CASES[case]
    pieces = make(n, size)
    print(min(IMPLS[impl](pieces, n, size) for _ in range(rounds)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per process (default 5)")
    ap.add_argument("--procs", type=int, default=3, help="processes per case and reader, alternating (default 3)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.rounds)
        return
    # Each figure comes from processes of its own: large frames leave the allocator in a state
    # that favours or penalises whichever reader runs next in the same process.
    print(f"{'case':<50} {'recv only':>13} {'old':>13} {'new':>13} {'zeroed':>13} {'new/old':>8} {'new/zeroed':>10}")
    for i, (name, _, n, _) in enumerate(CASES):
        best = {k: float("inf") for k in IMPLS}
        for _ in range(args.procs):
            for k in IMPLS:
                out = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--child", str(i), k],
                                     check=True, capture_output=True, text=True).stdout
                best[k] = min(best[k], float(out))
        cols = []
        for k in IMPLS:
            per = best[k] / n
            cols.append(f"{per * 1e9:>7,.0f} ns/fr" if per < 1e-4 else f"{per * 1e6:>7,.0f} us/fr")
        print(f"{name:<50} {cols[0]:>13} {cols[1]:>13} {cols[2]:>13} {cols[3]:>13} {best['new'] / best['old']:>8.3f} "
              f"{best['new'] / best['zeroed']:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
