"""Pure pieces of the tools, tested in-process with tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Message

from samsa.cli.client import load_properties, to_librdkafka, topic_matcher
from samsa.cli.common import CliError
from samsa.cli.configs import parse_add_config, parse_delete_config
from samsa.cli.console_consumer import Formatter, parse_offset
from samsa.cli.console_producer import LineReader
from samsa.cli.perf import format_java_date, percentiles
from samsa.cli.topics import parse_replica_assignment, parse_topic_configs


@pytest.mark.parametrize(
    "text, expected",
    [
        ("k1=v1", {"k1": "v1"}),
        ("k1=v1,k2=[v2,v3],k3 = v3", {"k1": "v1", "k2": "v2,v3", "k3": "v3"}),
        ("ssl.endpoint.identification.algorithm=", {"ssl.endpoint.identification.algorithm": ""}),
        ("cleanup.policy=[compact,delete]", {"cleanup.policy": "compact,delete"}),
    ],
)
def test_add_config(text: str, expected: dict[str, str]) -> None:
    assert parse_add_config(text) == expected


@pytest.mark.parametrize("text", ["a", "a=b=c", "a=b,c"])
def test_add_config_rejects(text: str) -> None:
    with pytest.raises(CliError, match="key=val"):
        parse_add_config(text)


def test_delete_config() -> None:
    assert parse_delete_config(["a, b", "c"]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "pairs, expected",
    [(["a=1"], {"a": "1"}), (["a = 1", "b=2"], {"a": "1", "b": "2"}), ([], {})],
)
def test_topic_configs(pairs: list[str], expected: dict[str, str]) -> None:
    assert parse_topic_configs(pairs) == expected


@pytest.mark.parametrize("pair", ["a", "a=", "a=b=c"])
def test_topic_configs_rejects(pair: str) -> None:
    with pytest.raises(CliError, match="key=val"):
        parse_topic_configs([pair])


def test_replica_assignment() -> None:
    assert parse_replica_assignment("0:1, 1:2") == [[0, 1], [1, 2]]
    with pytest.raises(CliError, match="duplicate"):
        parse_replica_assignment("0:0")
    with pytest.raises(CliError, match="different replication factor"):
        parse_replica_assignment("0:1,2")


@pytest.mark.parametrize(
    "props, line, expected",
    [
        ({}, "hello", (None, None, b"hello")),
        ({"parse.key": "true", "key.separator": ":"}, "k:v:w", (None, b"k", b"v:w")),
        ({"parse.key": "true"}, "k\tv", (None, b"k", b"v")),
        ({"parse.key": "true", "key.separator": ":", "null.marker": "<null>"}, "<null>:v", (None, None, b"v")),
        (
            {"parse.headers": "true", "parse.key": "true", "key.separator": ":"},
            "h1:a,h2:b\tk:v",
            ([("h1", b"a"), ("h2", b"b")], b"k", b"v"),
        ),
        ({"parse.key": "true", "ignore.error": "true"}, "novalue", (None, None, b"novalue")),
    ],
)
def test_line_reader(props: dict[str, str], line: str, expected: tuple[object, ...]) -> None:
    assert LineReader.from_properties(props).parse(line) == expected


def test_line_reader_errors() -> None:
    with pytest.raises(CliError, match="No key separator found on line number 1: 'x'"):
        LineReader.from_properties({"parse.key": "true"}).parse("x")
    with pytest.raises(CliError, match="may not be equal"):
        LineReader.from_properties({"headers.separator": ":"})


def _msg(
    key: bytes | None = b"k",
    timestamp: tuple[int, int] = (1, 1000),
    headers: list[tuple[str, str | bytes | None]] | None = None,
) -> Message:
    return Message(topic="t", partition=2, offset=7, key=key, value=b"v\xff", headers=headers, timestamp=timestamp)


@pytest.mark.parametrize(
    "props, msg, expected",
    [
        ({}, _msg(), "v\ufffd\n"),
        ({"print.key": "true", "key.separator": ":"}, _msg(), "k:v\ufffd\n"),
        ({"print.key": "true"}, _msg(key=None), "null\tv\ufffd\n"),
        (
            {"print.timestamp": "true", "print.partition": "true", "print.offset": "true", "print.key": "true"},
            _msg(),
            "CreateTime:1000\tPartition:2\tOffset:7\tk\tv\ufffd\n",
        ),
        ({"print.timestamp": "true"}, _msg(timestamp=(2, 5)), "LogAppendTime:5\tv\ufffd\n"),
        ({"print.headers": "true"}, _msg(headers=[("a", b"1"), ("b", None)]), "a:1,b:null\tv\ufffd\n"),
        ({"print.headers": "true"}, _msg(), "NO_HEADERS\tv\ufffd\n"),
        ({"print.offset": "true", "print.value": "false"}, _msg(), "Offset:7\n"),
        ({"line.separator": "|"}, _msg(), "v\ufffd|"),
    ],
)
def test_formatter(props: dict[str, str], msg: Message, expected: str) -> None:
    assert Formatter(props).format(msg) == expected


def test_parse_offset() -> None:
    assert parse_offset("5", False) == 5
    assert parse_offset("earliest", False) == -2
    assert parse_offset("LATEST", False) == -1
    assert parse_offset(None, True) == -2
    for bad in ("-1", "x"):
        with pytest.raises(CliError, match="is incorrect"):
            parse_offset(bad, False)


def test_percentiles_pick_like_kafka() -> None:
    assert percentiles(list(range(1000)), (0.5, 0.95, 0.99, 0.999)) == [500, 950, 990, 999]
    assert percentiles([], (0.5,)) == [0]


def test_java_date_format() -> None:
    text = format_java_date("yyyy-MM-dd HH:mm:ss:SSS", 1_700_000_000_123)
    assert text.endswith(":123") and len(text) == len("2023-11-14 22:13:20:123")
    assert format_java_date("'at' ss", 5_000).startswith("at ")


def test_properties_file(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("# comment\n! also\na=1\nb : 2\nc 3\nd=x\\\n   y\nkey.serializer=Foo\nsend.buffer.bytes=4096\n")
    props = load_properties(str(f))
    assert props == {"a": "1", "b": "2", "c": "3", "d": "xy", "key.serializer": "Foo", "send.buffer.bytes": "4096"}
    assert to_librdkafka(props) == {"a": "1", "b": "2", "c": "3", "d": "xy", "socket.send.buffer.bytes": "4096"}


def test_topic_matcher_is_kafka_include_list() -> None:
    rx = topic_matcher("'foo.*, bar'")
    assert rx.fullmatch("foo1") and rx.fullmatch("bar") and not rx.fullmatch("xbar")
