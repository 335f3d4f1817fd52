"""socket.send.buffer.bytes and socket.receive.buffer.bytes do what they do in Kafka: the
broker's end of each client connection gets that SO_SNDBUF and SO_RCVBUF (-1: the system's own,
autotuned). By default the send buffer is Kafka's 102400 and the receive buffer the system's.
Read from the kernel with `ss -tm` (its skmem `rb`/`tb`: the buffer sizes, which Linux doubles
from the value set)."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess

pytestmark = pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")


def server_side_buffers(b: BrokerProcess, client: socket.socket) -> tuple[int, int]:
    """(rb, tb) of the broker's end of `client`'s connection, once the broker has accepted it
    (it answers an ApiVersions v0 request)."""
    client.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
    size = struct.unpack(">i", client.recv(4, socket.MSG_WAITALL))[0]
    assert len(client.recv(size, socket.MSG_WAITALL)) == size
    port = client.getsockname()[1]
    out = subprocess.run(["ss", "-tnm", "state", "established", f"( sport = :{b.port} and dport = :{port} )"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    m = re.search(r"skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("size", [300_000, 70_000])
def test_the_broker_sizes_its_connections_buffers(broker_factory: Callable[..., BrokerProcess], size: int) -> None:
    b = broker_factory(**{"socket.send.buffer.bytes": str(size), "socket.receive.buffer.bytes": str(size)})
    with socket.create_connection((b.host, b.port), timeout=10) as c:
        assert server_side_buffers(b, c) == (2 * size, 2 * size)


def test_by_default_the_send_buffer_is_kafkas_and_the_receive_buffer_the_systems(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    rmem = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[1])
    with socket.create_connection((b.host, b.port), timeout=10) as c:
        assert server_side_buffers(b, c) == (rmem, 2 * 102400)


def test_minus_one_leaves_the_send_buffer_to_the_system(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(**{"socket.send.buffer.bytes": "-1"})
    with socket.create_connection((b.host, b.port), timeout=10) as c:
        _, tb = server_side_buffers(b, c)
    assert tb not in (2 * 102400, 2 * 300_000)


def test_a_size_below_minus_one_is_refused(broker_factory: Callable[..., BrokerProcess]) -> None:
    with pytest.raises(RuntimeError, match="socket.receive.buffer.bytes"):
        broker_factory(**{"socket.receive.buffer.bytes": "-5"})
