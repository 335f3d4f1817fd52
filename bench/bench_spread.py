"""Produce over many partitions with requests that carry many partitions, as Kafka's Java
producer sends them: the broker's own cost of spreading records, without librdkafka's one
ProduceRequest per partition (confluentinc/librdkafka#1700) in the way.

One broker (embedded store) in a temporary directory; a one-partition topic and a topic of
`--partitions` partitions. The same records (`--size` B each) go to both, in the same number
of requests of `--batch` x `--per-request` records, `--inflight` requests pipelined on one
connection, acks=1:

- one partition: each request carries one batch of all its records (a produce request holds
  one batch per partition, as in Kafka);
- spread: each request carries one batch of `--batch` records for each of `--per-request`
  partitions, round-robin over all of them.

So the records, requests and bytes are the same (but for the batch headers); what differs is
what a producer spreading over many partitions makes of them: more, smaller batches, one
append per partition. The requests are encoded before the clock starts (the client does no
encoding while timed). Reported: records/s, the broker's CPU time (utime + stime from /proc)
for each, and the ratio spread / one partition; rounds alternate, medians at the end.

Usage:
    PYTHONPATH=. .venv/bin/python bench/bench_spread.py [--partitions 10000] [--records 1000000]
        [--size 100] [--batch 10] [--per-request 100] [--inflight 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from samsa.protocol.messages import decode_response, encode_request  # noqa: E402
from samsa.protocol.records import build_batch  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402

PRODUCE_VERSION = 9


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks (USER_HZ 100)


def requests(topic: str, partitions: int, spread: bool, n_requests: int, per_request: int, batch: bytes,
             big: bytes) -> list[bytes]:
    """Encoded ProduceRequests (see the module docstring)."""
    out = []
    p = 0
    for i in range(n_requests):
        if spread:
            parts = []
            for _ in range(per_request):
                parts.append({"index": p, "records": batch})
                p = (p + 1) % partitions
        else:
            parts = [{"index": 0, "records": big}]
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                "topic_data": [{"name": topic, "partition_data": parts}]}
        out.append(bytes(encode_request(0, PRODUCE_VERSION, i + 1, "bench-spread", body)))
    return out


def run(bootstrap: str, frames: list[bytes], inflight: int) -> float:
    """Send every frame, `inflight` at a time, check each answer; seconds taken."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    waiting: deque[int] = deque()

    def answer() -> None:
        nonlocal buf
        while True:
            if len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) >= 4 + size:
                    frame, buf = bytes(buf[4:4 + size]), buf[4 + size:]
                    cid, msg = decode_response(0, PRODUCE_VERSION, frame)
                    assert cid == waiting.popleft()
                    for t in msg.responses:
                        for pr in t.partition_responses:
                            if pr.error_code:
                                raise RuntimeError(f"partition {pr.index}: error {pr.error_code}")
                    return
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk

    t0 = time.monotonic()
    for i, frame in enumerate(frames):
        if len(waiting) >= inflight:
            answer()
        sock.sendall(frame)
        waiting.append(i + 1)
    while waiting:
        answer()
    took = time.monotonic() - t0
    sock.close()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=10, help="records per batch when spread")
    ap.add_argument("--per-request", type=int, default=100, help="partitions per request when spread")
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if min(args.partitions, args.records, args.size, args.batch, args.per_request, args.inflight, args.rounds) < 1:
        ap.error("every number must be at least 1")
    n_requests = max(1, args.records // (args.batch * args.per_request))
    records = n_requests * args.batch * args.per_request
    def make(n: int) -> bytes:
        return bytes(build_batch([(None, bytes(args.size), [], 1_700_000_000_000 + i) for i in range(n)]))

    batch, big = make(args.batch), make(args.batch * args.per_request)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-spread-") as tmp:
        broker = BrokerProcess(Path(tmp) / "broker", {"num.partitions": "1",
                                                      "message.max.bytes": str(max(1 << 20, 2 * len(big)))}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for name, n in (("one", 1), ("spread", args.partitions)):
                admin.create_topics([NewTopic(name, n, 1)], operation_timeout=300)[name].result(330)
            deadline = time.monotonic() + 300
            while True:  # every leader ready (CreateTopics answers once they are)
                md = admin.list_topics("spread", timeout=30).topics["spread"]
                if len(md.partitions) == args.partitions and all(p.leader >= 0 for p in md.partitions.values()):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("the spread topic's leaders are not ready after 300 s")
                time.sleep(0.2)
            frames = {kind: requests(kind, args.partitions, kind == "spread", n_requests, args.per_request, batch,
                                     big) for kind in ("one", "spread")}
            print(f"{records:,} records of {args.size} B, {args.batch * args.per_request:,} a request "
                  f"({n_requests:,} requests, {args.inflight} in flight): to 1 partition in batches of "
                  f"{args.batch * args.per_request:,}, and over {args.partitions:,} partitions in batches of "
                  f"{args.batch}, {args.per_request} partitions a request", file=sys.stderr)
            got: dict[str, list[tuple[float, float]]] = {"one": [], "spread": []}
            for r in range(args.rounds):
                for kind in ("one", "spread"):
                    cpu0 = cpu_seconds(broker.proc.pid)
                    took = run(broker.bootstrap, frames[kind], args.inflight)
                    cpu = cpu_seconds(broker.proc.pid) - cpu0
                    got[kind].append((records / took, cpu))
                    print(f"round {r + 1} {kind:>6}: {records / took:>12,.0f} rec/s, broker CPU {cpu:.2f} s",
                          file=sys.stderr)
        finally:
            broker.stop(60)
    one = statistics.median(x for x, _ in got["one"])
    spread = statistics.median(x for x, _ in got["spread"])
    cpu_one = statistics.median(c for _, c in got["one"])
    cpu_spread = statistics.median(c for _, c in got["spread"])
    print(f"\n| medians of {args.rounds} | one partition | {args.partitions:,} partitions | ratio |\n|---|---|---|---|")
    print(f"| records/s | {one:,.0f} | {spread:,.0f} | {spread / one:.2f} |")
    print(f"| broker CPU, s | {cpu_one:.2f} | {cpu_spread:.2f} | {cpu_spread / max(cpu_one, 1e-9):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
