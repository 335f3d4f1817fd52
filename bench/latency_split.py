"""Where end-to-end latency goes: the producer's linger, or the path after the batch leaves.

Runs kbench's latency workload (an open-loop producer at --rate msg/s, 100 B records carrying
their CLOCK_MONOTONIC send time, a consumer in a second process, confluent-kafka on both
sides) against any Kafka-compatible broker and splits each received batch's latency into:

  span       first to last send time of the records that arrived together: how long the
             producer held the batch (linger.ms and its timer's lateness);
  after      arrival of the batch minus the send time of its last record: the batch leaving
             the producer, the broker (append, answering the waiting fetch) and the consumer
             (librdkafka and its Python thread waking up). The same client for every broker,
             so differences between brokers here are the brokers'.

Records arriving within 0.2 ms of each other count as one batch. The first 20% of records
are a warm-up and are left out.

    .venv/bin/python bench/latency_split.py --bootstrap 127.0.0.1:9092 [--rate 10000]
        [--seconds 6] [--linger-ms 5] [--acks 1] [--runs 1]

Prints one line per run. Loopback brokers only: it creates a topic `latency-split-*` and
deletes it afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import struct
import sys
import time
import uuid
from typing import Any

HDR = struct.Struct(">qq")  # sequence number, send time (ns), as kbench writes them
GROUP_GAP_NS = 200_000


def consume(bootstrap: str, topic: str, total: int, ready: Any, results: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency-split-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 10,
                  "receive.message.max.bytes": 2147483647})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    c.poll(0.5)  # get the fetcher going before the producer starts
    ready.set()
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 120
    while len(got) < total and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        now = time.monotonic_ns()
        seq, sent = HDR.unpack_from(m.value())
        got.append((seq, sent, now))
    c.close()
    results.put(got)


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[int(q * (len(s) - 1))]


def run_once(args: argparse.Namespace) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "latency-split-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    try:
        total = int(args.rate * args.seconds)
        ctx = mp.get_context("spawn")
        ready, results = ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=consume, args=(args.bootstrap, topic, total, ready, results))
        proc.start()
        if not ready.wait(60):
            raise SystemExit("latency_split: the consumer did not start within 60 s")
        p = Producer({"bootstrap.servers": args.bootstrap, "acks": args.acks, "linger.ms": args.linger_ms,
                      "batch.size": 1_000_000, "enable.idempotence": False,
                      "queue.buffering.max.messages": 1_000_000})
        tail, interval, i = bytes(84), 1e9 / args.rate, 0
        t0 = time.monotonic_ns()
        while i < total:  # open loop, as kbench: send what is due, then sleep to the next one
            due = min(total, int((time.monotonic_ns() - t0) / interval) + 1)
            while i < due:
                p.produce(topic, HDR.pack(i, time.monotonic_ns()) + tail, partition=0)
                i += 1
            p.poll(0)
            wait = (t0 + i * interval - time.monotonic_ns()) / 1e9
            if wait > 0:
                time.sleep(wait)
        p.flush(30)
        got = results.get(timeout=150)
        proc.join(30)
    finally:
        admin.delete_topics([topic])[topic].result(30)
    if len(got) != total:
        return f"received {len(got)} of {total} records"
    got = got[len(got) // 5:]
    batches: list[list[tuple[int, int, int]]] = [[got[0]]]
    for r in got[1:]:
        if r[2] - batches[-1][-1][2] < GROUP_GAP_NS:
            batches[-1].append(r)
        else:
            batches.append([r])
    e2e = [(n - s) / 1e6 for _, s, n in got]
    span = [(b[-1][1] - b[0][1]) / 1e6 for b in batches]
    after = [(b[0][2] - b[-1][1]) / 1e6 for b in batches]
    return (f"e2e p50 {quantile(e2e, .5):.3f} p99 {quantile(e2e, .99):.3f} ms | {len(batches)} batches of "
            f"{len(got) / len(batches):.1f} | span p50 {quantile(span, .5):.3f} ms | after "
            f"p10 {quantile(after, .1):.3f} p50 {quantile(after, .5):.3f} p90 {quantile(after, .9):.3f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True, help="HOST:PORT of the broker (loopback)")
    ap.add_argument("--rate", type=int, default=10_000, help="records per second (default 10000)")
    ap.add_argument("--seconds", type=float, default=6.0, help="how long to produce (default 6)")
    ap.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms (default 5)")
    ap.add_argument("--acks", default="1", help="the producer's acks (default 1)")
    ap.add_argument("--runs", type=int, default=1, help="runs, one line each (default 1)")
    args = ap.parse_args()
    if args.rate <= 0 or args.seconds <= 0:
        ap.error("--rate and --seconds must be positive")
    for _ in range(args.runs):
        print(f"{args.bootstrap} {run_once(args)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
