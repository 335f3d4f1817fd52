"""console-producer → console-consumer round trips against a real broker (no consumer group)."""

from __future__ import annotations

import re
import signal
import time
from typing import Any

import pytest

from tests.cli.helpers import ok, one_line_error, samsa, spawn


def create(broker: Any, topic: str, partitions: int = 1, *configs: str) -> None:
    args = [
        "topics",
        "--bootstrap-server",
        broker.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
    ]
    for c in configs:
        args += ["--config", c]
    ok(samsa(*args))


def produce(broker: Any, topic: str, text: str, *args: str) -> Any:
    return samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *args, input=text)


def consume(broker: Any, topic: str, *args: str) -> Any:
    return samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *args)


def processed(proc: Any) -> int:
    m = re.search(r"^Processed a total of (\d+) messages$", proc.stderr, re.M)
    assert m, proc.stderr
    return int(m.group(1))


KEYED = ["--property", "parse.key=true", "--property", "key.separator=:"]


def test_key_round_trip_from_beginning(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    assert ok(produce(broker, topic_name, "k1:v1\nk2:v2\nk3:v:3\n", *KEYED)) == ""
    proc = consume(
        broker,
        topic_name,
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
    )
    assert ok(proc) == "k1:v1\nk2:v2\nk3:v:3\n"
    assert processed(proc) == 3


def test_partition_and_offset(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 2)
    ok(produce(broker, topic_name, "a\nb\nc\nd\n", "--producer-property", "partitioner=murmur2_random"))
    # Pin records to partition 1 via keys? No: use a single partition read of everything there is.
    total = 0
    for p in (0, 1):
        proc = consume(
            broker,
            topic_name,
            "--partition",
            str(p),
            "--offset",
            "earliest",
            "--timeout-ms",
            "1500",
            "--property",
            "print.partition=true",
            "--property",
            "print.offset=true",
        )
        lines = ok(proc).splitlines()
        assert all(line.startswith(f"Partition:{p}\tOffset:") for line in lines), lines
        assert [int(line.split("\t")[1].split(":")[1]) for line in lines] == list(range(len(lines)))
        total += len(lines)
    assert total == 4

    create(broker, topic_name + "-one")
    ok(produce(broker, topic_name + "-one", "v0\nv1\nv2\nv3\n"))
    proc = consume(
        broker,
        topic_name + "-one",
        "--partition",
        "0",
        "--offset",
        "2",
        "--max-messages",
        "2",
        "--property",
        "print.offset=true",
    )
    assert ok(proc) == "Offset:2\tv2\nOffset:3\tv3\n"
    assert processed(proc) == 2


def test_timeout_ms_exits_and_reports(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    ok(produce(broker, topic_name, "x\ny\n"))
    start = time.monotonic()
    proc = consume(broker, topic_name, "--from-beginning", "--timeout-ms", "1000")
    assert ok(proc) == "x\ny\n" and processed(proc) == 2
    assert time.monotonic() - start < 15
    # Without --from-beginning a consumer starts at the end: nothing old is printed.
    proc = consume(broker, topic_name, "--timeout-ms", "1000")
    assert ok(proc) == "" and processed(proc) == 0


def test_max_messages_stops_early(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    ok(produce(broker, topic_name, "".join(f"m{i}\n" for i in range(20)), "--sync"))
    proc = consume(broker, topic_name, "--from-beginning", "--max-messages", "5")
    assert ok(proc) == "m0\nm1\nm2\nm3\nm4\n" and processed(proc) == 5


def test_headers_timestamps_and_nulls(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    ok(
        produce(
            broker,
            topic_name,
            "h1=a;h2=b|k|v\n<null>|<null>|nokey\n",
            "--property",
            "parse.headers=true",
            "--property",
            "headers.delimiter=|",
            "--property",
            "headers.separator=;",
            "--property",
            "headers.key.separator==",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=|",
            "--property",
            "null.marker=<null>",
            "--compression-codec",
            "gzip",
        )
    )
    proc = consume(
        broker,
        topic_name,
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.timestamp=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.key=true",
    )
    lines = ok(proc).splitlines()
    assert re.fullmatch(r"CreateTime:\d+\th1:a,h2:b\tk\tv", lines[0]), lines
    assert re.fullmatch(r"CreateTime:\d+\tNO_HEADERS\tnull\tnokey", lines[1]), lines


def test_compression_codecs_round_trip(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        ok(produce(broker, topic_name, f"{codec}-1\n{codec}-2\n", "--compression-codec", codec))
    proc = consume(broker, topic_name, "--from-beginning", "--max-messages", "8")
    assert ok(proc).split() == [f"{c}-{i}" for c in ("gzip", "snappy", "lz4", "zstd") for i in (1, 2)]


def test_delivery_errors_are_reported_and_fail(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1, "max.message.bytes=200")
    proc = produce(broker, topic_name, "small\n" + "x" * 1000 + "\n", "--sync")
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert errors[0].startswith(
        f"Error when sending message to topic {topic_name} with key: null, value: 1000 bytes with error: "
    )
    assert ok(consume(broker, topic_name, "--from-beginning", "--max-messages", "1")) == "small\n"


def test_bad_input_line_is_one_line_error(broker: Any, topic_name: str) -> None:
    create(broker, topic_name)
    line = one_line_error(produce(broker, topic_name, "k:v\nnokey\n", *KEYED))
    assert line.endswith("No key separator found on line number 2: 'nokey'")
    assert ok(consume(broker, topic_name, "--from-beginning", "--max-messages", "1")) == "v\n"


def test_include_regex(broker: Any, topic_name: str) -> None:
    for suffix in ("a", "b"):
        create(broker, f"{topic_name}-{suffix}")
        ok(produce(broker, f"{topic_name}-{suffix}", f"{suffix}\n"))
    proc = samsa(
        "console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--include",
        f"{topic_name}-.*",
        "--from-beginning",
        "--max-messages",
        "2",
    )
    assert sorted(ok(proc).split()) == ["a", "b"]


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_reports_count(broker: Any, topic_name: str, sig: signal.Signals, code: int) -> None:
    """Ctrl-C / SIGTERM end an open-ended consumer with Kafka's count line."""
    create(broker, topic_name)
    ok(produce(broker, topic_name, "a\nb\n"))
    proc = spawn("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name, "--from-beginning")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "a\n" and proc.stdout.readline() == "b\n"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == "Processed a total of 2 messages", err
    assert "Traceback" not in err
