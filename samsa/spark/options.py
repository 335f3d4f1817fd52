"""The options of `spark.readStream.format("samsa")`: Spark's Kafka-source names and meaning.

Spark lower-cases data source option keys before a Python data source sees them, so every key
is looked up lower-cased; `kafka.*` keys are passed to the client without the prefix. The rules
and most messages follow Spark's KafkaSourceProvider:

    kafka.bootstrap.servers     required
    subscribe | subscribePattern | assign    exactly one (comma list | regex | {"t":[0,1]})
    startingOffsets             earliest | latest | {"t":{"0":23,"1":-2}}  (-2 earliest, -1 latest)
                                default latest when streaming, earliest in a batch query
    endingOffsets               batch only: latest (default) | JSON; never earliest, nor -2
    startingTimestamp / startingOffsetsByTimestamp, endingTimestamp / endingOffsetsByTimestamp
                                milliseconds, win over the offsets options (ending: batch only)
    startingOffsetsByTimestampStrategy   error (default) | latest
    maxOffsetsPerTrigger, minOffsetsPerTrigger (positive), maxTriggerDelay ("15m", "10s", ms)
    failOnDataLoss (default true), includeHeaders (default false)

The sink (`df.write.format("samsa")`) takes kafka.bootstrap.servers, `topic` (the default for
rows without a topic column; it wins over the column, as in Spark) and these producer settings:

    kafka.acks                  all | -1 (default) | 1 | 0
    kafka.compression.type      none (default) | gzip | snappy | lz4 | zstd
    kafka.batch.size            bytes per record batch before compression, default 1 MiB
                                (Kafka's producer defaults to 16 KiB; a batch must stay under the
                                topic's max.message.bytes, 1 MiB + 12 by default)
    kafka.request.timeout.ms    how long the broker may take to answer (default 30000)
    kafka.retries               retries of a batch after a retriable error: at least this many
                                (default 10), and for at least the client's 30 s timeout
    kafka.retry.backoff.ms      first backoff between retries, growing to 1 s (default 100)

Errors raise `OptionError`, a ValueError naming the option and what to do about it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.protocol.client_security import ClientSecurity
from samsa.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetJsonError,
    PartitionOffsets,
    TopicPartition,
    parse_partition_offsets,
    parse_partition_timestamps,
    parse_partitions,
)

SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
ASSIGN = "assign"
STRATEGY_NAMES = ("subscribe", "subscribePattern", "assign")
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

# Kafka consumer settings Spark refuses, with its reason
_UNSUPPORTED_KAFKA = {
    "auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported. Instead set the source option"
        " 'startingOffsets' to 'earliest' or 'latest' to specify where to start. The source manages"
        " which offsets are consumed itself, so that no data is missed when new topics or partitions"
        " are subscribed; 'startingOffsets' only applies when a new query starts, a restarted query"
        " resumes where it left off."
    ),
    "key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are returned as bytes."
        " Use DataFrame operations to explicitly deserialize the keys."
    ),
    "value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are returned as bytes."
        " Use DataFrame operations to explicitly deserialize the values."
    ),
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}
_UNSUPPORTED_KAFKA_SINK = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are written as bytes.",
    "value.serializer": "Kafka option 'value.serializer' is not supported as values are written as bytes.",
}

_DURATION = re.compile(r"(-?\d+)\s*([a-z]*)")
_DURATION_MS = {"": 1, "ms": 1, "us": 0.001, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class OptionError(ValueError):
    """An option that is missing, conflicting or malformed; the message says what to do."""


@dataclass(frozen=True)
class Earliest:
    """Start (or end) at each partition's log start offset."""


@dataclass(frozen=True)
class Latest:
    """Start (or end) at each partition's latest offset."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Per-partition offsets, EARLIEST (-2) and LATEST (-1) allowed as in Spark."""

    offsets: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> PartitionOffsets:
        return dict(self.offsets)


@dataclass(frozen=True)
class GlobalTimestamp:
    """The first offset at or after `timestamp` (ms) in every partition."""

    timestamp: int


@dataclass(frozen=True)
class SpecificTimestamps:
    """The first offset at or after a per-partition timestamp (ms); -1 / -2 latest / earliest."""

    timestamps: tuple[tuple[TopicPartition, int], ...]

    def as_dict(self) -> PartitionOffsets:
        return dict(self.timestamps)


OffsetSpec = Earliest | Latest | SpecificOffsets | GlobalTimestamp | SpecificTimestamps
EARLIEST_SPEC = Earliest()
LATEST_SPEC = Latest()


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    kafka_params: tuple[tuple[str, str], ...]  # sorted, without the "kafka." prefix
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    starting_timestamp_strategy: str  # "error" or "latest": when no offset has that timestamp
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    include_headers: bool
    topic: str | None
    streaming: bool
    read_committed: bool = False  # kafka.isolation.level=read_committed

    @property
    def kafka_config(self) -> dict[str, str]:
        """Client configuration: every `kafka.*` option without its prefix."""
        return dict(self.kafka_params)


SINK_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SINK_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
DEFAULT_SINK_BATCH_SIZE = 1 << 20


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    kafka_params: tuple[tuple[str, str], ...]
    topic: str | None
    acks: int = -1
    compression: int = 0  # a codec of samsa.protocol.compression
    batch_size: int = DEFAULT_SINK_BATCH_SIZE
    request_timeout_ms: int = 30_000
    retries: int = 10
    retry_backoff_ms: int = 100
    transactional_id_prefix: str | None = None  # exactly once (spark/txn.py)
    transaction_timeout_ms: int = 60_000

    @property
    def kafka_config(self) -> dict[str, str]:
        return dict(self.kafka_params)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _kafka_params(params: dict[str, str], unsupported: Mapping[str, str], what: str) -> tuple[tuple[str, str], ...]:
    kafka = {k[len("kafka.") :]: v for k, v in params.items() if k.startswith("kafka.")}
    for name, message in unsupported.items():
        if name in kafka:
            raise OptionError(message)
    servers = kafka.get("bootstrap.servers", "").strip()
    if not servers:
        raise OptionError(
            f"Option 'kafka.bootstrap.servers' must be specified (host:port[,host:port]) for the samsa {what}"
        )
    try:  # how to connect: kafka.security.protocol, kafka.sasl.*, kafka.ssl.* (Kafka's client names)
        ClientSecurity.from_properties(kafka)
    except ValueError as e:
        raise OptionError(f"Invalid connection option (as kafka.<name>): {e}") from None
    return tuple(sorted(kafka.items()))


def parse_bool(params: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = params.get(key)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be 'true' or 'false', got '{raw}'")
    return text == "true"


def parse_positive_int(params: Mapping[str, str], key: str, name: str) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"Option '{name}' must be a positive integer, got '{raw}'") from None
    if value <= 0:
        raise OptionError(f"Option '{name}' must be a positive integer, got '{raw}'")
    return value


def parse_duration_ms(raw: str, name: str) -> int:
    """Spark's time strings: "15m", "10s", "500ms", "2h", "1d"; a bare number is milliseconds."""
    match = _DURATION.fullmatch(raw.strip().lower())
    if match is None or match.group(2) not in _DURATION_MS or int(match.group(1)) < 0:
        raise OptionError(
            f"Option '{name}' must be a duration such as '15m', '10s' or '500ms' (a bare number is"
            f" milliseconds), got '{raw}'"
        )
    return int(int(match.group(1)) * _DURATION_MS[match.group(2)])


def _strategy(params: dict[str, str]) -> tuple[tuple[str, ...] | None, str | None, tuple[TopicPartition, ...] | None]:
    given = [k for k in (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN) if k in params]
    names = ", ".join(STRATEGY_NAMES)
    if not given:
        raise OptionError(f"One of the following options must be specified for the samsa source: {names}")
    if len(given) > 1:
        raise OptionError(f"Only one of the following options can be specified for the samsa source: {names}")
    value = params[given[0]]
    if given[0] == SUBSCRIBE:
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return topics, None, None
    if given[0] == SUBSCRIBE_PATTERN:
        pattern = value.strip()
        if not pattern:
            raise OptionError(
                f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
            )
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"Option 'subscribePattern' is not a valid regular expression ({e}): '{value}'") from None
        return None, pattern, None
    if not value.strip().startswith("{"):
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    try:
        partitions = parse_partitions(value)
    except OffsetJsonError as e:
        raise OptionError(f"Option 'assign': {e}") from None
    if not partitions:
        raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    return None, None, tuple(partitions)


def _offset_spec(params: dict[str, str], prefix: str, default: OffsetSpec) -> OffsetSpec:
    """`prefix` is "starting" or "ending": timestamp, then by-timestamp JSON, then offsets."""
    global_key, by_ts_key, offsets_key = f"{prefix}timestamp", f"{prefix}offsetsbytimestamp", f"{prefix}offsets"
    if global_key in params:
        raw = params[global_key].strip()
        try:
            return GlobalTimestamp(int(raw))
        except ValueError:
            raise OptionError(
                f"Option '{prefix}Timestamp' expects a single long value (milliseconds since the epoch), got {raw}"
            ) from None
    if by_ts_key in params:
        try:
            timestamps = parse_partition_timestamps(params[by_ts_key].strip())
        except OffsetJsonError as e:
            raise OptionError(f"Option '{prefix}OffsetsByTimestamp': {e}") from None
        return SpecificTimestamps(tuple(sorted(timestamps.items())))
    raw_offsets = params.get(offsets_key)
    if raw_offsets is None:
        return default
    text = raw_offsets.strip()
    if text.lower() == "earliest":
        return EARLIEST_SPEC
    if text.lower() == "latest":
        return LATEST_SPEC
    try:
        offsets = parse_partition_offsets(text)
    except OffsetJsonError as e:
        raise OptionError(f"Option '{prefix}Offsets' must be 'earliest', 'latest' or per-partition JSON: {e}") from None
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST:
            raise OptionError(
                f"Option '{prefix}Offsets': offset {offset} for {topic}-{partition} is invalid;"
                " use an offset >= 0, -1 for latest or -2 for earliest"
            )
    return SpecificOffsets(tuple(sorted(offsets.items())))


def _check_streaming(params: dict[str, str]) -> None:
    if "endingoffsets" in params or "endingtimestamp" in params:
        raise OptionError("ending offset not valid in streaming queries: remove option 'endingOffsets'")
    if "endingoffsetsbytimestamp" in params:
        raise OptionError("ending timestamp not valid in streaming queries: remove option 'endingOffsetsByTimestamp'")


def _check_batch(start: OffsetSpec, end: OffsetSpec) -> None:
    if isinstance(start, Latest):
        raise OptionError("starting offset can't be latest for batch queries: "
                          "set 'startingOffsets' to earliest or JSON")
    if isinstance(start, SpecificOffsets):
        for (topic, partition), offset in start.offsets:
            if offset == LATEST:
                raise OptionError(f"startingOffsets for {topic}-{partition} can't be latest for batch queries")
    if isinstance(end, Earliest):
        raise OptionError("ending offset can't be earliest for batch queries: set 'endingOffsets' to latest or JSON")
    if isinstance(end, SpecificOffsets):
        for (topic, partition), offset in end.offsets:
            if offset == EARLIEST:
                raise OptionError(f"ending offset for {topic}-{partition} can't be earliest for batch queries")
    _check_limits(start, end)


def _check_limits(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's checkOffsetLimitValidity: matching partitions, start not after end."""
    if isinstance(start, SpecificOffsets) and isinstance(end, SpecificOffsets):
        what, first, last = "offset", start.as_dict(), end.as_dict()
    elif isinstance(start, SpecificTimestamps) and isinstance(end, SpecificTimestamps):
        what, first, last = "timestamp", start.as_dict(), end.as_dict()
    else:
        return
    if set(first) != set(last):
        raise OptionError(
            f"The starting and ending {what}s name different partitions: starting {sorted(first)},"
            f" ending {sorted(last)}; name the same partitions in both"
        )
    for tp, begin in sorted(first.items()):
        if begin >= 0 and last[tp] >= 0 and begin > last[tp]:
            raise OptionError(f"The starting {what} {begin} of {tp[0]}-{tp[1]} is after the ending {what} {last[tp]}")


def parse_source_options(options: Mapping[str, str], *, streaming: bool = True) -> SourceOptions:
    """Validate `options` (keys in any case) for a streaming or batch read; OptionError if bad."""
    params = _lower(options)
    if streaming:
        _check_streaming(params)
    subscribe, pattern, assign = _strategy(params)
    kafka_params = _kafka_params(params, _UNSUPPORTED_KAFKA, "source")
    start = _offset_spec(params, "starting", LATEST_SPEC if streaming else EARLIEST_SPEC)
    end = _offset_spec(params, "ending", LATEST_SPEC)
    if streaming:
        _check_limits(start, end)
    else:
        _check_batch(start, end)
    strategy = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got '{strategy}'"
        )
    max_offsets = parse_positive_int(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_offsets = parse_positive_int(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise OptionError(
            f"The value of minOffsetsPerTrigger({min_offsets}) is higher than the"
            f" maxOffsetsPerTrigger({max_offsets}): lower one or raise the other"
        )
    delay = params.get("maxtriggerdelay")
    topic = params.get("topic")
    return SourceOptions(
        bootstrap_servers=dict(kafka_params)["bootstrap.servers"].strip(),
        kafka_params=kafka_params,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting_offsets=start,
        ending_offsets=end,
        starting_timestamp_strategy=strategy,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=(DEFAULT_MAX_TRIGGER_DELAY_MS if delay is None
                              else parse_duration_ms(delay, "maxTriggerDelay")),
        fail_on_data_loss=parse_bool(params, "failondataloss", "failOnDataLoss", True),
        include_headers=parse_bool(params, "includeheaders", "includeHeaders", False),
        topic=topic.strip() if topic is not None and topic.strip() else None,
        streaming=streaming,
        read_committed=_isolation(dict(kafka_params)),
    )


def _isolation(kafka: Mapping[str, str]) -> bool:
    """kafka.isolation.level: read_uncommitted (Spark's default) or read_committed."""
    level = kafka.get("isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"Option 'kafka.isolation.level' must be read_uncommitted or read_committed, got '{level}'")
    return level == "read_committed"


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate `options` for writing: bootstrap servers, `kafka.*`, the default `topic`."""
    params = _lower(options)
    kafka_params = _kafka_params(params, _UNSUPPORTED_KAFKA_SINK, "sink")
    kafka = dict(kafka_params)
    topic = params.get("topic")
    acks = kafka.get("acks", "all").strip().lower()
    if acks not in SINK_ACKS:
        raise OptionError(f"Option 'kafka.acks' must be all, -1, 1 or 0, got '{kafka['acks']}'")
    codec = kafka.get("compression.type", "none").strip().lower()
    if codec not in SINK_CODECS:
        names = ", ".join(SINK_CODECS)
        raise OptionError(f"Option 'kafka.compression.type' must be one of {names}, got '{kafka['compression.type']}'")
    prefix = params.get("transactional.id.prefix", "").strip() or None
    if prefix is not None:
        if topic is None or not topic.strip():
            raise OptionError("Option 'transactional.id.prefix' (exactly once) needs the 'topic' option: the sink keeps"
                              " its ledger of committed micro-batches beside that topic")
        if SINK_ACKS[acks] != -1:
            raise OptionError("Option 'transactional.id.prefix' (exactly once) needs kafka.acks=all")
    if "transactional.id" in kafka:
        raise OptionError("Kafka option 'transactional.id' is not supported: set 'transactional.id.prefix' for"
                          " exactly-once writes (each task gets <prefix>-<partition id>)")
    return SinkOptions(
        bootstrap_servers=kafka["bootstrap.servers"].strip(),
        kafka_params=kafka_params,
        topic=topic.strip() if topic is not None and topic.strip() else None,
        acks=SINK_ACKS[acks],
        compression=SINK_CODECS[codec],
        batch_size=_natural(kafka, "batch.size", DEFAULT_SINK_BATCH_SIZE),
        request_timeout_ms=_natural(kafka, "request.timeout.ms", 30_000, minimum=1),
        retries=_natural(kafka, "retries", 10),
        retry_backoff_ms=_natural(kafka, "retry.backoff.ms", 100),
        transactional_id_prefix=prefix,
        transaction_timeout_ms=_natural(kafka, "transaction.timeout.ms", 60_000, minimum=1),
    )


def _natural(kafka: Mapping[str, str], key: str, default: int, minimum: int = 0) -> int:
    raw = kafka.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < minimum:
        what = "a positive" if minimum > 0 else "a non-negative"
        raise OptionError(f"Option 'kafka.{key}' must be {what} integer, got '{raw}'")
    return value
