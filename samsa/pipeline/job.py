"""The pipeline's processing: a PySpark Structured Streaming job over Samsa topics.

    sensor_readings ──samsa source──► parse + validate ─┬─ store ──► bad: pipeline_dlq (samsa sink)
                                                       │           good: <data>/readings/date=D/batch=N/ (parquet)
                                                       └─ aggregates ──► event-time windows ──► aqi_aggregates,
                                                                         aqi_alerts, <data>/aggregates/date=D/

Two streaming queries share one definition of the parsed stream, each with its own
checkpoint under `<data>/checkpoints/`, so a restarted job resumes exactly where it stopped:

- `store` (every --storage-trigger, 10 s): per micro-batch, records the job cannot use go with
  the reason to the dead-letter topic through the samsa sink (at least once, like any Kafka
  sink), and valid readings into a parquet dataset partitioned by date, written by Spark with
  dynamic partition overwrite of (date, batch): a replayed micro-batch replaces what it wrote,
  so every reading is stored exactly once. (Three queries — Spark's file sink for the
  readings, a separate dead-letter query — read and parsed every record three times; on two
  cores that halved the rate the job kept up with.)
- `aggregates` (every --trigger, 2 s): a two-level aggregation. Spark's stateful step keeps
  one window per (sensor, minute) — counts, sums and maxima, with a watermark on the window's
  end; the micro-batch's updated sensor windows then give, in the driver, every city 1-minute
  window and city and sensor 5-minute sliding window (1-minute slide) they change (`windows.py`: sums and
  counts add up, so the numbers are exactly those of grouping the readings). Output mode is
  update, so a window appears on the dashboard within one trigger and is refined as late
  readings arrive; each micro-batch's windows go to the aggregates topic (keyed, so the latest
  value of a window wins), alerts to the alerts topic, and the batch is stored as
  `aggregates/date=D/batch-<id>.parquet`. A replayed batch (after a crash) rewrites the same
  file, so storage holds every window update exactly once; the `windows` view of `samsa
  pipeline query` keeps each window's latest update. (Giving each reading one row per window —
  seven — and letting Spark group them all cost four times as much.)
  With `--exactly-once` the topics get each micro-batch once too: its window updates and
  alerts go in one Kafka transaction with a ledger of the batch id (see AggregatesWriter).

After every micro-batch of `aggregates` the driver publishes a status record (rows, rates,
end offsets) to `pipeline_status`, which is what the dashboard's lag and health use.

Run it with `samsa pipeline run`, or with spark-submit (the master then comes from spark-submit):

    spark-submit --master spark://host:7077 samsa/pipeline/job.py --bootstrap-server b1:9092,b2:9092
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.pipeline import aqi, contract
from samsa.pipeline.windows import FIELDS, MINUTE, CityWindows, combine
from samsa.spark.home import use_installed_pyspark
from samsa.spark.kafka_jars import ENV, FETCH, ConnectorJarsMissing, connector_jars

log = logging.getLogger("samsa.pipeline.job")

READING_SCHEMA = ("sensor_id STRING, city STRING, lat DOUBLE, lon DOUBLE, ts LONG, pm25 DOUBLE, pm10 DOUBLE, "
                  "no2 DOUBLE, o3 DOUBLE, temperature DOUBLE, _corrupt_record STRING")
REQUIRED = ("sensor_id", "city", "ts", "pm25", "pm10")
# plausible ranges; outside them a reading is a faulty sensor's, not air
LIMITS = {"pm25": (0.0, 1000.0), "pm10": (0.0, 2000.0), "no2": (0.0, 2000.0), "o3": (0.0, 1000.0),
          "temperature": (-90.0, 60.0)}
FUTURE_MS = 5 * 60_000
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# how the readings are read and the dead letters written: Samsa's jar-less Python data source,
# or Spark's own Kafka connector (its jars on spark.jars: samsa/spark/kafka_jars.py)
CONNECTORS = ("samsa", "kafka")
KINDS = (("city_1m", 60_000), ("city_5m", 300_000), ("sensor_1m", 60_000))


@dataclass
class JobConfig:
    bootstrap: str = "127.0.0.1:9092"
    data_dir: Path = Path("samsa-pipeline-data")
    trigger: str = "2 seconds"  # the windows: how fresh the dashboard is
    storage_trigger: str = "10 seconds"  # readings into parquet, dead letters: fewer, larger batches
    watermark: str = "2 minutes"
    alert_aqi: int = aqi.ALERT_THRESHOLD
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    topics: dict[str, str] = field(default_factory=lambda: {
        "readings": contract.READINGS, "dlq": contract.DLQ, "aggregates": contract.AGGREGATES,
        "alerts": contract.ALERTS, "status": contract.STATUS})
    # Kafka client properties for a secured cluster (security.protocol, sasl.*, ssl.*): the
    # samsa source and sink get them as kafka.<name>, the status producer as librdkafka's
    client_props: dict[str, str] = field(default_factory=dict)
    # the aggregates and alerts of a micro-batch in one Kafka transaction, committed once
    exactly_once: bool = False
    # how the readings are read: read_committed skips the aborted transactions of a transactional producer
    isolation_level: str = "read_uncommitted"
    # format("samsa") or format("kafka") for the readings and the dead letters (CONNECTORS)
    connector: str = "samsa"
    # where the kafka connector's jars are (a directory or jar files): None is samsa/spark/kafka_jars.py's default
    connector_jars: str | None = None

    @property
    def transactional_id(self) -> str:
        """The aggregates writer's transactional.id, and its ledger's group: one per aggregates
        topic, so a second job writing the same topic fences the first instead of doubling it."""
        return f"samsa-pipeline-{self.topics['aggregates']}"

    def samsa_options(self) -> dict[str, str]:
        """The samsa (or kafka) data source's and sink's connection options: Spark's Kafka names."""
        return {"kafka.bootstrap.servers": self.bootstrap, **{f"kafka.{k}": v for k, v in self.client_props.items()}}

    @property
    def checkpoints(self) -> Path:
        return self.data_dir / "checkpoints"


# --------------------------------------------------------------------------- the plan


def parsed_stream(spark: Any, cfg: JobConfig) -> Any:
    """The readings topic as rows of the contract's fields plus `reason` (null when valid)."""
    from pyspark.sql import functions as F

    # the two connectors take the same options (Spark's Kafka source's) and give the same schema
    reader = (spark.readStream.format(cfg.connector).options(**cfg.samsa_options())
              .option("subscribe", cfg.topics["readings"]).option("startingOffsets", cfg.starting_offsets)
              .option("failOnDataLoss", "false").option("kafka.isolation.level", cfg.isolation_level))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    try:
        loaded = reader.load()
    except Exception as err:
        if cfg.connector == "kafka" and "DATA_SOURCE_NOT_FOUND" in str(err):  # a session without the jars
            raise ConnectorJarsMissing("this SparkSession has no Kafka connector (spark-sql-kafka-0-10): fetch it "
                                       f"with `{FETCH}` and give its jars to spark.jars (or --jars)") from None
        raise
    raw = loaded.select("key", F.col("value").cast("string").alias("raw"), "topic", "partition", "offset")
    e = F.from_json("raw", READING_SCHEMA, {"columnNameOfCorruptRecord": "_corrupt_record"})
    df = raw.withColumn("e", e)
    # from_json keeps a record it cannot fully parse in _corrupt_record: when no field came
    # out either, the text is not a JSON object at all; otherwise a field has the wrong type
    nothing = F.col("e.sensor_id").isNull() & F.col("e.city").isNull() & F.col("e.ts").isNull()
    corrupt = F.col("e._corrupt_record").isNotNull()
    reason = F.when(F.col("raw").isNull() | F.col("e").isNull() | (corrupt & nothing), F.lit("malformed JSON"))
    reason = reason.when(corrupt, F.lit("a field has the wrong type"))
    for name in REQUIRED:
        reason = reason.when(F.col(f"e.{name}").isNull(), F.lit(f"missing field {name}"))
    for name, (lo, hi) in LIMITS.items():
        col = F.col(f"e.{name}")
        what = "negative" if lo == 0 else "implausible"
        reason = reason.when(col < lo, F.lit(f"{what} {name}")).when(col > hi, F.lit(f"implausible {name}"))
    now_ms = F.unix_millis(F.current_timestamp())
    reason = reason.when(F.col("e.ts") > now_ms + FUTURE_MS, F.lit("timestamp in the future"))
    return df.select("key", "raw", "topic", "partition", "offset", "e.*", reason.alias("reason")).drop(
        "_corrupt_record")


class StoreWriter:
    """foreachBatch of the `store` query: dead letters to their topic, valid readings to parquet.

    The readings go through Spark's parquet writer into `readings/date=D/batch=N/`, with
    dynamic partition overwrite: a micro-batch replayed after a crash replaces exactly the
    partitions it wrote before, so the dataset holds every reading exactly once.
    """

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self.stopping = threading.Event()

    def __call__(self, df: Any, batch_id: int) -> None:
        try:
            self._write(df, batch_id)
        except Exception as e:
            raise _batch_error("store", batch_id, e, self.stopping) from None

    def _write(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        df.persist()
        try:
            bad = df.where("reason IS NOT NULL").select(
                "key", F.to_json(F.struct("reason", "topic", "partition", "offset", "raw")).alias("value"))
            (bad.write.format(self.cfg.connector).mode("append").options(**self.cfg.samsa_options())
             .option("topic", self.cfg.topics["dlq"]).save())
            good = df.where("reason IS NULL").select(
                *contract.READING_FIELDS, F.timestamp_millis("ts").alias("event_time"),
                F.to_date(F.timestamp_millis("ts")).cast("string").alias("date"),
                F.lit(f"{batch_id:010d}").alias("batch"))
            (good.write.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("date", "batch")
             .parquet(str(self.cfg.data_dir / "readings")))
        finally:
            df.unpersist()


def _batch_error(query: str, batch_id: int, e: Exception, stopping: threading.Event) -> RuntimeError:
    """One line for Spark to carry, not a page of Java stack: Spark matches the message of a
    foreachBatch error with a regex that overflows the stack on very long ones."""
    if stopping.is_set():  # the job is stopping: this batch runs again at the next start
        return RuntimeError(f"{query} batch {batch_id} interrupted by the job's stop")
    return RuntimeError(f"{query} batch {batch_id} failed: {str(e).strip().splitlines()[0][:500]}")


def store_query(parsed: Any, cfg: JobConfig, writer: StoreWriter) -> Any:
    return (parsed.writeStream.queryName("store").option("checkpointLocation", str(cfg.checkpoints / "store"))
            .foreachBatch(writer).trigger(processingTime=cfg.storage_trigger).start())


def windowed(parsed: Any, cfg: JobConfig) -> Any:
    """One row per (sensor, minute): the stateful step, with the watermark on the window's end.
    City windows are combined from these (`windows.py`)."""
    from pyspark.sql import functions as F

    good = parsed.where("reason IS NULL").withColumn("window_start", F.col("ts") - F.pmod(F.col("ts"), F.lit(60_000)))
    sums = []
    for f in FIELDS:
        sums += [F.sum(f).alias(f"{f}_sum"), F.count(f).alias(f"{f}_n")]
    return (good.withColumn("window_end_t", F.timestamp_millis(F.col("window_start") + F.lit(60_000)))
            .withWatermark("window_end_t", cfg.watermark)
            .groupBy("sensor_id", "window_end_t", "window_start", "city")
            .agg(F.count("*").alias("count"), *sums, F.max("pm25").alias("pm25_max"), F.max("pm10").alias("pm10_max"),
                 F.first("lat").alias("lat"), F.first("lon").alias("lon"), F.max("ts").alias("last_event_ts")))


# --------------------------------------------------------------------------- per micro-batch


class AggregatesWriter:
    """foreachBatch of the `aggregates` query: topics and one parquet file per batch.

    At least once by default: a micro-batch replayed after a crash sends its windows again
    (keyed, so a reader of the latest value per key sees no difference). With
    `exactly_once`, a micro-batch's aggregates and alerts go in one Kafka transaction with a
    ledger: the group `cfg.transactional_id` commits `batch id + 1` on the aggregates topic's
    partition 0 in the same transaction (TxnOffsetCommit). A replayed micro-batch whose
    transaction was committed before the crash finds its id below the ledger's offset and
    sends nothing again; read_committed readers see every micro-batch once, whole. A zombie
    (the job before a restart, still running) is fenced by the new job's InitProducerId.
    """

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self._producer: Any = None
        self._txn: Any = None  # (transactional producer, ledger consumer) with exactly_once
        self.windows_written = 0
        self.alerts_sent = 0
        self.batches_skipped = 0  # replayed micro-batches whose transaction had been committed
        self.stopping = threading.Event()
        self.cities: CityWindows | None = None  # filled from storage at the first batch

    def _librdkafka(self, **extra: Any) -> dict[str, Any]:
        from samsa.protocol.client_security import librdkafka_config

        return {**librdkafka_config(self.cfg.client_props), "bootstrap.servers": self.cfg.bootstrap, **extra}

    def producer(self) -> Any:
        """The idempotent producer: windows (at least once) and the job's status records."""
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer(self._librdkafka(**{"linger.ms": 5, "acks": "all", "enable.idempotence": True,
                                                          "client.id": "samsa-pipeline"}))
        return self._producer

    def transactional(self) -> tuple[Any, Any]:
        """The transactional producer (initialised: any earlier one of the id is fenced, its
        open transaction aborted) and the ledger's consumer (read_committed, so the committed
        offset it reads waits out an undecided transaction)."""
        if self._txn is None:
            from confluent_kafka import Consumer, Producer

            tid = self.cfg.transactional_id
            p = Producer(self._librdkafka(**{"linger.ms": 5, "transactional.id": tid,
                                             "client.id": "samsa-pipeline-txn"}))
            p.init_transactions(60)
            ledger = Consumer(self._librdkafka(**{"group.id": tid, "enable.auto.commit": False,
                                                  "isolation.level": "read_committed",
                                                  "client.id": "samsa-pipeline-ledger"}))
            self._txn = (p, ledger)
        return self._txn

    def __call__(self, df: Any, batch_id: int) -> None:
        try:
            self._write(df, batch_id)
        except Exception as e:
            raise _batch_error("aggregates", batch_id, e, self.stopping) from None

    def _write(self, df: Any, batch_id: int) -> None:
        table = df.toArrow()
        if table.num_rows == 0:
            return
        if self.cities is None:
            self.cities = CityWindows()
            self.cities.load(self._stored_sensor_windows())
        sensors = table.drop_columns(["window_end_t"]).to_pylist()
        for w in sensors:
            w.update(combine([w]), kind="sensor_1m", key=w["sensor_id"], window_end=w["window_start"] + MINUTE)
        rows = sensors + self.cities.update(sensors)
        for r in rows:
            r["aqi"] = aqi.aqi(r["pm25_avg"], r["pm10_avg"])
            r["category"] = aqi.category(r["aqi"])
            r["batch_id"] = batch_id
        self._store(rows, batch_id)
        if self.cfg.exactly_once:
            alerts = self._send_in_transaction(rows, batch_id)
            if alerts is None:
                return
        else:
            p = self.producer()
            alerts = self._send(p, rows)
            left = p.flush(30)
            if left:
                raise RuntimeError(f"{left} aggregate records not acknowledged by {self.cfg.bootstrap} within 30 s")
        self.windows_written += len(rows)
        self.alerts_sent += alerts

    def _send(self, p: Any, rows: list[dict[str, Any]]) -> int:
        """Produce the windows and their alerts; the number of alerts."""
        alerts = 0
        for r in rows:
            p.produce(self.cfg.topics["aggregates"], key=f"{r['kind']}:{r['key']}", value=json.dumps(
                {k: r[k] for k in ("kind", "city", "sensor_id", "window_start", "window_end", "count", "pm25_avg",
                                   "pm25_max", "pm10_avg", "pm10_max", "no2_avg", "o3_avg", "temperature_avg", "aqi",
                                   "category", "lat", "lon", "last_event_ts")}))
            if r["kind"] == "city_1m" and r["aqi"] >= self.cfg.alert_aqi:
                alerts += 1
                p.produce(self.cfg.topics["alerts"], key=r["city"], value=json.dumps(
                    {"city": r["city"], "window_start": r["window_start"], "window_end": r["window_end"],
                     "aqi": r["aqi"], "category": r["category"], "threshold": self.cfg.alert_aqi,
                     "pm25_avg": r["pm25_avg"]}))
            p.poll(0)
        return alerts

    def _send_in_transaction(self, rows: list[dict[str, Any]], batch_id: int) -> int | None:
        """The micro-batch in one transaction with its ledger entry; None when the ledger says
        this micro-batch was committed already (a replay after a crash)."""
        from confluent_kafka import KafkaException, TopicPartition

        p, ledger = self.transactional()
        mark = TopicPartition(self.cfg.topics["aggregates"], 0)
        try:
            done = ledger.committed([mark], timeout=60)[0].offset
            if done > batch_id:
                self.batches_skipped += 1
                log.info("aggregates batch %d was committed before a restart: not sent again", batch_id)
                return None
            p.begin_transaction()
            alerts = self._send(p, rows)
            p.send_offsets_to_transaction([TopicPartition(mark.topic, 0, batch_id + 1)],
                                          ledger.consumer_group_metadata(), 60)
            p.commit_transaction(60)
            return alerts
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                with contextlib.suppress(KafkaException):
                    p.abort_transaction(60)  # nothing of this batch becomes visible; the query fails
            if err.fatal():  # fenced by a newer job with the same aggregates topic, or broken
                self._close_transactional()
            raise

    def _close_transactional(self) -> None:
        if self._txn is not None:
            p, ledger = self._txn
            self._txn = None
            with contextlib.suppress(Exception):
                ledger.close()
            with contextlib.suppress(Exception):
                p.flush(5)

    def _stored_sensor_windows(self) -> list[dict[str, Any]]:
        """The sensor windows of the last two stored days, oldest batch first (after a restart)."""
        import pyarrow.parquet as pq

        days = sorted((self.cfg.data_dir / "aggregates").glob("date=*"))[-2:]
        files = sorted((f for d in days for f in d.glob("batch-*.parquet")), key=lambda f: f.name)
        out: list[dict[str, Any]] = []
        for f in files:
            out += pq.read_table(f, filters=[("kind", "=", "sensor_1m")]).to_pylist()
        return out

    def _store(self, rows: list[dict[str, Any]], batch_id: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        by_date: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            day = time.strftime("%Y-%m-%d", time.gmtime(r["window_start"] / 1000))
            by_date.setdefault(day, []).append(r)
        for day, part in by_date.items():
            folder = self.cfg.data_dir / "aggregates" / f"date={day}"
            folder.mkdir(parents=True, exist_ok=True)
            final = folder / f"batch-{batch_id:010d}.parquet"
            tmp = folder / f".batch-{batch_id:010d}.parquet.tmp"
            pq.write_table(pa.Table.from_pylist(part), tmp)
            os.replace(tmp, final)  # a replayed batch replaces its own file: exactly once

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
        self._close_transactional()


def aggregates_query(parsed: Any, cfg: JobConfig, writer: AggregatesWriter) -> Any:
    return (windowed(parsed, cfg).writeStream.queryName("aggregates").outputMode("update")
            .option("checkpointLocation", str(cfg.checkpoints / "aggregates"))
            .foreachBatch(writer).trigger(processingTime=cfg.trigger).start())


# --------------------------------------------------------------------------- the job


class PipelineJob:
    """The three queries, started and stopped together, and the status they publish."""

    def __init__(self, spark: Any, cfg: JobConfig) -> None:
        self.spark = spark
        self.cfg = cfg
        self.writer = AggregatesWriter(cfg)
        self.store = StoreWriter(cfg)
        self.queries: list[Any] = []
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self.last_status: dict[str, Any] | None = None

    def start(self) -> PipelineJob:
        self.cfg.data_dir.mkdir(parents=True, exist_ok=True)
        parsed = parsed_stream(self.spark, self.cfg)
        self.queries = [aggregates_query(parsed, self.cfg, self.writer), store_query(parsed, self.cfg, self.store)]
        self._monitor = threading.Thread(target=self._publish_status, name="pipeline-status", daemon=True)
        self._monitor.start()
        return self

    def failed(self) -> str | None:
        """The first query's error, if one stopped with one."""
        for q in self.queries:
            if not q.isActive and q.exception() is not None:
                return f"query {q.name} failed: {str(q.exception()).splitlines()[0]}"
        return None

    def consumed(self) -> dict[str, int]:
        """How many records of the readings topic each query has finished (its end offsets' sum)."""
        topic = self.cfg.topics["readings"]
        return {q.name: sum(_end_offsets(q.lastProgress).get(topic, {}).values()) for q in self.queries}

    def _publish_status(self) -> None:
        seen = -1
        agg = self.queries[0]
        while not self._stop.wait(0.5):
            try:
                progress = agg.lastProgress
            except Exception:  # the query is stopping
                return
            if not progress or progress["batchId"] == seen:
                continue
            seen = progress["batchId"]
            end = _end_offsets(progress)
            status = {"ts": int(time.time() * 1000), "batch_id": seen, "input_rows": progress["numInputRows"],
                      "input_rows_per_second": progress.get("inputRowsPerSecond") or 0.0,
                      "processed_rows_per_second": progress.get("processedRowsPerSecond") or 0.0,
                      "duration_ms": progress.get("durationMs", {}).get("triggerExecution", 0),
                      "end_offsets": end, "windows_written": self.writer.windows_written,
                      "alerts_sent": self.writer.alerts_sent}
            self.last_status = status
            try:
                p = self.writer.producer()
                p.produce(self.cfg.topics["status"], key="job", value=json.dumps(status))
                p.poll(0)
            except Exception as e:  # the broker is away: the next batch tries again
                log.warning("cannot publish pipeline status: %s", e)

    def stop(self, grace: float = 10.0) -> None:
        """Stop the queries, each between two micro-batches when one ends within `grace` s."""
        self._stop.set()
        self.writer.stopping.set()
        self.store.stopping.set()
        deadline = time.monotonic() + grace
        for q in self.queries:
            try:
                while q.isActive and q.status.get("isTriggerActive") and time.monotonic() < deadline:
                    time.sleep(0.05)
                q.stop()
            except Exception as e:  # already failed: its error was reported
                log.debug("stopping %s: %s", q.name, e)
        if self._monitor is not None:
            self._monitor.join(5)
        self.writer.close()


LOG4J2 = """\
# Spark's own log for the pipeline job: into a file, so the terminal keeps the job's status
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def _end_offsets(progress: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """{topic: {partition: offset}} where a query's last micro-batch ended (Spark's Kafka JSON)."""
    end: dict[str, dict[str, int]] = {}
    for source in (progress or {}).get("sources", []):
        try:
            end.update(json.loads(source.get("endOffset") or "{}"))
        except ValueError:  # a source whose offsets are not JSON: not ours
            continue
    return end


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Point this process's stdout and stderr (file descriptors 1 and 2) at `path` meanwhile."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def session_jars(cfg: JobConfig) -> list[str]:
    """The jars the job's SparkSession needs on spark.jars: none for the samsa connector; Spark's
    Kafka connector for `kafka` (ConnectorJarsMissing says how to get it), except under
    spark-submit, whose --jars or --packages bring it."""
    if cfg.connector != "kafka" or "PYSPARK_GATEWAY_PORT" in os.environ:
        return []
    return connector_jars(cfg.connector_jars)


def spark_session(master: str | None, app: str = "samsa-pipeline", ui: bool = False,
                  log_file: Path | None = None, jars: list[str] | None = None) -> Any:
    """A SparkSession for the job: local[2] unless spark-submit or --master says otherwise.
    `jars` go on spark.jars (Spark's Kafka connector: `session_jars`).
    With `log_file`, Spark's log goes there instead of the terminal (when this call starts the JVM),
    and so does whatever the JVM and its Python workers print: a worker killed with its task at
    shutdown prints a traceback that is Spark's business, not the user's."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    use_installed_pyspark(master or "local[2]")  # does nothing under spark-submit
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        builder = builder.master("local[2]")
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        config = log_file.with_name("spark-log4j2.properties")
        config.write_text(LOG4J2.format(path=log_file.resolve()))
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{config.resolve()}")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    builder = (builder.config("spark.ui.enabled", str(ui).lower()).config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC"))
    if log_file is not None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        with _output_to(log_file):  # the JVM, and the workers it forks, inherit these
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if log_file is not None else "ERROR")
    return spark


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="Samsa brokers, host:port[,host:port]")
    ap.add_argument("--data-dir", default="samsa-pipeline-data", help="where parquet data and checkpoints go")
    ap.add_argument("--master", default=None, help="Spark master (default local[2]; spark-submit sets its own)")
    ap.add_argument("--trigger", default="2 seconds", help="micro-batch interval of the windows (default: 2 seconds)")
    ap.add_argument("--storage-trigger", default="10 seconds",
                    help="micro-batch interval of the readings' parquet and the dead letters (default: 10 seconds)")
    ap.add_argument("--watermark", default="2 minutes", help="how late a reading may arrive (default: 2 minutes)")
    ap.add_argument("--alert-aqi", type=int, default=aqi.ALERT_THRESHOLD,
                    help=f"AQI at which a city window raises an alert (default: {aqi.ALERT_THRESHOLD})")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None, help="cap on records per micro-batch")
    ap.add_argument("--starting-offsets", default="earliest", choices=("earliest", "latest"),
                    help="where a new job starts reading (a restarted job resumes from its checkpoint)")
    ap.add_argument("--spark-ui", action="store_true", help="serve Spark's web UI")
    ap.add_argument("--command-config", metavar="FILE",
                    help="Kafka client properties for a secured cluster (security.protocol, sasl.*, ssl.*)")
    ap.add_argument("--exactly-once", action="store_true",
                    help="write each micro-batch's aggregates and alerts in one Kafka transaction, so that a "
                         "restarted job does not send a window update twice (read them with read_committed)")
    ap.add_argument("--connector", default="samsa", choices=CONNECTORS,
                    help="how Spark reads the readings and writes the dead letters: samsa, Samsa's jar-less Python "
                         "data source (default), or kafka, Spark's own Kafka connector (its jars: "
                         "`bash scripts/kafka-jars.sh spark-kafka`, or --connector-jars)")
    ap.add_argument("--connector-jars", metavar="PATH", default=None,
                    help="with --connector kafka: a directory of the connector's jars, or a comma-separated list "
                         f"of jar files (default: ${ENV}, else build/jars/spark-kafka of this checkout)")
    ap.add_argument("--isolation-level", default=None, choices=ISOLATION_LEVELS,
                    help="how the readings topic is read: read_committed skips aborted transactions (default: "
                         "isolation.level of --command-config, else read_uncommitted as Spark's Kafka source)")


def config_from(args: argparse.Namespace) -> JobConfig:
    props = client_properties(args.command_config)
    # a consumer's key: it is the reader's, not the producers' or the dead-letter sink's
    isolation = props.pop("isolation.level", "read_uncommitted").strip()
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation.level must be read_uncommitted or read_committed, not {isolation!r}")
    return JobConfig(bootstrap=args.bootstrap_server, data_dir=Path(args.data_dir), trigger=args.trigger,
                     storage_trigger=args.storage_trigger,
                     watermark=args.watermark, alert_aqi=args.alert_aqi, starting_offsets=args.starting_offsets,
                     max_offsets_per_trigger=args.max_offsets_per_trigger,
                     client_props=props, exactly_once=args.exactly_once,
                     isolation_level=args.isolation_level or isolation, connector=args.connector,
                     connector_jars=args.connector_jars)


def client_properties(path: str | None) -> dict[str, str]:
    """A --command-config file's properties, checked (ValueError says what is wrong)."""
    if not path:
        return {}
    from samsa.config import ConfigError, load_properties
    from samsa.protocol.client_security import ClientSecurity

    try:
        props = load_properties(path)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    ClientSecurity.from_properties(props)
    return props


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point (`samsa pipeline run` is the same with nicer output)."""
    ap = argparse.ArgumentParser(prog="samsa-pipeline-job", description=__doc__.splitlines()[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = config_from(args)
    try:
        jars = session_jars(cfg)
    except ConnectorJarsMissing as e:
        print(e, file=sys.stderr)
        return 1
    job = PipelineJob(spark_session(args.master, ui=args.spark_ui, jars=jars), cfg).start()
    try:
        job.spark.streams.awaitAnyTermination()
    except KeyboardInterrupt:
        pass
    finally:
        job.stop()
    problem = job.failed()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
