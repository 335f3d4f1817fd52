"""`samsa console-producer`: kafka-console-producer.sh — one record per line of standard input.

Line parsing is Kafka's `LineMessageReader` (`parse.key`, `key.separator`, `parse.headers`,
`headers.delimiter`, `headers.separator`, `headers.key.separator`, `null.marker`, `ignore.error`);
producer defaults are the console producer's (acks=-1, linger.ms=1000 via `--timeout`, ...).
Each failed delivery is reported on one line and makes the exit code 1; stdin EOF flushes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError, parse_properties

_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Header = tuple[str, str | bytes | None]


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa console-producer",
        description="Read data from standard input and publish it to Kafka (like kafka-console-producer.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--broker-list", metavar="SERVERS", help="DEPRECATED, use --bootstrap-server instead.")
    p.add_argument("--topic", metavar="TOPIC", help="REQUIRED: The topic to produce messages to.")
    p.add_argument(
        "--sync", action="store_true", help="Send each message synchronously, waiting for its acknowledgement."
    )
    p.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        metavar="CODEC",
        help="The compression codec: 'none', 'gzip', 'snappy', 'lz4' or 'zstd'. Without a value: 'gzip'.",
    )
    p.add_argument("--batch-size", type=int, metavar="SIZE", help="batch.size in bytes (default 16384).")
    p.add_argument("--message-send-max-retries", type=int, metavar="N", help="retries (default 3).")
    p.add_argument("--retry-backoff-ms", type=int, metavar="MS", help="retry.backoff.ms (default 100).")
    p.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        help="linger.ms: how long a message waits for a batch to fill (default 1000).",
    )
    p.add_argument(
        "--request-required-acks", metavar="ACKS", help="The required acks of the producer requests (default -1)."
    )
    p.add_argument(
        "--request-timeout-ms", type=int, metavar="MS", help="The ack timeout of the producer requests (default 1500)."
    )
    p.add_argument("--metadata-expiry-ms", type=int, metavar="MS", help="metadata.max.age.ms (default 300000).")
    p.add_argument(
        "--max-block-ms", type=int, metavar="MS", help="Accepted for compatibility; librdkafka does not block on send."
    )
    p.add_argument("--max-memory-bytes", type=int, metavar="BYTES", help="buffer.memory (default 33554432).")
    p.add_argument("--max-partition-memory-bytes", type=int, metavar="BYTES", help="batch.size in bytes.")
    p.add_argument("--socket-buffer-size", type=int, metavar="SIZE", help="send.buffer.bytes (default 102400).")
    p.add_argument(
        "--property",
        action="append",
        metavar="PROP",
        help="Line reader properties: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, null.marker, ignore.error.",
    )
    p.add_argument("--reader-config", metavar="FILE", help="Properties file for the line reader (--property wins).")
    p.add_argument(
        "--producer-property", action="append", metavar="KEY=VALUE", help="A producer property (repeatable)."
    )
    p.add_argument(
        "--producer.config",
        "--command-config",
        dest="producer_config",
        metavar="FILE",
        help="Producer properties file (--producer-property wins).",
    )
    p.add_argument("--line-reader", metavar="CLASS", help="Only the default line reader is supported.")
    return p


@dataclass
class LineReader:
    """Kafka's LineMessageReader: turns one input line into (headers, key, value)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None
    line_number: int = field(default=0)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineReader:
        r = cls()

        def truthy(k: str) -> bool:
            return props[k].strip().lower() == "true"

        if "parse.key" in props:
            r.parse_key = truthy("parse.key")
        r.key_separator = props.get("key.separator", r.key_separator)
        if "parse.headers" in props:
            r.parse_headers = truthy("parse.headers")
        r.headers_delimiter = props.get("headers.delimiter", r.headers_delimiter)
        r.headers_separator = props.get("headers.separator", r.headers_separator)
        r.headers_key_separator = props.get("headers.key.separator", r.headers_key_separator)
        if "ignore.error" in props:
            r.ignore_error = truthy("ignore.error")
        r.null_marker = props.get("null.marker")
        pairs = [
            ("headers.delimiter", r.headers_delimiter, "headers.separator", r.headers_separator),
            ("headers.delimiter", r.headers_delimiter, "headers.key.separator", r.headers_key_separator),
            ("headers.separator", r.headers_separator, "headers.key.separator", r.headers_key_separator),
        ]
        if r.null_marker is not None:
            pairs += [
                ("null.marker", r.null_marker, "key.separator", r.key_separator),
                ("null.marker", r.null_marker, "headers.separator", r.headers_separator),
                ("null.marker", r.null_marker, "headers.delimiter", r.headers_delimiter),
                ("null.marker", r.null_marker, "headers.key.separator", r.headers_key_separator),
            ]
        for n1, v1, n2, v2 in pairs:
            if v1 == v2:
                raise CliError(f"{n1} and {n2} may not be equal", exit_code=2)
        return r

    def _split(self, enabled: bool, line: str, start: int, sep: str, name: str) -> str | None:
        if not enabled:
            return None
        i = line.find(sep, start)
        if i == -1:
            if self.ignore_error:
                return None
            raise CliError(f"No {name} found on line number {self.line_number}: '{line}'")
        return line[start:i]

    def parse(self, line: str) -> tuple[list[Header] | None, bytes | None, bytes | None]:
        self.line_number += 1
        headers_text = self._split(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_end = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = self._split(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        headers = None
        if headers_text is not None and headers_text != self.null_marker:
            headers = self._headers(headers_text)
        return headers, self._bytes(key), self._bytes(value)

    def _bytes(self, s: str | None) -> bytes | None:
        return None if s is None or s == self.null_marker else s.encode("utf-8")

    def _headers(self, text: str) -> list[Header]:
        out: list[Header] = []
        for pair in re.split(self.headers_separator, text):
            i = pair.find(self.headers_key_separator)
            if i == -1:
                if self.ignore_error:
                    out.append((pair, None))
                    continue
                raise CliError(f"No header key separator found in pair '{pair}' on line number {self.line_number}")
            hkey = pair[:i]
            if hkey == self.null_marker:
                raise CliError(
                    f"Header keys should not be equal to the null marker '{self.null_marker}' as they can't be null"
                )
            out.append((hkey, self._bytes(pair[i + len(self.headers_key_separator) :])))
        return out


def producer_properties(a: Any) -> dict[str, str]:
    """The console producer's settings: file, then --producer-property, then the dedicated flags."""
    props = cl.load_properties(a.producer_config) if a.producer_config else {}
    props.update(parse_properties(a.producer_property, "--producer-property"))
    codec = a.compression_codec if a.compression_codec is not None else "none"
    if codec not in _CODECS:
        raise CliError(f"unknown compression codec {codec!r}; expected one of {', '.join(_CODECS)}", exit_code=2)
    props["compression.type"] = codec
    props.setdefault("client.id", "console-producer")

    def merge(key: str, flag: Any, default: Any) -> None:
        # Kafka's maybeMergeOptions: an explicit flag wins; the flag's default only fills a gap.
        if flag is not None:
            props[key] = str(flag)
        elif key not in props and default is not None:
            props[key] = str(default)

    merge("linger.ms", a.timeout, 1000)
    merge("acks", a.request_required_acks, -1)
    merge("request.timeout.ms", a.request_timeout_ms, 1500)
    merge("retries", a.message_send_max_retries, 3)
    merge("retry.backoff.ms", a.retry_backoff_ms, 100)
    merge("send.buffer.bytes", a.socket_buffer_size, None)
    merge("buffer.memory", a.max_memory_bytes, None)
    merge(
        "batch.size", a.max_partition_memory_bytes if a.max_partition_memory_bytes is not None else a.batch_size, 16384
    )
    merge("metadata.max.age.ms", a.metadata_expiry_ms, None)
    return props


class _Deliveries:
    """Delivery-report callback: counts failures and reports each one on a line, like Kafka's
    ErrorLoggingCallback."""

    def __init__(self) -> None:
        self.failed = 0
        self.fatal: KafkaError | None = None

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            return
        self.failed += 1
        key, value = msg.key(), msg.value()
        k = "null" if key is None else f"{len(key)} bytes"
        v = "null" if value is None else f"{len(value)} bytes"
        print(
            f"Error when sending message to topic {msg.topic()} with key: {k}, value: {v} "
            f"with error: {cl.error_message(err)}",
            file=sys.stderr,
            flush=True,
        )
        if err.fatal():
            self.fatal = err


def _lines() -> Iterator[str]:
    stream = sys.stdin.buffer
    prompt = sys.stdin.isatty() and sys.stdout.isatty()  # Kafka prompts with ">" on a console
    while True:
        if prompt:
            sys.stdout.write(">")
            sys.stdout.flush()
        raw = stream.readline()
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace")
        if line.endswith("\n"):
            line = line[:-1]
            if line.endswith("\r"):
                line = line[:-1]
        yield line


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    bootstrap = a.bootstrap_server or a.broker_list
    if not bootstrap:
        p.error('Missing required argument "[bootstrap-server]"')
    if not a.topic:
        p.error('Missing required argument "[topic]"')
    if a.line_reader and a.line_reader not in (
        "kafka.tools.LineMessageReader",
        "org.apache.kafka.tools.LineMessageReader",
    ):
        raise CliError(
            f"unsupported --line-reader {a.line_reader!r}: only the default line reader is available", exit_code=2
        )
    reader_props = cl.load_properties(a.reader_config) if a.reader_config else {}
    reader_props.update(parse_properties(a.property, "--property"))
    reader = LineReader.from_properties(reader_props)

    errors = cl.ClientErrors()
    deliveries = _Deliveries()
    conf = cl.client_config(bootstrap, producer_properties(a), errors)
    producer = cl.make_client(Producer, conf)
    cl.wait_for_cluster(producer, errors, bootstrap)

    cl.stop_on_sigterm()
    interrupted: int | None = None
    try:
        for line in _lines():
            headers, key, value = reader.parse(line)
            _produce(producer, a.topic, key, value, headers, deliveries)
            if a.sync:
                _flush(producer, errors, bootstrap)
            else:
                producer.poll(0)
            if deliveries.fatal is not None:
                break
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: like Kafka's shutdown hook, send what was read
        interrupted = cl.interrupted_exit_code(e)
    finally:
        _flush(producer, errors, bootstrap)
    if interrupted is not None:
        return interrupted
    if deliveries.fatal is not None:
        raise CliError(f"producer failed: {cl.error_message(deliveries.fatal)}")
    return 1 if deliveries.failed else 0


def _produce(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list[Header] | None,
    on_delivery: _Deliveries,
) -> None:
    while True:
        try:
            if headers:
                producer.produce(topic, value, key, headers=headers, on_delivery=on_delivery)
            else:
                producer.produce(topic, value, key, on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)  # local queue full: let deliveries drain
        except KafkaException as e:
            err = cl.kafka_error(e)
            raise CliError(f"cannot send to topic {topic}: {cl.error_message(err) if err else e}") from None


def _flush(producer: Producer, errors: cl.ClientErrors, bootstrap: str) -> None:
    """Wait until every queued record is delivered or has failed (message.timeout.ms bounds it)."""
    while producer.flush(1.0) > 0:
        if errors.fatal is not None:
            raise CliError(f"producer failed: {errors.fatal.str()}")
