"""`spark.read.format("samsa")` and `spark.readStream.format("samsa")`: Spark's Kafka source, in Python.
(Writing, `df.write.format("samsa")`, is `sink.py`; the data source below hands it over.)

How it works. The driver-side objects (the data source, its batch reader, its stream reader)
parse the options (`options.py`, Spark's names and rules) and plan offset ranges with their
own client (`client.py`): which topic-partitions the query reads (subscribe, subscribePattern
or assign), where each starts (earliest, latest, per-partition JSON, by timestamp) and ends.
Spark then pickles one `InputPartition` per topic-partition range to the executors; each
holds everything `read()` needs (bootstrap, topic, partition, from, until, headers) and no
live client. An executor fetches whole record batches from the partition's leader with the
process's pooled client and yields them as Arrow record batches in Spark's Kafka schema
(`arrow.py`), so no record goes through Python one by one on the way to Spark.

Streaming offsets are Spark's Kafka JSON, `{"topic": {"0": 12, "1": 40}}`: the first batch's
start comes from startingOffsets; every later one starts where the previous ended, and
restarting from a checkpoint replays the last planned range as it was planned. Partitions
that appear later are read from their earliest offset. `maxOffsetsPerTrigger` and
`minOffsetsPerTrigger`/`maxTriggerDelay` go through Spark's read limits (admission control),
`Trigger.AvailableNow` reads up to the offsets found when the query starts. An offset below
the log start (deleted by retention) fails the query when `failOnDataLoss` is true (the
default), else the range starts at the log start.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from samsa.spark.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ClientError,
    SamsaClient,
    client_for,
    security_params,
)
from samsa.spark.offsets import data_loss_message, find_data_loss, offset_ranges, rate_limit
from samsa.spark.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    OptionError,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    parse_source_options,
)

if TYPE_CHECKING:
    from samsa.spark.sink import SamsaBatchWriter, SamsaStreamWriter

TopicPartition = tuple[str, int]
SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
HEADERS = ", headers array<struct<key: string, value: binary>>"
FETCH_BYTES = 2 << 20  # per fetch: batches small enough that Spark writes one while the next is decoded
# A task's first fetch is small and each next one 4x larger, up to FETCH_BYTES: Spark starts on
# the first rows at once instead of waiting for a whole 2 MiB to be decoded (compressed, that
# can be 400k rows and 0.2 s), then Python decodes ahead while Spark writes.
FIRST_FETCH_BYTES = 64 << 10


class SamsaSourceError(ValueError):
    """A problem the user can fix (an option, a topic, the broker); raised at query start."""


class SamsaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> str:
        # Spark asks for the schema when the query is defined (`load()`), so options and the
        # topics are checked here: a mistake surfaces at once, as one short error.
        try:
            opts = _options(self.options, streaming=False)
            if not current_partitions(opts) and opts.subscribe_pattern is None:
                raise SamsaSourceError(_no_topic(opts))
        except SamsaSourceError as e:
            raise SamsaSourceError(str(e)) from None
        return SCHEMA + (HEADERS if opts.include_headers else "")

    def reader(self, schema: StructType) -> SamsaBatchReader:
        return SamsaBatchReader(_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> SamsaStreamReader:
        try:
            return SamsaStreamReader(_options(self.options, streaming=True))
        except SamsaSourceError as e:
            # PySpark 4.3's streaming runner hides an error raised here behind an
            # UnboundLocalError of its own; the first planning call raises it instead.
            return _FailedStreamReader(str(e))  # type: ignore[return-value]

    def writer(self, schema: StructType, overwrite: bool) -> SamsaBatchWriter:
        """`df.write.format("samsa")`: Spark's Kafka sink (`sink.py`)."""
        from samsa.spark.sink import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> SamsaStreamWriter:
        """`df.writeStream.format("samsa")`, any output mode (`sink.py`)."""
        from samsa.spark.sink import stream_writer

        return stream_writer(self.options, schema)


def _options(raw: Any, streaming: bool) -> SourceOptions:
    try:
        return parse_source_options(dict(raw), streaming=streaming)
    except OptionError as e:
        raise SamsaSourceError(str(e)) from None


# --------------------------------------------------------------------------- planning (driver)


def _client(opts: SourceOptions) -> SamsaClient:
    return client_for(opts.bootstrap_servers, security_params(opts.kafka_params), int(opts.read_committed))


def current_partitions(opts: SourceOptions) -> list[TopicPartition]:
    """The topic-partitions the query reads now."""
    c = _client(opts)
    try:
        if opts.assign is not None:
            known = c.metadata(sorted({t for t, _ in opts.assign}))
            missing = [f"{t}-{p}" for t, p in opts.assign if p not in known.get(t, {})]
            if missing:
                raise SamsaSourceError(f"assign names partitions that do not exist: {', '.join(missing)}")
            return sorted(opts.assign)
        if opts.subscribe is not None:
            known = c.metadata(list(opts.subscribe))
            return sorted((t, p) for t in opts.subscribe for p in known.get(t, {}))
        pattern = re.compile(opts.subscribe_pattern or "")
        known = c.metadata(None)
        return sorted((t, p) for t, parts in known.items() if pattern.fullmatch(t) for p in parts)
    except ClientError as e:
        raise SamsaSourceError(f"cannot reach Samsa at kafka.bootstrap.servers={opts.bootstrap_servers}: {e}. "
                               "Check that the brokers are running and the option lists host:port") from None


def _resolve(opts: SourceOptions, spec: OffsetSpec, tps: list[TopicPartition], which: str) -> dict[TopicPartition, int]:
    c = _client(opts)
    if not tps:
        return {}
    if isinstance(spec, Earliest):
        return c.list_offsets(tps, EARLIEST_TIMESTAMP)
    if isinstance(spec, Latest):
        return c.list_offsets(tps, LATEST_TIMESTAMP)
    if isinstance(spec, SpecificOffsets):
        given = dict(spec.offsets)
        unknown = sorted(set(given) - set(tps))
        if unknown:
            raise SamsaSourceError(f"{which} names partitions the query does not read: {unknown}")
        early = c.list_offsets(tps, EARLIEST_TIMESTAMP)
        late = c.list_offsets(tps, LATEST_TIMESTAMP)
        out = {}
        for tp in tps:
            o = given.get(tp, -2 if which == "startingOffsets" else -1)
            out[tp] = early[tp] if o == -2 else late[tp] if o == -1 else o
        return out
    if isinstance(spec, (GlobalTimestamp, SpecificTimestamps)):
        stamps = {tp: spec.timestamp for tp in tps} if isinstance(spec, GlobalTimestamp) else dict(spec.timestamps)
        found = c.list_offsets(list(stamps), stamps)
        late = c.list_offsets(list(stamps), LATEST_TIMESTAMP)
        return {tp: (late[tp] if o < 0 else o) for tp, o in found.items()}
    raise SamsaSourceError(f"unsupported {which}: {spec!r}")


def _to_json(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _from_json(doc: dict[str, Any]) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}


def _partitions(opts: SourceOptions, start: dict[TopicPartition, int], end: dict[TopicPartition, int]
                ) -> list[InputPartition]:
    c = _client(opts)
    tps = sorted(end)
    earliest = c.list_offsets(tps, EARLIEST_TIMESTAMP) if tps else {}
    problem = find_data_loss(start, earliest) if start else None
    if problem:
        if opts.fail_on_data_loss:
            raise SamsaSourceError(data_loss_message(problem, True))
        start = {tp: max(o, earliest.get(tp, o)) for tp, o in start.items()}
    security = security_params(opts.kafka_params)
    return [InputPartition((opts.bootstrap_servers, t, p, lo, hi, opts.include_headers, security,
                            int(opts.read_committed)))
            for t, p, lo, hi in offset_ranges(start, end, earliest)]


# --------------------------------------------------------------------------- reading (executors)


def read_range(value: tuple[str, str, int, int, int, bool, tuple[tuple[str, str], ...], int]
               ) -> Iterator[pa.RecordBatch]:
    """Every record of topic-partition [lo, hi) as Arrow record batches."""
    # Imported here, not with the module: Spark's source process on the driver, which starts
    # with every streaming query, plans offsets and never decodes a record.
    from samsa.protocol.records import scan_batches
    from samsa.spark.arrow import decode_partition

    bootstrap, topic, partition, lo, hi, headers, security, isolation = value
    c = client_for(bootstrap, security, isolation)
    offset = lo
    size = FIRST_FETCH_BYTES
    while offset < hi:
        data, hw, _ = c.fetch((topic, partition), offset, size)
        size = min(size * 4, FETCH_BYTES)
        if not data:
            if hw <= offset:
                raise SamsaSourceError(f"{topic}-{partition} ends at {hw}, before the planned {hi}")
            continue
        batch = decode_partition(data, topic, partition, start_offset=offset, end_offset=hi, include_headers=headers,
                                 aborted=c.aborted if isolation else ())
        whole = scan_batches(data, verify_crc=False, allow_partial_tail=True)
        nxt = whole[-1][1].next_offset if whole else offset
        if batch.num_rows:
            yield batch
            nxt = max(nxt, batch.column("offset")[-1].as_py() + 1)
        if nxt <= offset:
            raise SamsaSourceError(f"{topic}-{partition}: no progress reading from offset {offset}")
        offset = nxt


class SamsaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        tps = current_partitions(opts)
        if not tps:
            raise SamsaSourceError(_no_topic(opts))
        self.start = _resolve(opts, opts.starting_offsets, tps, "startingOffsets")
        self.end = _resolve(opts, opts.ending_offsets, tps, "endingOffsets")
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return _partitions(self.opts, self.start, self.end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition.value)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        if not current_partitions(opts) and opts.subscribe_pattern is None:
            raise SamsaSourceError(_no_topic(opts))
        self.opts = opts
        self.target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        self.last_trigger_ms = int(time.time() * 1000)

    def initialOffset(self) -> dict:
        tps = current_partitions(self.opts)
        return _to_json(_resolve(self.opts, self.opts.starting_offsets, tps, "startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = current_partitions(self.opts)
        self.target = _client(self.opts).list_offsets(tps, LATEST_TIMESTAMP) if tps else {}

    def _latest(self) -> dict[TopicPartition, int]:
        if self.target is not None:
            return dict(self.target)
        tps = current_partitions(self.opts)
        return _client(self.opts).list_offsets(tps, LATEST_TIMESTAMP) if tps else {}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = _from_json(start)
        latest = self._latest()
        now = int(time.time() * 1000)
        if isinstance(limit, ReadMinRows) and self.target is None:
            available = sum(max(0, o - begin.get(tp, 0)) for tp, o in latest.items())
            if available < limit.min_rows and now - self.last_trigger_ms < self.opts.max_trigger_delay_ms:
                return start
        self.last_trigger_ms = now
        if isinstance(limit, ReadMaxRows):
            new = {tp: 0 for tp in latest if tp not in begin}
            if new:
                new = _client(self.opts).list_offsets(list(new), EARLIEST_TIMESTAMP)
            latest = rate_limit(limit.max_rows, begin, latest, new)
        end = {tp: max(o, begin.get(tp, 0)) for tp, o in latest.items()}
        return _to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return _to_json(self._latest())

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return _partitions(self.opts, _from_json(start), _from_json(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition.value)

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint, as with Spark's Kafka source


def _no_topic(opts: SourceOptions) -> str:
    what = (f"subscribe={','.join(opts.subscribe)}" if opts.subscribe else
            f"assign={opts.assign}" if opts.assign else f"subscribePattern={opts.subscribe_pattern}")
    return (f"no topic-partition to read for {what} at kafka.bootstrap.servers={opts.bootstrap_servers}: "
            "create the topic first, or check the option")


class _FailedStreamReader(DataSourceStreamReader):
    """Stands in for a stream reader whose options are wrong: the query fails at its first step."""

    def __init__(self, message: str) -> None:
        self.message = message

    def initialOffset(self) -> dict:
        raise SamsaSourceError(self.message)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        raise SamsaSourceError(self.message)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        raise SamsaSourceError(self.message)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise SamsaSourceError(self.message)
