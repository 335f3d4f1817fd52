"""What the ACL authorizer costs on the produce path: one broker with the authorizer and 1,000
ACLs loaded against one without, in the same run.

Both brokers have a SASL_PLAINTEXT listener (PLAIN, user `bench`), so the only difference is
`authorizer.class.name`. The authorized broker holds 1,000 ACLs: 700 literal ones on other
topics and principals, 249 prefixed ones of lengths 1 to 12 (some of them prefixes of the
benchmark's topic name, for other principals, so that every uncached decision looks several
up), 50 on groups, and the one that lets `bench` write: a prefixed ALLOW on `bench-`. Rounds
alternate between the brokers; each round librdkafka (confluent-kafka) produces --num records
of --size bytes, acks=1, linger 5 ms, batch.size 16 KiB (one request per ~150 records: a decision each), to a fresh topic, and the records/s until the last
delivery report and the broker's CPU seconds per MB (from /proc) are taken.

    PYTHONPATH=. .venv/bin/python bench/bench_authorizer.py --rounds 5

Reported: medians and the authorized/plain ratios (the goal: within 5%), and the cost of one
decision in the index with 1,000 ACLs, uncached and cached, measured in-process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.server.acls import AclIndex, Entry, Op, Pattern, PatternType, Permission, ResourceType
from tests.brokerproc import BrokerProcess, free_port
from tests.rawclient import RawClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret" '
        'user_admin="admin-secret";')
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def thousand_acls() -> list[dict[str, Any]]:
    """(resource type, name, pattern type, principal, operation, permission) as CreateAcls creations."""
    def c(rtype: int, name: str, pattern: int, principal: str, op: int, perm: int = 3) -> dict[str, Any]:
        return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
                "principal": principal, "host": "*", "operation": op, "permission_type": perm}

    out = [c(2, f"t-{i:04d}", 3, f"User:u{i % 37}", 3 + i % 5) for i in range(700)]
    names = "bench-topic-0123456789"
    out += [c(2, names[:1 + i % 12] if i % 3 == 0 else f"p{i}-"[:1 + i % 12], 4, f"User:other{i}", 4)
            for i in range(249)]
    out += [c(3, f"g-{i}", 3, f"User:u{i}", 3) for i in range(50)]
    out.append(c(2, "bench-", 4, "User:bench", 4))
    assert len(out) == 1000
    return out


def broker(root: Path, authorizer: bool) -> tuple[BrokerProcess, int]:
    sasl, plain = free_port(), free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
             "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    if authorizer:
        props.update({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                      "super.users": "User:ANONYMOUS;User:admin"})
    return BrokerProcess(root, props, port=plain).start(), sasl


def conf(sasl_port: int) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": "bench", "sasl.password": "bench-secret"}


def produce_round(b: BrokerProcess, sasl_port: int, num: int, size: int) -> tuple[float, float]:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # PLAINTEXT: ANONYMOUS, a super user
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # Kafka's Java default batch.size (librdkafka's 1 MB would make requests, and so decisions, rare)
    p = Producer({**conf(sasl_port), "linger.ms": 5, "acks": 1, "batch.size": 16384,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    done = 0
    errors = 0

    def report(err: Any, msg: Any) -> None:
        nonlocal done, errors
        done += 1
        errors += err is not None

    p.flush(10)
    assert b.proc is not None
    cpu0, t0 = cpu_seconds(b.proc.pid), time.perf_counter()
    for _ in range(num):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(b.proc.pid) - cpu0
    assert done == num and errors == 0, (done, errors)
    return num / elapsed, cpu / (num * size / 1e6)


def decision_cost() -> tuple[float, float]:
    """Microseconds per decision with 1,000 ACLs: uncached (the index's full rule) and cached."""
    ix = AclIndex()
    by: dict[Pattern, set[Entry]] = {}
    for a in thousand_acls():
        by.setdefault(Pattern(ResourceType(a["resource_type"]), a["resource_name"],
                              PatternType(a["resource_pattern_type"])), set()).add(
            Entry(a["principal"], a["host"], Op(a["operation"]), Permission(a["permission_type"])))
    for p, entries in by.items():
        ix.set(p, entries)
    n = 20000
    uncached = timeit.timeit(lambda: ix._decide("User:bench", "127.0.0.1", Op.WRITE, ResourceType.TOPIC,
                                                "bench-topic-0123"), number=n) / n * 1e6
    cached = timeit.timeit(lambda: ix.authorize("User:bench", "127.0.0.1", Op.WRITE, ResourceType.TOPIC,
                                                "bench-topic-0123"), number=n) / n * 1e6
    return uncached, cached


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--num", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, plain_sasl = broker(Path(tmp) / "plain", authorizer=False)
        secured, secured_sasl = broker(Path(tmp) / "acl", authorizer=True)
        try:
            with RawClient(secured.bootstrap) as c:
                r = c.request(30, 3, {"creations": thousand_acls()})
                assert all(x.error_code == 0 for x in r.results)
            results: dict[str, list[tuple[float, float]]] = {"plain": [], "acl": []}
            produce_round(plain, plain_sasl, 20_000, args.size)  # warm-up, both
            produce_round(secured, secured_sasl, 20_000, args.size)
            for i in range(args.rounds):
                order = [("plain", plain, plain_sasl), ("acl", secured, secured_sasl)]
                for name, b, port in order if i % 2 == 0 else order[::-1]:
                    results[name].append(produce_round(b, port, args.num, args.size))
                    print(f"round {i} {name:5s} {results[name][-1][0]:>10,.0f} rec/s  "
                          f"{results[name][-1][1]:.3f} cpu-s/MB", flush=True)
        finally:
            plain.close()
            secured.close()
    med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    uncached, cached = decision_cost()
    print(f"\nproduce, {args.num} x {args.size} B, median of {args.rounds} rounds")
    print(f"  no authorizer     {med['plain'][0]:>10,.0f} rec/s  {med['plain'][1]:.3f} broker cpu-s/MB")
    print(f"  1,000 ACLs        {med['acl'][0]:>10,.0f} rec/s  {med['acl'][1]:.3f} broker cpu-s/MB")
    print(f"  ratio             {med['acl'][0] / med['plain'][0]:.3f} throughput, "
          f"{med['acl'][1] / med['plain'][1]:.3f} cpu per MB")
    print(f"decision with 1,000 ACLs: {uncached:.2f} us uncached, {cached:.2f} us cached")


if __name__ == "__main__":
    main()
