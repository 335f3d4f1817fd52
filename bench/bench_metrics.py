"""What the Prometheus metrics cost a real broker: a scrape of 1,000 partitions, and produce
throughput with and without `prometheus.listener`, in the same run, alternating.

    PYTHONPATH=. .venv/bin/python bench/bench_metrics.py [--rounds 3] [--quick]

1. Scrape. One broker with `prometheus.listener`, a topic of 1,000 partitions each holding a
   few records, one consumer group with an offset committed on each (so every per-partition
   section is full: log size, start and end offsets, segments, committed offset, lag). Then
   GET /metrics 30 times in a row: wall ms per scrape as the client sees it (HTTP on loopback
   included), the text's size, and the broker's own largest event-loop lag meanwhile (its
   `samsa_eventloop_lag_max_seconds`: how long a scrape held the loop, at most).
2. Produce. librdkafka's `rdkafka_performance` (C, the client bench/vs_kafka.py uses), 100 B
   records acks=1 to one partition, in two shapes: linger 5 ms (large batches, the usual
   case) and linger 0 with 10 records per batch (many small requests: the per-request cost of
   the metrics at its worst). A fresh broker for every measurement, with and without
   `prometheus.listener`, alternating (which goes first alternates by round); with it, the
   broker is also scraped every second meanwhile, as a Prometheus would (its default is every
   15 s). Printed: each round's records/s, the medians and the ratio with/without (the
   issue's goal: the metrics cost under 3%, a ratio of at least 0.97), and the broker's CPU
   time per record (steadier than records/s on a shared machine).
3. Request path, in process (`--path`): the broker's own cost per request with the metrics
   off and on, alternating in one process: a real Connection over a socketpair, the real
   Dispatcher and handlers over a real Log (bench/bench_dispatch.py's setup); a produce of
   one 100 B record (acks=1) and a fetch of one partition, each answered and written to the
   socket. This isolates what the metrics add to one request: counting, the error walk, six
   time stamps and six histogram observations.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vs_kafka import create, first_writes, produce  # noqa: E402

from tests.brokerproc import BrokerProcess, free_port  # noqa: E402

SHAPES = {  # name -> rdkafka_performance options
    "100 B acks=1 linger 5 ms": ["-X", "linger.ms=5"],
    "100 B acks=1 linger 0, 10 per batch": ["-X", "linger.ms=0", "-X", "batch.num.messages=10"],
}


def start(workdir: Path, metrics: bool) -> tuple[BrokerProcess, int | None]:
    port = free_port() if metrics else None
    overrides = {"prometheus.listener": f"127.0.0.1:{port}"} if port else {}
    return BrokerProcess(workdir, overrides).start(), port


def get(port: int) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        return bytes(r.read())


def gauge(text: bytes, name: str) -> float:
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def lag_buckets(text: bytes) -> dict[float, int]:
    """The event-loop lag histogram: upper bound (s) -> ticks at most that late (cumulative)."""
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("samsa_eventloop_lag_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[float(le)] = int(float(line.split()[-1]))
    return out


def worst_lag_ms(before: bytes, after: bytes) -> float:
    """The upper bound of the latest lag bucket that took ticks between two scrapes (ms)."""
    b, a = lag_buckets(before), lag_buckets(after)
    grew = [le for le in a if a[le] - b.get(le, 0) > 0]
    new = {le: a[le] - b.get(le, 0) for le in a}
    total = new[float("inf")]
    return min(le for le in grew if new[le] == total) * 1000 if grew else 0.0


def scrape_round(workdir: Path, scrapes: int) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    b, port = start(workdir, True)
    assert port is not None
    try:
        create(b.bootstrap, "wide", 1000)
        first_writes(b.bootstrap, "wide", 1000)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "bench", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("wide", p, 1) for p in range(1000)], asynchronous=False)
        c.close()
        first = text = get(port)
        assert text.count(b"kafka_consumergroup_lag{") == 1000 and text.count(b"kafka_log_log_size{") >= 1000
        times, renders = [], []
        for _ in range(scrapes):
            t0 = time.perf_counter()
            text = get(port)
            times.append((time.perf_counter() - t0) * 1000)
            renders.append(gauge(text, "samsa_metrics_render_seconds") * 1000)  # (the scrape before this one's)
        return {"scrape ms, client side (median)": statistics.median(times), "scrape ms, client side (max)": max(times),
                "render ms, broker side (median)": statistics.median(renders[1:]),
                "render ms, broker side (max)": max(renders[1:]),
                "text KiB": len(text) / 1024,
                "event-loop lag during the scrapes, at most ms": worst_lag_ms(first, text)}
    finally:
        b.stop()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_once(workdir: Path, metrics: bool, shape: str, count: int, every_s: float) -> tuple[float, float]:
    """(records/s, the broker's CPU µs per 1,000 records)."""
    b, port = start(workdir, metrics)
    assert b.proc is not None
    stop = threading.Event()
    scraper = None
    try:
        create(b.bootstrap, "p", 1)
        if port is not None:
            def scrape_every_second() -> None:
                while not stop.wait(every_s):
                    get(port)

            scraper = threading.Thread(target=scrape_every_second, daemon=True)
            scraper.start()
        cpu0 = cpu_s(b.proc.pid)
        rate = _produce(b.bootstrap, shape, count)
        return rate, (cpu_s(b.proc.pid) - cpu0) / count * 1e9
    finally:
        stop.set()
        if scraper is not None:
            scraper.join()
        b.stop()


def _produce(bootstrap: str, shape: str, count: int) -> float:
    opts = SHAPES[shape]
    linger = int(opts[1].split("=")[1])
    return produce(bootstrap, "p", 100, count, 1, linger=linger, extra=opts[2:])


def request_path(n: int, rounds: int) -> None:
    """CPU µs per request through Connection + Dispatcher, metrics off and on (alternating)."""
    import asyncio
    import socket
    from types import SimpleNamespace

    from bench_delayed import _fetch_frame, _produce_frame
    from bench_dispatch import _setup

    from samsa.server import network
    from samsa.server.connection_quotas import ConnectionQuotas, Limits

    with tempfile.TemporaryDirectory() as d:
        _, dispatcher, _ = _setup(Path(d))
        loop = asyncio.new_event_loop()
        ours, theirs = socket.socketpair()
        for sk in (ours, theirs):
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        ours.setblocking(False)
        theirs.setblocking(False)
        server = SimpleNamespace(loop=loop, connections=set(), max_request_size=1 << 20, handler=dispatcher,
                                 quotas=ConnectionQuotas(loop, Limits), max_pending=1 << 30, timed=False,
                                 name="PLAINTEXT")
        conn = network.Connection(server, ours, ("127.0.0.1", 1))  # type: ignore[arg-type]
        conn.principal = "User:ANONYMOUS"

        def drain() -> None:
            """Read what the broker sent; then let it write what waits (the loop's writer callback)."""
            for _ in range(1000):
                try:
                    while theirs.recv(1 << 20):
                        pass
                except BlockingIOError:
                    pass
                if not conn.wqueue:
                    break
                conn._on_writable()
            assert not conn.wqueue and not conn.sending, (len(conn.wqueue), conn.sent, conn.queued_out, list(conn.sending)[:3], conn.writing)

        conn._dispatch(_produce_frame("t", 1, 0))  # one batch for the fetches to read
        drain()
        results: dict[tuple[str, bool], list[float]] = {}
        for case in ("fetch", "produce"):  # (fetch first: a fetch reads the whole log, one batch then)
            for r in range(rounds):
                for on in ((False, True) if r % 2 == 0 else (True, False)):
                    dispatcher.metrics.enabled = conn.timed = on
                    frames = ([_produce_frame("t", 1, i) for i in range(n)] if case == "produce"
                              else [_fetch_frame(12, [("t", 0)], i) for i in range(n)])
                    t0 = time.process_time()
                    for i, frame in enumerate(frames):
                        conn.read_at = time.perf_counter() if on else 0.0
                        conn._dispatch(frame)
                        if i % 16 == 15:
                            drain()
                    results.setdefault((case, on), []).append((time.process_time() - t0) / n * 1e6)
                    drain()
        conn.close()
        theirs.close()
        loop.close()
    print("request path, in process, CPU us per request (best of rounds):")
    for case in ("produce", "fetch"):
        off, on = min(results[(case, False)]), min(results[(case, True)])
        print(f"  {case:8} metrics off {off:7.2f}   on {on:7.2f}   +{on - off:5.2f} us  ({(on / off - 1) * 100:+.1f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer records and scrapes")
    ap.add_argument("--path", action="store_true", help="only the in-process request path (3.)")
    ap.add_argument("--scrape-every", type=float, default=1.0, help="seconds between scrapes while producing")
    args = ap.parse_args()
    if args.path:
        request_path(5_000 if args.quick else 20_000, max(args.rounds, 3) * 2)
        return
    counts = {"100 B acks=1 linger 5 ms": 300_000 if args.quick else 2_000_000,
              "100 B acks=1 linger 0, 10 per batch": 100_000 if args.quick else 500_000}
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as d:
        root = Path(d)
        print(f"scrape, 1,000 partitions ({10 if args.quick else 30} scrapes):", flush=True)
        for k, v in scrape_round(root / "scrape", 10 if args.quick else 30).items():
            print(f"  {k:46} {v:8.1f}", flush=True)
        rates: dict[tuple[str, bool], list[float]] = {}
        cpus: dict[tuple[str, bool], list[float]] = {}
        print(f"produce (records/s; the broker's CPU µs per 1,000 records; with: scraped every {args.scrape_every:g} s):",
              flush=True)
        runs = 0
        for r in range(args.rounds):
            for shape in SHAPES:
                for metrics in ((False, True) if r % 2 == 0 else (True, False)):
                    runs += 1
                    rate, cpu = produce_once(root / f"run{runs}", metrics, shape, counts[shape], args.scrape_every)
                    rates.setdefault((shape, metrics), []).append(rate)
                    cpus.setdefault((shape, metrics), []).append(cpu)
                    print(f"  round {r + 1} {shape:38} {'with' if metrics else 'without':8} {rate:12,.0f} rec/s "
                          f"{cpu:8.0f} µs CPU", flush=True)
        print("\nproduce, medians (ratio with/without: records/s, and the broker's CPU per record):")
        for shape in SHAPES:
            without, with_ = statistics.median(rates[(shape, False)]), statistics.median(rates[(shape, True)])
            cpu_without, cpu_with = statistics.median(cpus[(shape, False)]), statistics.median(cpus[(shape, True)])
            print(f"  {shape:38} without {without:12,.0f}  with {with_:12,.0f}  ratio {with_ / without:.3f}   "
                  f"CPU {cpu_without:6.0f} / {cpu_with:6.0f} µs  ratio {cpu_with / cpu_without:.3f}")


if __name__ == "__main__":
    main()
