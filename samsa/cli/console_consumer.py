"""`samsa console-consumer`: kafka-console-consumer.sh — print a topic's records on standard output.

Without `--group` the consumer never talks to a group coordinator: it `assign()`s every partition
(or the one `--partition`) at an explicit start (`--offset N`, or the log start/end resolved by
ListOffsets) and commits nothing. confluent-kafka insists on a `group.id`, so a throwaway one is
set, but no group is joined and no offsets are fetched or committed. With `--group` it subscribes
like Kafka's tool does. Output follows Kafka's DefaultMessageFormatter; on exit "Processed a total
of N messages" goes to stderr.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from typing import Any, BinaryIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError, discard_stdout, parse_properties


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa console-consumer",
        description="Read data from Kafka topics and write it to standard output (like kafka-console-consumer.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--topic", metavar="TOPIC", help="The topic to consume from.")
    p.add_argument(
        "--include", metavar="REGEX", help="Regular expression specifying list of topics to include for consumption."
    )
    p.add_argument(
        "--partition",
        type=int,
        metavar="N",
        help="The partition to consume from. Consumption starts from the end of the partition "
        "unless '--offset' is specified.",
    )
    p.add_argument(
        "--offset",
        metavar="OFFSET",
        help="The offset to consume from (a non-negative number), or 'earliest' which means from beginning, "
        "or 'latest' which means from end (default: latest).",
    )
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="Start with the earliest message present in the log rather than the latest message.",
    )
    p.add_argument(
        "--max-messages", type=int, metavar="N", help="The maximum number of messages to consume before exiting."
    )
    p.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="If specified, exit if no message is available for consumption for the specified interval.",
    )
    p.add_argument(
        "--group", metavar="GROUP", help="The consumer group id of the consumer (joins the group and subscribes)."
    )
    p.add_argument(
        "--property",
        "--formatter-property",
        dest="property",
        action="append",
        metavar="PROP",
        help="Formatter properties: print.timestamp, print.key, print.offset, print.partition, print.headers, "
        "print.value, key.separator, line.separator, headers.separator, null.literal.",
    )
    p.add_argument("--formatter-config", metavar="FILE", help="Formatter properties file (--property wins).")
    p.add_argument("--formatter", metavar="CLASS", help="Only the default message formatter is supported.")
    p.add_argument(
        "--consumer-property",
        "--command-property",
        dest="consumer_property",
        action="append",
        metavar="KEY=VALUE",
        help="A consumer property (repeatable).",
    )
    p.add_argument(
        "--consumer.config",
        "--command-config",
        dest="consumer_config",
        metavar="FILE",
        help="Consumer properties file (--consumer-property wins).",
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_committed", "read_uncommitted"),
        help="read_committed hides aborted and open transactions (default read_uncommitted).",
    )
    p.add_argument(
        "--skip-message-on-error",
        action="store_true",
        help="If there is an error when processing a message, skip it instead of halting.",
    )
    p.add_argument(
        "--key-deserializer", metavar="CLASS", help="Accepted for compatibility; keys are printed as UTF-8 text."
    )
    p.add_argument(
        "--value-deserializer", metavar="CLASS", help="Accepted for compatibility; values are printed as UTF-8 text."
    )
    p.add_argument("--enable-systest-events", action="store_true", help="Accepted for compatibility; ignored.")
    return p


class Formatter:
    """Kafka's DefaultMessageFormatter, writing UTF-8 (invalid bytes replaced)."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool) -> bool:
            return props[name].strip().lower() == "true" if name in props else default

        self.timestamp = flag("print.timestamp", False)
        self.key = flag("print.key", False)
        self.value = flag("print.value", True)
        self.partition = flag("print.partition", False)
        self.offset = flag("print.offset", False)
        self.headers = flag("print.headers", False)
        self.key_separator = props.get("key.separator", "\t")
        self.line_separator = props.get("line.separator", "\n")
        self.headers_separator = props.get("headers.separator", ",")
        self.null_literal = props.get("null.literal", "null")

    def _text(self, data: str | bytes | None) -> str:
        if data is None:
            return self.null_literal
        return data if isinstance(data, str) else data.decode("utf-8", errors="replace")

    def format(self, msg: Message) -> str:
        out: list[str] = []
        # Each column is followed by the key separator if a later column is printed, else the line
        # separator (exactly as Kafka does, so print.value=false still ends records with a newline).
        later = [self.partition, self.offset, self.headers, self.key, self.value]

        def column(text: str, index: int) -> None:
            out.append(text)
            out.append(self.key_separator if any(later[index:]) else self.line_separator)

        if self.timestamp:
            ts_type, ts = msg.timestamp()
            if ts_type == TIMESTAMP_NOT_AVAILABLE:
                text = "NO_TIMESTAMP"
            else:
                text = f"{'LogAppendTime' if ts_type == TIMESTAMP_LOG_APPEND_TIME else 'CreateTime'}:{ts}"
            column(text, 0)
        if self.partition:
            column(f"Partition:{msg.partition()}", 1)
        if self.offset:
            column(f"Offset:{msg.offset()}", 2)
        if self.headers:
            hdrs = msg.headers() or []
            pairs = list(hdrs.items()) if isinstance(hdrs, dict) else list(hdrs)
            text = self.headers_separator.join(f"{k}:{self._text(v)}" for k, v in pairs) if pairs else "NO_HEADERS"
            column(text, 3)
        if self.key:
            column(self._text(msg.key()), 4)
        if self.value:
            out.append(self._text(msg.value()))
            out.append(self.line_separator)
        return "".join(out)


def parse_offset(text: str | None, from_beginning: bool) -> int:
    if text is None:
        return OFFSET_BEGINNING if from_beginning else OFFSET_END
    low = text.lower()
    if low == "earliest":
        return OFFSET_BEGINNING
    if low == "latest":
        return OFFSET_END
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise CliError(
            f"The provided offset value '{text}' is incorrect. "
            "Valid values are 'earliest', 'latest', or a non-negative long.",
            exit_code=2,
        )
    return value


def _check_args(p: ArgumentParser, a: Any, consumer_props: dict[str, str]) -> str | None:
    """Kafka's option checks; returns the group id to use (None: no group)."""
    if bool(a.topic) == bool(a.include):
        p.error(
            "Exactly one of whitelist/topic is required."
            if not a.topic
            else "Option [topic] can't be used with option [include]"
        )
    if a.partition is not None:
        if not a.topic:
            p.error("The topic is required when partition is specified.")
        if a.from_beginning and a.offset is not None:
            p.error("Options from-beginning and offset cannot be specified together.")
    elif a.offset is not None:
        p.error("The partition is required when offset is specified.")
    if not a.bootstrap_server:
        p.error('Missing required argument "[bootstrap-server]"')
    if a.formatter and not a.formatter.endswith("DefaultMessageFormatter"):
        raise CliError(f"unsupported --formatter {a.formatter!r}: only the default formatter is available", exit_code=2)
    groups = {g for g in (a.group, consumer_props.get("group.id")) if g}
    if len(groups) > 1:
        p.error(
            "The group ids provided in different places (directly using '--group', via '--consumer-property', "
            "or via '--consumer.config') do not match. Detected group ids: "
            + ", ".join(f"'{g}'" for g in sorted(groups))
        )
    if groups and a.partition is not None:
        p.error("Options group and partition cannot be specified together.")
    reset = consumer_props.get("auto.offset.reset")
    if reset is not None and a.from_beginning and reset != "earliest":
        raise CliError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', please remove one option"
        )
    return next(iter(groups)) if groups else None


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    props = cl.load_properties(a.consumer_config) if a.consumer_config else {}
    props.update(parse_properties(a.consumer_property, "--consumer-property"))
    group = _check_args(p, a, props)
    start = parse_offset(a.offset, a.from_beginning)
    fmt_props = cl.load_properties(a.formatter_config) if a.formatter_config else {}
    fmt_props.update(parse_properties(a.property, "--property"))
    formatter = Formatter(fmt_props)
    if a.max_messages is not None and a.max_messages == 0:
        print("Processed a total of 0 messages", file=sys.stderr)
        return 0

    props.setdefault("client.id", "console-consumer")
    props.setdefault("auto.offset.reset", "earliest" if a.from_beginning else "latest")
    if a.isolation_level:
        props["isolation.level"] = a.isolation_level
    if group is None:
        # A group.id is mandatory in confluent-kafka; it is never used to join or commit.
        props["group.id"] = f"console-consumer-{random.randrange(100000)}"
        props["enable.auto.commit"] = "false"
        props["enable.auto.offset.store"] = "false"
    else:
        props["group.id"] = group
    cl.stop_on_sigterm()
    errors = cl.ClientErrors()
    consumer = cl.make_client(Consumer, cl.client_config(a.bootstrap_server, props, errors))
    progress = _Progress()
    exit_code = 0
    try:
        md = cl.wait_for_cluster(consumer, errors, a.bootstrap_server)
    except CliError:
        consumer.close()
        raise
    try:
        timeout_s = a.timeout_ms / 1000.0 if a.timeout_ms is not None and a.timeout_ms >= 0 else None
        if group is None:
            ready = _assign(consumer, errors, a, md, start, timeout_s)
        else:
            consumer.subscribe([a.topic] if a.topic else ["^" + a.include.lstrip("^")])
            ready = True
        if ready:
            exit_code = _consume(consumer, formatter, a, timeout_s, progress)
    except KeyboardInterrupt as e:
        exit_code = cl.interrupted_exit_code(e)
    finally:
        with contextlib.suppress(BaseException):  # closing must not hide the real outcome
            consumer.close()
        print(f"Processed a total of {progress.count} messages", file=sys.stderr, flush=True)
    return exit_code


class _Progress:
    count = 0


def _assign(consumer: Consumer, errors: cl.ClientErrors, a: Any, md: Any, start: int, timeout_s: float | None) -> bool:
    """Assign partitions without a group; False if the topic never appeared within --timeout-ms."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    warned = False
    while True:
        if a.topic:
            topics = [a.topic] if a.topic in md.topics and not md.topics[a.topic].error else []
        else:
            rx = cl.topic_matcher(a.include)
            topics = sorted(t for t in md.topics if rx.fullmatch(t) and t not in cl.INTERNAL_TOPICS)
        if topics:
            break
        if not warned:
            what = f"topic {a.topic}" if a.topic else f"any topic matching {a.include!r}"
            print(f"Waiting for {what} to exist...", file=sys.stderr, flush=True)
            warned = True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
        md = cl.wait_for_cluster(consumer, errors, a.bootstrap_server)
    assignment: list[TopicPartition] = []
    for topic in topics:
        partitions = sorted(md.topics[topic].partitions)
        if a.partition is not None:
            if a.partition not in partitions:
                raise CliError(
                    f"Partition {a.partition} does not exist in topic {topic} ({len(partitions)} partitions)"
                )
            partitions = [a.partition]
        assignment += [TopicPartition(topic, pid, start) for pid in partitions]
    consumer.assign(assignment)
    return True


def _consume(consumer: Consumer, formatter: Formatter, a: Any, timeout_s: float | None, progress: _Progress) -> int:
    out: BinaryIO = sys.stdout.buffer
    limit = a.max_messages if a.max_messages is not None and a.max_messages > 0 else None
    last = time.monotonic()
    while limit is None or progress.count < limit:
        wait = 1.0 if timeout_s is None else max(0.0, min(1.0, last + timeout_s - time.monotonic()))
        batch = consumer.consume(num_messages=500 if limit is None else min(500, limit - progress.count), timeout=wait)
        now = time.monotonic()
        chunks: list[str] = []
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if a.skip_message_on_error and not err.fatal():
                    print(f"Error processing message, skipping this message: {cl.error_message(err)}", file=sys.stderr)
                    continue
                progress.count += len(chunks)
                _write(out, chunks)
                print(
                    f"Error processing message, terminating consumer process: {cl.error_message(err)}", file=sys.stderr
                )
                return 1
            chunks.append(formatter.format(msg))
            last = now
            if limit is not None and progress.count + len(chunks) >= limit:
                break
        progress.count += len(chunks)  # counted before printing, as Kafka does
        if not _write(out, chunks):
            # Kafka's words, and its exit status: 0, the reader having had what it wanted.
            print("Unable to write to standard out, closing consumer.", file=sys.stderr)
            discard_stdout()  # so that the exit-time flush is quiet
            return 0
        if timeout_s is not None and not batch and now - last >= timeout_s:
            break
    return 0


def _write(out: BinaryIO, chunks: list[str]) -> bool:
    if not chunks:
        return True
    try:
        out.write("".join(chunks).encode("utf-8", errors="replace"))
        out.flush()
        return True
    except (BrokenPipeError, OSError):
        return False
