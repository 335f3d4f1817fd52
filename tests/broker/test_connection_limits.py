"""Connections a broker must survive, over real TCP against a real broker process: thousands
of length prefixes that never become requests (slowloris), idle connections, the per-address
and broker-wide connection limits, and running out of file descriptors."""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def p99_ms(c: RawClient, n: int = 300) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        assert c.request(18, 3, API_VERSIONS).error_code == 0
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[int(n * 0.99) - 1]


def connect(b: BrokerProcess) -> socket.socket:
    return socket.create_connection((b.host, b.port), timeout=10)


def served(c: RawClient, timeout: float) -> bool:
    """Does the broker answer an ApiVersions on this connection within `timeout`?"""
    c.sock.settimeout(timeout)
    try:
        return c.request(18, 3, API_VERSIONS).error_code == 0
    except (TimeoutError, ConnectionError, OSError):
        return False


def test_thousands_of_length_prefixes_take_little_memory_and_clients_keep_going(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    assert b.proc is not None
    with RawClient(b.bootstrap) as c:
        before = p99_ms(c)
        rss_before = rss_mb(b.proc.pid)
        flood = []
        try:
            for _ in range(2000):  # each promises a 100 MB request and sends 1 KiB of it
                s = connect(b)
                s.sendall(struct.pack(">i", 100_000_000) + b"\0" * 1024)
                flood.append(s)
            during = p99_ms(c)  # (the broker reads the flood meanwhile)
            grown = rss_mb(b.proc.pid) - rss_before
            assert grown < 200, f"2,000 length prefixes grew the broker by {grown:.0f} MB"
            assert during < 3 * before + 10, f"ApiVersions p99 {during:.1f} ms under the flood, {before:.1f} before"
        finally:
            for s in flood:
                s.close()
        assert served(c, 10)


def test_idle_connections_are_closed_after_connections_max_idle_ms(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(connections_max_idle_ms="1500")
    with RawClient(b.bootstrap) as idle, RawClient(b.bootstrap) as busy:
        assert served(idle, 5) and served(busy, 5)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.5:  # busy keeps talking, idle says nothing
            assert served(busy, 5)
            time.sleep(0.3)  # a client's pace, not a wait for an event
        assert idle.is_closed_by_peer(timeout=0.1) or idle.is_closed_by_peer(timeout=5)
        assert time.monotonic() - t0 >= 1.4
        assert served(busy, 5)


def test_a_request_started_and_never_finished_is_closed(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(connections_max_idle_ms="1500")  # (the mid-request limit is never longer)
    with RawClient(b.bootstrap) as c:
        c.send_bytes(struct.pack(">i", 1000) + b"\0" * 10)
        assert c.is_closed_by_peer(timeout=10)


def open_served(b: BrokerProcess, n: int) -> list[RawClient]:
    """n connections the broker serves. (The start-up probe's connection, closed by now, counts
    until the broker reads its end: a connection refused for it is opened again.)"""
    out: list[RawClient] = []
    deadline = time.monotonic() + 10
    while len(out) < n:
        c = RawClient(b.bootstrap)
        if served(c, 5):
            out.append(c)
        else:
            c.close()
            assert time.monotonic() < deadline, f"only {len(out)} of {n} connections served"
    return out


def test_max_connections_per_ip_closes_the_extra_connection_at_once(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(max_connections_per_ip="3")
    clients = open_served(b, 3)
    try:
        with RawClient(b.bootstrap) as extra:
            assert extra.is_closed_by_peer(timeout=5)
        clients.pop().close()
        clients += open_served(b, 1)  # a slot is free again, once the broker has seen that close
    finally:
        for c in clients:
            c.close()


def test_max_connections_per_ip_overrides_raise_one_address(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(max_connections_per_ip="1", max_connections_per_ip_overrides="127.0.0.1:4")
    clients = open_served(b, 4)
    try:
        with RawClient(b.bootstrap) as extra:
            assert extra.is_closed_by_peer(timeout=5)
    finally:
        for c in clients:
            c.close()


def test_max_connections_holds_new_ones_until_one_closes(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory(max_connections="3")
    clients = open_served(b, 3)
    try:
        with RawClient(b.bootstrap) as waiting:  # connected (the kernel's backlog), not accepted
            waiting.send_bytes(bytes(_api_versions_frame()))
            waiting.sock.settimeout(1.0)
            try:
                waiting.sock.recv(1)
                raise AssertionError("served past max.connections")
            except TimeoutError:
                pass
            clients.pop().close()
            waiting.sock.settimeout(10)
            assert len(waiting.read_frame()) > 0  # accepted once a connection closed, and answered
    finally:
        for c in clients:
            c.close()


def _api_versions_frame() -> bytes:
    from samsa.protocol.messages import encode_request

    return bytes(encode_request(18, 3, 1, "t", API_VERSIONS))


def test_out_of_file_descriptors_the_broker_backs_off_and_recovers(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "broker", wrap=["prlimit", "--nofile=120:120", "--"])
    b.start()
    try:
        assert b.proc is not None
        flood = []
        for _ in range(200):  # past the broker's 120 descriptors (connecting in the background:
            s = socket.socket()  # a full backlog makes the kernel retry the handshakes itself)
            s.setblocking(False)
            s.connect_ex((b.host, b.port))
            flood.append(s)
        deadline = time.monotonic() + 10
        while "Cannot accept connections" not in b.log_text():
            assert time.monotonic() < deadline, "the broker never ran out of descriptors"
            time.sleep(0.1)  # polling its log: there is no event to await across processes
        cpu0 = cpu_s(b.proc.pid)
        time.sleep(2.0)  # measuring how busy it is while out of descriptors: a duration, not an event
        busy = cpu_s(b.proc.pid) - cpu0
        assert busy < 0.5, f"the broker used {busy:.2f} s of CPU in 2 s while out of descriptors"
        for s in flood:
            s.close()
        deadline = time.monotonic() + 20
        while True:
            try:
                with RawClient(b.bootstrap, timeout=2) as c:
                    if served(c, 2):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the broker did not recover after the descriptors came back"
        log_text = b.log_text()
        warned = log_text.count("Cannot accept connections")
        assert 1 <= warned <= 3, f"{warned} accept warnings (rate-limited: one per interval)"
        assert "Traceback" not in log_text
    finally:
        b.close()


def test_queued_max_request_bytes_holds_large_requests_until_memory_is_released(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    from samsa.protocol.messages import encode_request
    from samsa.protocol.records import build_batch

    b = broker_factory(queued_max_request_bytes="300000")
    batch = build_batch([(b"k", b"v" * 300_000, [], int(time.time() * 1000))])
    produce = bytes(encode_request(0, 9, 7, "t", {"acks": 1, "timeout": 5000, "topic_data": [
        {"name": "no-such-topic", "partition_data": [{"index": 0, "records": bytes(batch)}]}]}))
    assert len(produce) > 256 * 1024  # large: read into a buffer of its own
    with RawClient(b.bootstrap) as hog:
        # 400 kB of a promised 2 MB request: more than the broker-wide bound, and no end yet.
        hog.send_bytes(struct.pack(">i", 2_000_000) + b"\0" * 400_000)
        deadline = time.monotonic() + 20
        while True:  # once the broker has read the hog's bytes, a large request waits
            with RawClient(b.bootstrap) as c:
                c.send_bytes(produce)
                c.sock.settimeout(1.5)
                try:
                    c.read_frame()  # answered: the hog's bytes were not all read yet; again
                except TimeoutError:
                    # Held back. The hog finishes its request (garbage: the broker closes it),
                    # its memory is released, and the waiting request is read and answered.
                    hog.send_bytes(b"\0" * (2_000_000 - 400_000))
                    c.sock.settimeout(10)
                    assert len(c.read_frame()) > 0
                    break
            assert time.monotonic() < deadline, "a large request was never held back"
        assert "queued.max.request.bytes=300000" in b.log_text()
