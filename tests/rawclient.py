"""A minimal Kafka client over a raw socket, for tests that need exact bytes on the wire."""

from __future__ import annotations

import socket
import struct
from typing import Any

from samsa.protocol.messages import decode_response, encode_request
from samsa.protocol.schema import Msg


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "raw-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        head = self._read_exact(4)
        (size,) = struct.unpack(">i", head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: Any) -> Msg:
        return self.receive(api_key, version, self.send(api_key, version, body))

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Send a request without waiting for its answer (for one a broker holds, like a
        JoinGroup during a rebalance): its correlation id, for `receive`."""
        self.correlation_id += 1
        self.send_bytes(bytes(encode_request(api_key, version, self.correlation_id, self.client_id, body)))
        return self.correlation_id

    def receive(self, api_key: int, version: int, correlation_id: int) -> Msg:
        """The answer to the request `send` returned `correlation_id` for (answers come in order)."""
        cid, msg = decode_response(api_key, version, self.read_frame())
        assert cid == correlation_id, (cid, correlation_id)
        return msg

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes this connection (EOF) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
