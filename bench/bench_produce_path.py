"""Produce throughput of the broker itself: pre-built batches, pipelined over raw sockets.

kbench's producer (librdkafka through Python) tops out before one broker does at small
records, so its records/s measures the client. Here the client does almost nothing: it builds
one Produce request per case once, then keeps `--inflight` copies of it in flight on each of
`--connections` sockets, reading only each response's length prefix (the first and last
responses are decoded and must carry error 0). The broker validates, appends and answers
every request, so records/s is what the broker can take, and its CPU per MB is what each
byte costs it.

    PYTHONPATH=. .venv/bin/python bench/bench_produce_path.py                      # this tree
    PYTHONPATH=. .venv/bin/python bench/bench_produce_path.py --tree base=/tmp/old # A/B

With several trees, each round starts one fresh broker per tree in turn (alternating, so a
change in the machine's load hits all alike) and runs every case against it. Reported per
case and tree: the median records/s over the rounds and broker CPU us per MB, and with a
`base` tree the ratio of each other tree to it (medians, and best round against best round).

Cases: record value size x records per batch (`--sizes`, `--batch-bytes`), uncompressed or
`--compression`, acks=1, one partition, replication factor 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --tls: the pumps produce through an SSL listener (Python's client writes 16 KiB TLS records)
_TLS: dict[str, Any] = {}


def _start_broker(tree: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    props = workdir / "broker.properties"
    listeners = f"PLAINTEXT://127.0.0.1:{port}"
    if _TLS:
        _TLS["port"] = _free_port()
        listeners += f",SSL://127.0.0.1:{_TLS['port']}"
    props.write_text(f"broker.id=0\nlisteners={listeners}\nlog.dirs={workdir}/data\n"
                     + (f"ssl.keystore.type=PEM\nssl.keystore.location={_TLS['keystore']}\n" if _TLS else "")
                     +
                     "log.retention.bytes=268435456\nlog.segment.bytes=67108864\n"
                     "log.retention.check.interval.ms=2000\nauto.create.topics.enable=false\n")
    env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "broker", "start", str(props)], env=env,
                            stdout=(workdir / "broker.log").open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"broker from {tree} exited: see {workdir}/broker.log") from None
            time.sleep(0.1)
    raise SystemExit(f"broker from {tree} did not listen within 60 s")


def _request(port: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    from samsa.protocol.messages import decode_response, encode_request

    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(bytes(encode_request(api_key, version, 1, "bench", body)))
        size = struct.unpack(">i", _read(s, 4))[0]
        return decode_response(api_key, version, _read(s, size))[1]


def _read(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _create_topic(port: int, name: str) -> None:
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout": 30000, "validate_only": False}
    resp = _request(port, 19, 4, body)
    code = resp.topics[0].error_code
    if code not in (0, 36):
        raise SystemExit(f"CreateTopics {name}: error {code}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until it has a leader
        meta = _request(port, 3, 12, {"topics": [{"name": name, "topic_id": None}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        if meta.topics and meta.topics[0].partitions and meta.topics[0].partitions[0].leader_id >= 0:
            return
        time.sleep(0.1)
    raise SystemExit(f"topic {name} has no leader after 30 s")


def _produce_frame(topic: str, size: int, batch_bytes: int, codec: int) -> tuple[bytes, int]:
    from samsa.protocol.messages import encode_request
    from samsa.protocol.records import build_batch

    count = max(1, batch_bytes // (size + 20))  # key and record overhead: the batch stays under batch_bytes
    now = int(time.time() * 1000)
    value = os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")  # compressible like text
    batch = build_batch([(b"key-%d" % i, value, [], now) for i in range(count)], compression=codec,
                        producer_id=-1)
    body = {"transactional_id": None, "acks": 1, "timeout": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return bytes(encode_request(0, 9, 7, "bench", body)), count


def _check(frame: bytes) -> None:
    from samsa.protocol.messages import decode_response

    resp = decode_response(0, 9, frame)[1]
    code = resp.responses[0].partition_responses[0].error_code
    if code != 0:
        raise SystemExit(f"Produce answered error {code}: "
                         f"{resp.responses[0].partition_responses[0].error_message}")


def _pump(port: int, frame: bytes, inflight: int, stop: threading.Event, counts: list[Any]) -> None:
    try:
        _pump_requests(port, frame, inflight, stop, counts)
    except BaseException as e:  # noqa: BLE001 - reported by run_case
        counts.append(e)
        stop.set()


def _pump_requests(port: int, frame: bytes, inflight: int, stop: threading.Event, counts: list[Any]) -> None:
    s = socket.create_connection(("127.0.0.1", _TLS["port"] if _TLS else port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if _TLS:
        s = _TLS["context"].wrap_socket(s, server_hostname="127.0.0.1")
    try:
        for _ in range(inflight):
            s.sendall(frame)
        outstanding = inflight
        first = True
        while outstanding:
            size = struct.unpack(">i", _read(s, 4))[0]
            body = _read(s, size)
            if first:
                _check(body)
                first = False
            counts[0] += 1
            outstanding -= 1
            if not stop.is_set():
                s.sendall(frame)
                outstanding += 1
        _check(body)
    finally:
        s.close()


def run_case(port: int, pid: int, topic: str, size: int, batch_bytes: int, codec: int, seconds: float,
             connections: int, inflight: int) -> tuple[float, float]:
    """(records/s, broker CPU us per MB of record batches)."""
    frame, count = _produce_frame(topic, size, batch_bytes, codec)
    stop = threading.Event()
    counts: list[list[Any]] = [[0] for _ in range(connections)]
    threads = [threading.Thread(target=_pump, args=(port, frame, inflight, stop, c)) for c in counts]
    cpu0, t0 = _cpu_seconds(pid), time.monotonic()
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join()
    for c in counts:
        if len(c) > 1:
            raise SystemExit(f"a producer connection failed: {c[1]}")
    wall, cpu = time.monotonic() - t0, _cpu_seconds(pid) - cpu0
    requests = sum(c[0] for c in counts)
    mb = requests * len(frame) / 1e6
    return requests * count / wall, cpu * 1e6 / mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=PATH",
                    help="a checkout to run the broker from (repeatable; default: now=this checkout). "
                         "A tree labelled 'base' is what ratios are taken against")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0, help="per case and round")
    ap.add_argument("--sizes", default="100,1024", help="record value sizes, comma-separated")
    ap.add_argument("--batch-bytes", default="16384,1000000", help="batch sizes, comma-separated")
    ap.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--connections", type=int, default=2)
    ap.add_argument("--inflight", type=int, default=4, help="requests in flight per connection")
    ap.add_argument("--tls", action="store_true",
                    help="produce through an SSL listener (certificates made with openssl)")
    args = ap.parse_args()
    if args.tls:
        import ssl

        sys.path.insert(0, str(ROOT))
        from tests.pki import make_pki

        pki = make_pki(Path(tempfile.mkdtemp(prefix="bench-pki-")))
        _TLS.update(keystore=pki.keystore("server"), context=ssl.create_default_context(cafile=str(pki.ca)))
    trees = dict(t.split("=", 1) for t in args.tree) if args.tree else {"now": str(ROOT)}
    codec = ["none", "gzip", "snappy", "lz4", "zstd"].index(args.compression)
    cases = [(int(s), int(b)) for s in args.sizes.split(",") for b in args.batch_bytes.split(",")]
    results: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    for rnd in range(1, args.rounds + 1):
        for label, tree in trees.items():
            with tempfile.TemporaryDirectory(prefix="bench-produce-") as d:
                proc, port = _start_broker(tree, Path(d))
                try:
                    for i, (size, batch) in enumerate(cases):
                        topic = f"p{i}"
                        _create_topic(port, topic)
                        rps, us_mb = run_case(port, proc.pid, topic, size, batch, codec, args.seconds,
                                              args.connections, args.inflight)
                        results.setdefault((label, size, batch), []).append((rps, us_mb))
                        print(f"round {rnd} {label:>6} {size:>5} B x {batch:>8} B batches ({args.compression}): "
                              f"{rps:>10,.0f} rec/s  {rps * size / 1e6:7.1f} MB/s  broker {us_mb:6.0f} us CPU/MB",
                              flush=True)
                finally:
                    proc.terminate()
                    proc.wait(timeout=60)
    print("\nmedians over", args.rounds, "rounds")
    for size, batch in cases:
        base = results.get(("base", size, batch))
        for label in trees:
            runs = results[(label, size, batch)]
            med = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            line = f"{label:>6} {size:>5} B x {batch:>8} B: {med:>10,.0f} rec/s  broker {cpu:6.0f} us CPU/MB"
            if base and label != "base":
                bmed = statistics.median(r for r, _ in base)
                bcpu = statistics.median(c for _, c in base)
                line += (f"   vs base: rec/s x{med / bmed:.3f} (best x{max(r for r, _ in runs) / max(r for r, _ in base):.3f}),"
                         f" CPU/MB x{cpu / bcpu:.3f}")
            print(line)


if __name__ == "__main__":
    main()
