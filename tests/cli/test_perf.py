"""`samsa perf produce|consume`: small runs, Kafka's output formats."""

from __future__ import annotations

import re
from typing import Any

from tests.cli.helpers import ok, samsa

TOTAL = re.compile(
    r"(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
    r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\."
)
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"


def test_produce_then_consume(broker: Any, topic_name: str) -> None:
    ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name, "--partitions", "2"))
    out = ok(
        samsa(
            "perf",
            "produce",
            "--topic",
            topic_name,
            "--num-records",
            "500",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={broker.bootstrap}",
            "acks=1",
        )
    )
    last = out.splitlines()[-1]
    m = TOTAL.fullmatch(last)
    assert m and m.group(1) == "500", out

    out = ok(
        samsa(
            "perf",
            "consume",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic_name,
            "--messages",
            "500",
            "--timeout",
            "5000",
        )
    )
    header, line = out.splitlines()
    assert header == HEADER
    fields = line.split(", ")
    assert len(fields) == 10, line
    assert re.fullmatch(DATE, fields[0]) and re.fullmatch(DATE, fields[1])
    assert fields[2] == "0.0477"  # 500 * 100 bytes in MB
    assert fields[4] == "500" and fields[6] == "0"


def test_throttled_produce(broker: Any, topic_name: str) -> None:
    out = ok(
        samsa(
            "perf",
            "produce",
            "--topic",
            topic_name,
            "--num-records",
            "40",
            "--payload-monotonic",
            "--throughput",
            "40",
            "--bootstrap-server",
            broker.bootstrap,
        )
    )
    m = TOTAL.fullmatch(out.splitlines()[-1])
    assert m and m.group(1) == "40", out
    rate = float(out.split(" records/sec")[0].split()[-1])
    assert rate <= 45, out


def test_consume_timeout_warns(broker: Any, topic_name: str) -> None:
    ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name))
    out = ok(
        samsa(
            "perf",
            "consume",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic_name,
            "--messages",
            "10",
            "--timeout",
            "500",
            "--hide-header",
        )
    )
    warning, line = out.splitlines()
    assert warning.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (500 ms)")
    assert line.split(", ")[4] == "0"
