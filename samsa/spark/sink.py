"""`df.write.format("samsa")` and `df.writeStream.format("samsa")`: Spark's Kafka sink, in Python.

The input columns are Spark's Kafka sink's: `value` (string or binary, required), `key`
(string or binary), `topic` (string; the `topic` option wins over it), `partition` (int) and
`headers` (array<struct<key string, value binary>>). Any other column is refused; fold it
into `value` first (e.g. `to_json(struct(*)) AS value`). A batch write needs
`.mode("append")`: PySpark itself allows Python data sources only append and overwrite, and
overwrite is refused here, as Spark's Kafka sink refuses it (a topic is only appended to).

How it works. On the driver, `writer()` / `streamWriter()` check the columns and options and
that the brokers answer, so a bad query fails when it starts, with a message saying what to
change. Spark pickles the writer (options and column names, no connection) to the executors,
where `write()` receives whole Arrow record batches and, per batch:

1. finds each row's topic (the option, else the column) and partition: the `partition`
   column where not null, else Kafka's default partitioner: murmur2 of the key for keyed
   rows (`encode.py`, vectorised), and for keyless rows one partition per Arrow batch, the
   next in turn (Kafka's sticky partitioner, a batch at a time);
2. groups the rows by topic-partition (one numpy argsort) and keeps them pending;
3. once a few MiB are pending, and at the end, encodes each partition's rows into record
   batches of at most `kafka.batch.size` bytes (`encode.py`; CreateTime = now) and sends
   them with the process's pooled client, one batch per partition per Produce request,
   by leader (`SamsaClient.produce`, acks=all by default).

Delivery is at least once by default, as with Spark's Kafka sink: a retried Produce (leader
moved, connection lost) or a retried Spark task may write records twice. With the option
`transactional.id.prefix` it is exactly once for read_committed consumers: each task writes
inside a transaction of its own, and the driver commits them all with the micro-batch (the
stream writer's `commit`) or aborts them (`abort`); see `txn.py`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from samsa.protocol.errors import ErrorCode
from samsa.spark.client import ClientError, ProduceError, SamsaClient, client_for, security_params
from samsa.spark.encode import RecordError, Records, encode_batches, partition_for_keys
from samsa.spark.options import OptionError, SinkOptions, parse_sink_options
from samsa.spark.txn import Handle, TransactionalProducer, TransactionError, committed_offset, end_transaction

TopicPartition = tuple[str, int]
COLUMNS = ("key", "value", "topic", "partition", "headers")
FLUSH_BYTES = 4 << 20  # pending bytes (all partitions) that trigger sending
REQUEST_BYTES = 16 << 20  # most record bytes in one Produce request
METADATA_ATTEMPTS = 10


class SamsaSinkError(ValueError):
    """A problem the user can fix (an option, a column, a topic, the broker)."""


@dataclass(frozen=True)
class SinkPlan:
    """Everything an executor needs: options and the input's column names by role."""

    opts: SinkOptions
    columns: tuple[tuple[str, str], ...]  # (role, the column's name in the input)

    def column(self, role: str) -> str | None:
        return dict(self.columns).get(role)


@dataclass
class SinkCommit(WriterCommitMessage):
    rows: int
    batches: int
    txn: Handle | None = None  # exactly once: the task's open transaction, for the driver to end


# --------------------------------------------------------------------------- the driver


def plan_sink(options: Any, schema: StructType) -> SinkPlan:
    """Check options, columns and the brokers; SamsaSinkError says what to change."""
    try:
        opts = parse_sink_options(dict(options))
    except OptionError as e:
        raise SamsaSinkError(str(e)) from None
    columns = check_schema(schema, opts.topic)
    _check_brokers(opts)
    return SinkPlan(opts, tuple(sorted(columns.items())))


def check_schema(schema: StructType, topic_option: str | None) -> dict[str, str]:
    """{role: column name} of the input, checked against Spark's Kafka sink rules."""
    found: dict[str, str] = {}
    for field in schema.fields:
        role = field.name.lower()
        if role not in COLUMNS:
            raise SamsaSinkError(
                f"column '{field.name}' is not one the samsa sink writes (key, value, topic, partition,"
                " headers): drop it, or fold it into value, e.g. selectExpr(\"to_json(struct(*)) AS value\")"
            )
        if role in found:
            raise SamsaSinkError(f"columns '{found[role]}' and '{field.name}' both name the record's {role}")
        found[role] = field.name
        kind = field.dataType
        if role in ("key", "value") and not isinstance(kind, (StringType, BinaryType)):
            raise SamsaSinkError(f"{role} attribute type must be a string or binary, got {kind.simpleString()}:"
                                 f" cast it, e.g. CAST({field.name} AS STRING)")
        if role == "topic" and not isinstance(kind, StringType):
            raise SamsaSinkError(f"topic attribute type must be a string, got {kind.simpleString()}")
        if role == "partition" and not isinstance(kind, IntegerType):
            raise SamsaSinkError(f"partition attribute type must be an int, got {kind.simpleString()}:"
                                 f" cast it, e.g. CAST({field.name} AS INT)")
        if role == "headers" and not _is_headers_type(kind):
            raise SamsaSinkError("headers attribute type must be an array<struct<key: string, value: binary>>,"
                                 f" got {kind.simpleString()}")
    if "value" not in found:
        raise SamsaSinkError("Required attribute 'value' not found: the input needs a string or binary column"
                             " named value, e.g. selectExpr(\"CAST(x AS STRING) AS value\")")
    if "topic" not in found and topic_option is None:
        raise SamsaSinkError("topic option required when no 'topic' attribute is present:"
                             " set .option(\"topic\", ...) or add a string column named topic")
    return found


def _is_headers_type(kind: Any) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    fields = kind.elementType.fields
    return (len(fields) == 2 and fields[0].name == "key" and isinstance(fields[0].dataType, StringType)
            and fields[1].name == "value" and isinstance(fields[1].dataType, BinaryType))


def _check_brokers(opts: SinkOptions) -> None:
    topics = [opts.topic] if opts.topic else []
    try:
        client = client_for(opts.bootstrap_servers, security_params(opts.kafka_params))
        known = client.metadata(topics, allow_auto_create=True)
    except ClientError as e:
        raise SamsaSinkError(f"cannot reach Samsa at kafka.bootstrap.servers={opts.bootstrap_servers}: {e}."
                             " Check that the brokers are running and the option lists host:port") from None
    if opts.topic and opts.topic not in known:
        raise SamsaSinkError(_no_topic(opts.topic, opts))


def _no_topic(topic: str, opts: SinkOptions) -> str:
    return (f"topic '{topic}' does not exist at kafka.bootstrap.servers={opts.bootstrap_servers} and the brokers"
            " did not create it: create it first (or set auto.create.topics.enable=true on the brokers)")


# --------------------------------------------------------------------------- the executors


class _Producer:
    """One task's rows, grouped by topic-partition and sent in record batches."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan
        self.opts = plan.opts
        self.client: SamsaClient = client_for(self.opts.bootstrap_servers, security_params(self.opts.kafka_params))
        self.counts: dict[str, int] = {}
        self.turn: dict[str, int] = {}
        self.pending: dict[TopicPartition, list[Records]] = {}
        self.pending_bytes = 0
        self.rows = 0
        self.batches = 0
        self.txn: TransactionalProducer | None = None

    def partition_count(self, topic: str, at_least: int = 0) -> int:
        """The topic's partition count, asked again when it is unknown or below `at_least`."""
        count = self.counts.get(topic, 0)
        if count and count >= at_least:
            return count
        for attempt in range(METADATA_ATTEMPTS):
            try:
                parts = self.client.metadata([topic], allow_auto_create=True).get(topic)
            except ClientError as e:
                raise SamsaSinkError(f"cannot reach Samsa at kafka.bootstrap.servers={self.opts.bootstrap_servers}:"
                                     f" {e}") from None
            if parts is None and attempt > 0:
                break  # the broker neither knows nor creates it
            if parts:  # leaders may be moving: produce() waits for them, the count is what matters here
                self.counts[topic] = len(parts)
                return len(parts)
            time.sleep(0.1 * (attempt + 1))  # being created
        raise SamsaSinkError(_no_topic(topic, self.opts))

    def add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = self.plan.column
        keys = _column(batch, names("key"))
        values = batch.column(names("value") or "value")
        headers = _column(batch, names("headers"))
        topic_of, topics = self._topics(batch, n)
        part = self._partitions(batch, n, keys, topic_of, topics)
        width = int(part.max()) + 1
        group = topic_of.astype(np.int64) * width + part
        if (group == group[0]).all():
            self._keep((topics[int(topic_of[0])], int(part[0])), Records(keys, values, headers))
        else:
            order = np.argsort(group, kind="stable")
            ordered = group[order]
            cuts = np.flatnonzero(np.diff(ordered)) + 1
            for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])):
                rows = pa.array(order[lo:hi])
                g = int(ordered[lo])
                self._keep((topics[g // width], g % width), Records(
                    None if keys is None else keys.take(rows), values.take(rows),
                    None if headers is None else headers.take(rows)))
        self.rows += n
        if self.pending_bytes >= max(FLUSH_BYTES, 2 * self.opts.batch_size):
            self.flush()

    def _topics(self, batch: pa.RecordBatch, n: int) -> tuple[np.ndarray, list[str]]:
        """Each row's topic as an index into the returned list of topic names."""
        if self.opts.topic is not None:
            return np.zeros(n, dtype=np.int32), [self.opts.topic]
        column = batch.column(self.plan.column("topic") or "topic")
        if column.null_count:
            raise SamsaSinkError("Null topic present in the data. Use the topic option for setting a topic"
                                 " (or give every row a topic)")
        coded = pc.dictionary_encode(column)
        topics = [str(t) for t in coded.dictionary.to_pylist()]
        for t in topics:
            if not t:
                raise SamsaSinkError("an empty topic name is present in the data: give every row a topic")
        return coded.indices.to_numpy(zero_copy_only=False).astype(np.int32), topics

    def _partitions(self, batch: pa.RecordBatch, n: int, keys: pa.Array | None, topic_of: np.ndarray,
                    topics: list[str]) -> np.ndarray:
        """Each row's partition: the column's where given, else Kafka's default partitioner."""
        name = self.plan.column("partition")
        if name is None:
            part = np.full(n, -1, dtype=np.int64)
        else:
            part = pc.fill_null(batch.column(name), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        for t, topic in enumerate(topics):
            rows = np.flatnonzero(topic_of == t) if len(topics) > 1 else np.arange(n)
            given = part[rows]
            chosen = given >= 0
            if chosen.any():
                highest = int(given.max())
                count = self.partition_count(topic, highest + 1)
                if highest >= count or (given < -1).any():
                    bad = highest if highest >= count else int(given.min())
                    raise SamsaSinkError(f"partition {bad} of topic '{topic}' does not exist ('{topic}' has"
                                         f" {count} partitions, 0 to {count - 1})")
            if chosen.all():
                continue
            count = self.partition_count(topic)
            free = rows[~chosen]
            if keys is not None and keys.null_count < len(keys):
                keyed = np.asarray(keys.is_valid())[free]
                hashed = free[keyed]
                if len(hashed):
                    part[hashed] = partition_for_keys(keys.take(pa.array(hashed)), count)
                free = free[~keyed]
            if len(free):
                turn = self.turn.get(topic, random.randrange(count))
                part[free] = turn % count
                self.turn[topic] = turn + 1
        return part

    def _keep(self, tp: TopicPartition, records: Records) -> None:
        self.pending.setdefault(tp, []).append(records)
        self.pending_bytes += int(records.estimated_sizes().sum())

    def flush(self) -> None:
        now = int(time.time() * 1000)
        queues: dict[TopicPartition, list[bytes]] = {}
        for tp, parts in self.pending.items():
            queues[tp] = list(encode_batches(Records.concat(parts), max_batch_bytes=self.opts.batch_size,
                                             compression=self.opts.compression, timestamp_ms=now))
        self.pending.clear()
        self.pending_bytes = 0
        while queues:
            request: dict[TopicPartition, bytes] = {}
            size = 0
            for tp in list(queues):
                if request and size + len(queues[tp][0]) > REQUEST_BYTES:
                    break
                batch = queues[tp].pop(0)
                request[tp] = batch
                size += len(batch)
                if not queues[tp]:
                    del queues[tp]
            self._send(request)

    def _send(self, request: dict[TopicPartition, bytes]) -> None:
        opts = self.opts
        try:
            if self.txn is not None:
                self.txn.produce(request, acks=opts.acks, timeout_ms=opts.request_timeout_ms, retries=opts.retries,
                                 backoff_ms=opts.retry_backoff_ms)
            else:
                self.client.produce(request, acks=opts.acks, timeout_ms=opts.request_timeout_ms, retries=opts.retries,
                                    backoff_ms=opts.retry_backoff_ms)
        except ProduceError as e:
            raise SamsaSinkError(_produce_advice(e, opts)) from None
        except ClientError as e:
            raise SamsaSinkError(f"writing to Samsa at kafka.bootstrap.servers={opts.bootstrap_servers} failed: {e}"
                                 " (raise kafka.retries or kafka.request.timeout.ms if the brokers are busy)") from None
        self.batches += len(request)


def _column(batch: pa.RecordBatch, name: str | None) -> pa.Array | None:
    return None if name is None else batch.column(name)


def _produce_advice(e: ProduceError, opts: SinkOptions) -> str:
    if e.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return (f"{e}: a record batch is larger than the topic's max.message.bytes; lower kafka.batch.size"
                f" (now {opts.batch_size}) or raise max.message.bytes (a single record larger than it cannot"
                " be written)")
    if e.code == ErrorCode.INVALID_REQUIRED_ACKS:
        return f"{e}: set kafka.acks to all, 1 or 0"
    return str(e)


def write_batches(plan: SinkPlan, batches: Iterator[pa.RecordBatch]) -> SinkCommit:
    """An executor's part of a write: every row of `batches`, produced (exactly once: inside the
    task's transaction, left open for the driver to commit)."""
    producer = _Producer(plan)
    opts = plan.opts
    ledger: tuple[str, TopicPartition, int] | None = None
    try:
        if opts.transactional_id_prefix is not None:
            task, batch_id = _task()
            txn = TransactionalProducer(producer.client, f"{opts.transactional_id_prefix}-{task}",
                                        opts.transaction_timeout_ms)
            txn.init()  # fences an earlier attempt of this task; its open transaction is aborted
            if batch_id is not None:
                assert opts.topic is not None  # (checked with the options)
                ledger = (f"{opts.transactional_id_prefix}-{task}", (opts.topic, 0), batch_id)
                if committed_offset(producer.client, ledger[0], ledger[1]) > batch_id:
                    return SinkCommit(rows=0, batches=0)  # this task's share was committed before a restart
            producer.txn = txn
        for batch in batches:
            producer.add(batch)
        producer.flush()
        if producer.txn is not None and ledger is not None:
            producer.txn.commit_offsets(ledger[0], {ledger[1]: ledger[2] + 1})
    except RecordError as e:
        raise SamsaSinkError(f"cannot write these rows: {e}") from None
    except TransactionError as e:
        raise SamsaSinkError(f"exactly-once write to kafka.bootstrap.servers={opts.bootstrap_servers} failed: {e}"
                             ) from None
    return SinkCommit(rows=producer.rows, batches=producer.batches,
                      txn=producer.txn.handle if producer.txn is not None else None)


def _task() -> tuple[int, int | None]:
    """(this task's partition id, the streaming micro-batch id, None in a batch write)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return 0, None
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return ctx.partitionId(), (int(batch) if batch is not None else None)


def end_transactions(plan: SinkPlan, messages: list[WriterCommitMessage | None], commit: bool) -> None:
    """The driver's half of exactly once: commit (or abort) every task's transaction."""
    handles = [m.txn for m in messages if isinstance(m, SinkCommit) and m.txn is not None]
    if not handles:
        return
    opts = plan.opts
    client = client_for(opts.bootstrap_servers, security_params(opts.kafka_params))
    for handle in handles:
        try:
            end_transaction(client, handle, commit)
        except (TransactionError, ClientError) as e:
            if commit:
                raise SamsaSinkError(f"committing the micro-batch failed: {e}") from None
            # (an abort that fails leaves the transaction to its timeout or the next attempt's fencing)


class SamsaBatchWriter(DataSourceArrowWriter):
    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.plan, messages, True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        end_transactions(self.plan, messages, False)


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return write_batches(self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # At least once: the records are in the topics already. Exactly once: make them visible.
        end_transactions(self.plan, messages, True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # At least once: what was written stays (a restarted query writes the micro-batch again).
        end_transactions(self.plan, messages, False)


def batch_writer(options: Any, schema: StructType, overwrite: bool) -> SamsaBatchWriter:
    if overwrite:
        raise SamsaSinkError("Save mode overwrite is not allowed for the samsa sink (a topic is only appended to):"
                             " use mode(\"append\")")
    return SamsaBatchWriter(plan_sink(options, schema))


def stream_writer(options: Any, schema: StructType) -> SamsaStreamWriter:
    return SamsaStreamWriter(plan_sink(options, schema))
