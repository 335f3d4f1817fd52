"""`samsa perf produce|consume`: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

Producer: sends `--num-records` records as fast as `--throughput` allows, measuring each record's
latency from produce() to its delivery report (librdkafka's `Message.latency()`, so one bound
callback serves every record), and prints Kafka's window lines every 5 s and its summary line with
the 50th/95th/99th/99.9th percentiles. Consumer: reads `--messages` records and prints Kafka's CSV
header and result line. Without `--group` it assigns partitions directly (no group coordinator).
"""

from __future__ import annotations

import math
import random
import re
import sys
import time
import uuid
from datetime import datetime
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Message, Producer, TopicPartition

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError

_REPORTING_INTERVAL_MS = 5000
_MAX_SAMPLES = 500_000
_PAYLOAD_POOL = 64  # distinct random payloads cycled through (Kafka draws fresh bytes per record)


@cl.one_line_errors
def run(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: samsa perf {produce,consume} [ARGS ...]\n\n"
            "  produce   producer performance test (like kafka-producer-perf-test.sh)\n"
            "  consume   consumer performance test (like kafka-consumer-perf-test.sh)\n\n"
            "Run `samsa perf produce --help` or `samsa perf consume --help` for options."
        )
        return 0 if argv else 2
    mode, rest = argv[0], argv[1:]
    if mode in ("produce", "producer"):
        return run_producer(rest)
    if mode in ("consume", "consumer"):
        return run_consumer(rest)
    print(f"samsa perf: error: unknown mode {mode!r}; expected produce or consume (see --help)", file=sys.stderr)
    return 2


# --- Java-style number formatting ---------------------------------------------------------------
def _jf(x: float, digits: int) -> str:
    """Java's %.Nf, which prints NaN and Infinity rather than nan and inf."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return f"{x:.{digits}f}"


def _div(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


# --- producer -----------------------------------------------------------------------------------
def producer_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa perf produce",
        description="This tool is used to verify the producer performance (like kafka-producer-perf-test.sh).",
    )
    add = p.add_argument
    add("--topic", required=True, metavar="TOPIC", help="produce messages to this topic")
    add("--num-records", required=True, type=int, metavar="NUM-RECORDS", help="number of messages to produce")
    payload = p.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, metavar="RECORD-SIZE", help="message size in bytes")
    payload.add_argument("--payload-file", metavar="PAYLOAD-FILE", help="file to read the payloads from (UTF-8 text)")
    payload.add_argument("--payload-monotonic", action="store_true", help="payload is an increasing integer")
    add("--payload-delimiter", default="\\n", metavar="DELIMITER", help="payload delimiter in --payload-file")
    add("--throughput", required=True, type=float, metavar="THROUGHPUT", help="messages/sec to aim for; -1: no limit")
    add("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE", help="producer properties (bootstrap.servers..)")
    add("--producer.config", "--command-config", dest="producer_config", metavar="CONFIG-FILE",
        help="producer config properties file.")
    add("--bootstrap-server", metavar="SERVER", help="The server(s) to connect to (overrides bootstrap.servers).")
    add("--print-metrics", action="store_true", help="print librdkafka statistics at the end of the test.")
    add("--transactional-id", metavar="TRANSACTIONAL-ID", help="The transactional id to use.")
    add("--transaction-duration-ms", type=int, metavar="MS", help="The max age of each transaction (default 3000).")
    add("--warmup-records", type=int, default=0, metavar="N", help="records left out of the steady-state statistics")
    return p


class ProducerStats:
    """Kafka's ProducerPerformance.Stats: totals, a 5 s reporting window, sampled latencies."""

    def __init__(self, num_records: int, steady_state: bool = False) -> None:
        self.start = time.monotonic()
        self.window_start = self.start
        self.sampling = max(1, num_records // max(1, min(num_records, _MAX_SAMPLES)))
        self.latencies: list[int] = []
        self.iteration = 0
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0
        self.steady_state = steady_state
        self.suppress_print = False

    def record(self, latency: int, size: int, now: float) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        if latency > self.max_latency:
            self.max_latency = latency
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency
        if latency > self.window_max_latency:
            self.window_max_latency = latency
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency)
        if (now - self.window_start) * 1000 >= _REPORTING_INTERVAL_MS:
            if self.steady_state and self.count == self.window_count:
                print("In steady state.")
            if not self.suppress_print:
                self.print_window(now)
            self.window_start = now
            self.window_count = self.window_bytes = self.window_total_latency = self.window_max_latency = 0
        self.iteration += 1

    def print_window(self, now: float) -> None:
        elapsed_ms = (now - self.window_start) * 1000
        rate = _div(1000.0 * self.window_count, elapsed_ms)
        mb = _div(1000.0 * self.window_bytes, elapsed_ms) / (1024.0 * 1024.0)
        print(
            f"{self.window_count} records sent, {_jf(rate, 1)} records/sec ({_jf(mb, 2)} MB/sec), "
            f"{_jf(_div(self.window_total_latency, self.window_count), 1)} ms avg latency, "
            f"{_jf(float(self.window_max_latency), 1)} ms max latency.",
            flush=True,
        )

    def total_line(self) -> str:
        elapsed_ms = int((time.monotonic() - self.start) * 1000)
        rate = _div(1000.0 * self.count, elapsed_ms)
        mb = _div(1000.0 * self.bytes, elapsed_ms) / (1024.0 * 1024.0)
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        return (
            f"{self.count}{' steady state' if self.steady_state else ''} records sent, {_jf(rate, 6)} records/sec "
            f"({_jf(mb, 2)} MB/sec), {_jf(_div(self.total_latency, self.count), 2)} ms avg latency, "
            f"{_jf(float(self.max_latency), 2)} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, "
            f"{p999} ms 99.9th."
        )


def percentiles(samples: list[int], points: tuple[float, ...]) -> list[int]:
    """Kafka's percentile pick: the sorted sample at index int(p * n) (0 when there are none)."""
    ordered = sorted(samples)
    if not ordered:
        return [0 for _ in points]
    return [ordered[min(len(ordered) - 1, int(p * len(ordered)))] for p in points]


class _Delivery:
    """One delivery callback for every record: latency comes from the message itself."""

    def __init__(self, stats: ProducerStats, warmup: int, num_records: int) -> None:
        self.stats = stats
        self.steady: ProducerStats | None = None
        self.warmup = warmup
        self.num_records = num_records
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            if self.failed <= 5:
                print(
                    f"Error when sending message to topic {msg.topic()}: {cl.error_message(err)}",
                    file=sys.stderr,
                    flush=True,
                )
            return
        now = time.monotonic()
        latency = int((msg.latency() or 0.0) * 1000)
        size = len(msg.value() or b"")
        self.stats.record(latency, size, now)
        self.delivered += 1
        if self.warmup > 0 and self.delivered == self.warmup:
            self.steady = ProducerStats(self.num_records - self.warmup, steady_state=True)
            self.stats.suppress_print = True
        elif self.steady is not None:
            self.steady.record(latency, size, now)


def _payloads(a: Any) -> list[bytes] | None:
    if a.payload_file:
        delim = "\n" if a.payload_delimiter == "\\n" else a.payload_delimiter
        try:
            with open(a.payload_file, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise CliError(f"cannot read {a.payload_file}: {e.strerror or e}") from None
        print(f"Reading payloads from: {a.payload_file}")
        items = [s.encode("utf-8") for s in text.split(delim) if s]
        if not items:
            raise CliError("File does not exist or empty file provided.")
        print(f"Number of messages read: {len(items)}")
        return items
    if a.record_size is not None:
        rnd = random.Random(0)
        return [bytes(rnd.randrange(26) + 65 for _ in range(a.record_size)) for _ in range(_PAYLOAD_POOL)]
    return None


def producer_properties(a: Any, p: ArgumentParser) -> dict[str, str]:
    props = cl.load_properties(a.producer_config) if a.producer_config else {}
    for prop in a.producer_props or []:
        pieces = prop.split("=")
        if len(pieces) != 2:
            p.error(f"Invalid property: {prop}")
        props[pieces[0]] = pieces[1]
    props.setdefault("client.id", "perf-producer-client")
    if a.bootstrap_server:
        props["bootstrap.servers"] = a.bootstrap_server
    if a.transactional_id:
        props["transactional.id"] = a.transactional_id
    elif a.transaction_duration_ms is not None and "transactional.id" not in props:
        props["transactional.id"] = f"performance-producer-{uuid.uuid4()}"
    return props


def run_producer(argv: list[str]) -> int:
    p = producer_parser()
    a = p.parse_args(argv)
    if a.num_records <= 0:
        p.error("--num-records should be greater than zero")
    if a.warmup_records < 0:
        a.warmup_records = 0
    if a.warmup_records >= a.num_records:
        p.error(
            "The value for --warmup-records must be strictly fewer than the number of records in the test, "
            "--num-records."
        )
    if a.record_size is not None and a.record_size <= 0:
        p.error("--record-size should be greater than zero")
    if not a.producer_props and not a.producer_config and not a.bootstrap_server:
        p.error("Either --producer-props or --producer.config must be specified.")
    if a.transaction_duration_ms is not None and a.transaction_duration_ms <= 0:
        p.error("--transaction-duration-ms should be greater than zero")
    props = producer_properties(a, p)
    payloads = _payloads(a)
    transactional = "transactional.id" in props
    txn_duration = (a.transaction_duration_ms or 3000) / 1000.0

    errors = cl.ClientErrors()
    conf = cl.client_config(None, props, errors)
    bootstrap = conf["bootstrap.servers"]
    if a.print_metrics:
        conf["statistics.interval.ms"] = 1000
        conf["stats_cb"] = _remember_stats
    producer = cl.make_client(Producer, conf)
    cl.wait_for_cluster(producer, errors, bootstrap)
    if transactional:
        _txn(producer.init_transactions, errors.timeout)

    if a.warmup_records > 0:
        print(
            f"Warmup first {a.warmup_records} records. Steady state results will print after the complete test summary."
        )
    stats = ProducerStats(a.num_records)
    delivery = _Delivery(stats, a.warmup_records, a.num_records)
    produce = producer.produce
    poll = producer.poll
    topic = a.topic
    start = time.monotonic()
    in_txn = False
    txn_start = 0.0
    throughput = a.throughput
    pool = len(payloads) if payloads else 0
    prng = random.Random(0)
    try:
        for i in range(a.num_records):
            if payloads is None:
                payload = str(i).encode()
            elif a.payload_file:
                payload = payloads[prng.randrange(pool)]
            else:
                payload = payloads[i % pool]
            if transactional and not in_txn:
                _txn(producer.begin_transaction)
                in_txn, txn_start = True, time.monotonic()
            while True:
                try:
                    produce(topic, payload, on_delivery=delivery)
                    break
                except BufferError:
                    poll(0.05)
            if i % 256 == 0:
                poll(0)
            if in_txn and time.monotonic() - txn_start >= txn_duration:
                _txn(producer.commit_transaction)
                in_txn = False
            if throughput > 0:
                # Kafka's ThroughputThrottler sleeps when ahead of schedule; poll() sleeps while
                # serving delivery callbacks, but returns early when it served one.
                due = start + (i + 1) / throughput
                while (ahead := due - time.monotonic()) > 0:
                    poll(ahead)
            if errors.fatal is not None:
                raise CliError(f"producer failed: {errors.fatal.str()}")
        if in_txn:
            _txn(producer.commit_transaction)
        while producer.flush(1.0) > 0:
            if errors.fatal is not None:
                raise CliError(f"producer failed: {errors.fatal.str()}")
    except KeyboardInterrupt:
        producer.flush(5.0)
    print(stats.total_line())
    if delivery.steady is not None:
        print(delivery.steady.total_line())
    if a.print_metrics and _LAST_STATS:
        print(_LAST_STATS[-1])
    if delivery.failed:
        print(f"{delivery.failed} records failed to be delivered", file=sys.stderr)
        return 1
    return 0


_LAST_STATS: list[str] = []


def _remember_stats(stats_json: str) -> None:
    _LAST_STATS[:] = [stats_json]


def _txn(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except Exception as e:  # noqa: BLE001 - KafkaException and friends become one line
        err = cl.kafka_error(e)
        raise CliError(f"transaction failed: {cl.error_message(err) if err else e}") from None


# --- consumer -----------------------------------------------------------------------------------
def consumer_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa perf consume",
        description="This tool is used to verify the consumer performance (like kafka-consumer-perf-test.sh).",
    )
    add = p.add_argument
    add("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    add("--topic", metavar="TOPIC", help="The topic to consume from.")
    add("--include", metavar="REGEX", help="Regular expression specifying list of topics to include.")
    add("--group", metavar="GID", help="Join this consumer group (without it, partitions are assigned directly).")
    add("--fetch-size", type=int, default=1024 * 1024, metavar="SIZE", help="max.partition.fetch.bytes")
    add("--from-latest", action="store_true", help="Start at the end of the log rather than the beginning.")
    add(
        "--socket-buffer-size", type=int, default=2 * 1024 * 1024, metavar="SIZE", help="The size of the tcp RECV size."
    )
    add("--consumer.config", "--command-config", dest="consumer_config", metavar="FILE",
        help="Consumer config properties file.")
    add("--print-metrics", action="store_true", help="Accepted for compatibility; ignored.")
    add("--show-detailed-stats", action="store_true", help="Report stats for each reporting interval.")
    add("--timeout", type=int, default=10_000, metavar="MS", help="Longest wait between records (default 10000).")
    add("--messages", type=int, metavar="COUNT", help="REQUIRED: The number of messages to consume.")
    add("--reporting-interval", type=int, default=5000, metavar="MS", help="Interval between progress lines.")
    add("--date-format", default="yyyy-MM-dd HH:mm:ss:SSS", metavar="FORMAT", help="java.text.SimpleDateFormat")
    add("--hide-header", action="store_true", help="If set, skips printing the header for the stats")
    return p


def _date_spec(letter: str, n: int) -> str | None:
    if letter == "y":
        return "%y" if n == 2 else "%Y"
    if letter == "M":
        return "%m" if n <= 2 else ("%b" if n == 3 else "%B")
    if letter == "E":
        return "%a" if n <= 3 else "%A"
    return {"d": "%d", "H": "%H", "h": "%I", "m": "%M", "s": "%S", "a": "%p", "Z": "%z"}.get(letter)


def format_java_date(fmt: str, epoch_ms: int) -> str:
    """A java.text.SimpleDateFormat subset (y M d H h m s S a E Z, 'quoted text'), local time."""
    dt = datetime.fromtimestamp(epoch_ms / 1000.0).astimezone()
    out: list[str] = []
    for m in re.finditer(r"'[^']*'|([A-Za-z])\1*|[^A-Za-z']+", fmt):
        text = m.group(0)
        if text.startswith("'"):
            out.append(text[1:-1] or "'")
        elif text[0] == "S":
            out.append(f"{epoch_ms % 1000:0{len(text)}d}")
        elif text[0].isalpha():
            spec = _date_spec(text[0], len(text))
            out.append(dt.strftime(spec) if spec else text)
        else:
            out.append(text)
    return "".join(out)


def run_consumer(argv: list[str]) -> int:
    p = consumer_parser()
    a = p.parse_args(argv)
    if not a.bootstrap_server:
        p.error('Missing required argument "[bootstrap-server]"')
    if a.messages is None:
        p.error('Missing required argument "[messages]"')
    if bool(a.topic) == bool(a.include):
        p.error("Exactly one of the following options is required: [topic], [include]")
    if a.reporting_interval <= 0:
        raise CliError("Reporting interval must be greater than 0.")
    props = cl.load_properties(a.consumer_config) if a.consumer_config else {}
    props["group.id"] = a.group or f"perf-consumer-{random.randrange(100_000)}"
    props["receive.buffer.bytes"] = str(a.socket_buffer_size)
    props["max.partition.fetch.bytes"] = str(a.fetch_size)
    props["auto.offset.reset"] = "latest" if a.from_latest else "earliest"
    props["check.crcs"] = "false"
    props.setdefault("client.id", "perf-consumer-client")
    if not a.group:
        props["enable.auto.commit"] = "false"
        props["enable.auto.offset.store"] = "false"
    errors = cl.ClientErrors()
    consumer = cl.make_client(Consumer, cl.client_config(a.bootstrap_server, props, errors))
    try:
        md = cl.wait_for_cluster(consumer, errors, a.bootstrap_server)
    except CliError:
        consumer.close()
        raise
    if not a.hide_header:
        extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        first = "time, threadId" if a.show_detailed_stats else "start.time, end.time"
        print(f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}", flush=True)
    try:
        return _consume_perf(consumer, md, a)
    finally:
        consumer.close()


class _JoinTimer:
    """Kafka's ConsumerPerfRebListener: time spent joining the group, in total and per report."""

    def __init__(self) -> None:
        self.total_ms = 0
        self.round_ms = 0
        self.start = time.monotonic()
        self.assigned = False

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not self.assigned:
            elapsed = int((time.monotonic() - self.start) * 1000)
            self.total_ms += elapsed
            self.round_ms += elapsed
        self.assigned = True

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = False
        self.start = time.monotonic()


def _consume_perf(consumer: Consumer, md: Any, a: Any) -> int:
    start_ms = int(time.time() * 1000)
    join = _JoinTimer()
    if a.group:
        topics = [a.topic] if a.topic else ["^" + a.include.lstrip("^")]
        consumer.subscribe(topics, on_assign=join.on_assign, on_revoke=join.on_revoke)
    else:
        if a.topic:
            topics = [a.topic] if a.topic in md.topics else []
        else:
            rx = cl.topic_matcher(a.include)
            topics = sorted(t for t in md.topics if rx.fullmatch(t) and t not in cl.INTERNAL_TOPICS)
        offset = OFFSET_END if a.from_latest else OFFSET_BEGINNING
        consumer.assign([TopicPartition(t, pid, offset) for t in topics for pid in sorted(md.topics[t].partitions)])

    messages = bytes_read = last_messages = last_bytes = 0
    now = time.monotonic()
    last_report = last_consumed = now
    last_report_ms = start_ms
    timeout_s = a.timeout / 1000.0
    while messages < a.messages and now - last_consumed <= timeout_s:
        batch = consumer.consume(num_messages=min(1000, a.messages - messages), timeout=0.1)
        now = time.monotonic()
        for msg in batch:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise CliError(f"consume failed: {cl.error_message(err)}")
            last_consumed = now
            messages += 1
            bytes_read += len(msg.key() or b"") + len(msg.value() or b"")
            if (now - last_report) * 1000 >= a.reporting_interval:
                now_ms = int(time.time() * 1000)
                if a.show_detailed_stats:
                    _progress(a, bytes_read, last_bytes, messages, last_messages, last_report_ms, now_ms, join.round_ms)
                join.round_ms = 0
                last_report, last_report_ms = now, now_ms
                last_messages, last_bytes = messages, bytes_read
    if messages < a.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({a.timeout} ms) exceeded. "
            "You can use the --timeout option to increase the timeout."
        )
    end_ms = int(time.time() * 1000)
    if not a.show_detailed_stats:
        elapsed_s = (end_ms - start_ms) / 1000.0
        fetch_ms = (end_ms - start_ms) - join.total_ms
        mb = bytes_read / (1024 * 1024)
        print(
            _csv(
                format_java_date(a.date_format, start_ms),
                format_java_date(a.date_format, end_ms),
                _jf(mb, 4),
                _jf(_div(mb, elapsed_s), 4),
                messages,
                _jf(_div(messages, elapsed_s), 4),
                join.total_ms,
                fetch_ms,
                _jf(_div(mb, fetch_ms / 1000.0), 4),
                _jf(_div(messages, fetch_ms / 1000.0), 4),
            )
        )
    return 0


def _csv(*values: object) -> str:
    return ", ".join(str(v) for v in values)


def _progress(
    a: Any, bytes_read: int, last_bytes: int, messages: int, last_messages: int, start_ms: int, end_ms: int, join: int
) -> None:
    """Kafka's --show-detailed-stats line for one reporting interval."""
    elapsed = float(end_ms - start_ms)
    interval_mb = (bytes_read - last_bytes) / (1024 * 1024)
    interval_msgs = messages - last_messages
    fetch_ms = end_ms - start_ms - join
    print(
        _csv(
            format_java_date(a.date_format, end_ms),
            0,
            _jf(bytes_read / (1024 * 1024), 4),
            _jf(_div(1000.0 * interval_mb, elapsed), 4),
            messages,
            _jf(_div(interval_msgs, elapsed) * 1000.0, 4),
            join,
            fetch_ms,
            _jf(0.0 if fetch_ms <= 0 else 1000.0 * interval_mb / fetch_ms, 4),
            _jf(0.0 if fetch_ms <= 0 else 1000.0 * interval_msgs / fetch_ms, 4),
        ),
        flush=True,
    )
