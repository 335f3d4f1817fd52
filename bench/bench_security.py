"""Throughput and latency through TLS and SASL, as ratios to PLAINTEXT on the same broker.

One broker, four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT with PLAIN, SASL_SSL with PLAIN),
certificates made with openssl (tests/pki.py). For each listener in turn, each round,
librdkafka (confluent-kafka) through that listener:

    produce   --num records of --size bytes, acks=1, linger 5 ms: records/s until the last
              delivery report
    consume   the same records read back from offset 0: records/s from the first record
    latency   --rate records/s for --seconds, acks=1, linger 0: the delivery-report latency
              (produce to acknowledgement) p50 and p99

    PYTHONPATH=. .venv/bin/python bench/bench_security.py --rounds 3

Reported: medians over the rounds, and each listener's ratio to PLAINTEXT; also the broker's
own CPU per MB in the produce and consume phases (read from /proc), steadier than records/s
on a shared 2-core machine where the client does TLS too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess, free_port
from tests.pki import make_pki

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";')
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def client_conf(protocol: str, bootstrap: str, ca: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(ca)
    if protocol.startswith("SASL"):
        conf.update({"sasl.mechanisms": "PLAIN", "sasl.username": "bench", "sasl.password": "bench-secret"})
    return conf


def create(conf: dict[str, Any], topic: str) -> None:
    admin = AdminClient(conf)  # (kept: a collected AdminClient fails its futures)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def produce(conf: dict[str, Any], topic: str, num: int, size: int) -> float:
    p = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000})
    value = b"x" * size
    t0 = time.monotonic()
    for _ in range(num):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return num / (time.monotonic() - t0)


def consume(conf: dict[str, Any], topic: str, num: int) -> float:
    c = Consumer({**conf, "group.id": f"b-{topic}", "enable.auto.commit": False, "fetch.max.bytes": 52_428_800})
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0 = 0, 0.0
    deadline = time.monotonic() + 120
    while got < num and time.monotonic() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                if not got:
                    t0 = time.monotonic()
                got += 1
    c.close()
    assert got == num, (got, num)
    return num / (time.monotonic() - t0)


def latency(conf: dict[str, Any], topic: str, rate: int, seconds: float) -> tuple[float, float]:
    p = Producer({**conf, "acks": 1, "linger.ms": 0})
    lat: list[float] = []

    def done(err: Any, msg: Any, sent: float) -> None:
        if err is None:
            lat.append(time.monotonic() - sent)

    n = int(rate * seconds)
    t0 = time.monotonic()
    for i in range(n):
        due = t0 + i / rate
        while time.monotonic() < due:
            p.poll(max(0.0, due - time.monotonic()))
        now = time.monotonic()
        p.produce(topic, b"y" * 100, partition=0, on_delivery=lambda err, msg, now=now: done(err, msg, now))
        p.poll(0)
    p.flush(30)
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-security-") as d:
        pki = make_pki(Path(d) / "pki")
        ports = {name: free_port() for name in LISTENERS}
        props = {"listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
                 "inter.broker.listener.name": "PLAINTEXT", "ssl.keystore.type": "PEM",
                 "ssl.keystore.location": str(pki.keystore("server")), "sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS, "log.retention.bytes": str(1 << 30)}
        b = BrokerProcess(Path(d) / "broker", props, port=ports["PLAINTEXT"]).start()
        results: dict[str, list[tuple[float, float, float, float]]] = {n: [] for n in LISTENERS}
        cpu: dict[str, list[tuple[float, float]]] = {n: [] for n in LISTENERS}
        try:
            for rnd in range(1, args.rounds + 1):
                for name in LISTENERS:
                    conf = client_conf(name, f"127.0.0.1:{ports[name]}", pki.ca)
                    topic = f"s-{name.lower()}-{uuid.uuid4().hex[:6]}"
                    create(conf, topic)
                    assert b.proc is not None
                    mb = args.num * args.size / 1e6
                    c0 = cpu_seconds(b.proc.pid)
                    prod = produce(conf, topic, args.num, args.size)
                    c1 = cpu_seconds(b.proc.pid)
                    cons = consume(conf, topic, args.num)
                    c2 = cpu_seconds(b.proc.pid)
                    p50, p99 = latency(conf, topic, args.rate, args.seconds)
                    results[name].append((prod, cons, p50, p99))
                    cpu[name].append(((c1 - c0) * 1e6 / mb, (c2 - c1) * 1e6 / mb))
                    print(f"round {rnd} {name:>14}: produce {prod:>9,.0f} rec/s  consume {cons:>9,.0f} rec/s  "
                          f"latency p50 {p50:5.2f} ms p99 {p99:6.2f} ms  broker CPU/MB produce "
                          f"{cpu[name][-1][0]:5.0f} us consume {cpu[name][-1][1]:5.0f} us", flush=True)
        finally:
            b.close()
    base = [statistics.median(x[i] for x in results["PLAINTEXT"]) for i in range(4)]
    print(f"\nmedians over {args.rounds} rounds ({args.size} B records), ratio to PLAINTEXT")
    base_cpu = [statistics.median(x[i] for x in cpu["PLAINTEXT"]) for i in range(2)]
    for name in LISTENERS:
        med = [statistics.median(x[i] for x in results[name]) for i in range(4)]
        mcpu = [statistics.median(x[i] for x in cpu[name]) for i in range(2)]
        print(f"{name:>14}: produce {med[0]:>9,.0f} ({med[0] / base[0]:.2f}x)  consume {med[1]:>9,.0f} "
              f"({med[1] / base[1]:.2f}x)  p50 {med[2]:.2f} ms  p99 {med[3]:.2f} ms ({med[3] / base[3]:.2f}x)  "
              f"broker CPU/MB produce {mcpu[0]:.0f} us ({mcpu[0] / base_cpu[0]:.2f}x) consume {mcpu[1]:.0f} us "
              f"({mcpu[1] / base_cpu[1]:.2f}x)")


if __name__ == "__main__":
    main()
