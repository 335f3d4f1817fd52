"""docs/compat.md's client sections, written from the client tests' results.

Every row of a table there is a claim that names the tests making it (pytest node ids, with
their parameters). `render` writes the sections between CLIENTS_START and CLIENTS_END from this
registry and the outcomes of the tests that ran in the same pytest session (tests/outcomes.py
records them): ✅ where every named test passed, ❌ where one failed. A cell whose tests did not
run (not selected, or skipped) keeps the mark the doc has, or `?` if new. The versions under test
are read from what is installed (`versions`); one that cannot be read keeps the doc's.

tests/compat/test_clients_doc.py compares the rendering with the doc, and rewrites the doc with
SAMSA_UPDATE_COMPAT_DOC=1 (the variable of test_vs_kafka.py, whose section this leaves alone):

    SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat tests/txn/test_clients.py \\
        tests/groups/test_groups_clients.py tests/cluster/test_kafka_tools_cluster.py \\
        tests/spark/test_kafka_connector.py tests/cluster/test_spark_kafka_connector_cluster.py
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "compat.md"
CLIENTS_START, CLIENTS_END = "<!-- clients:start -->", "<!-- clients:end -->"
PASS, FAIL, UNKNOWN = "✅", "❌", "?"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

CONFLUENT = "tests/compat/test_confluent.py::"
KAFKA_PYTHON = "tests/compat/test_kafka_python.py::"
AIOKAFKA = "tests/compat/test_aiokafka.py::"
KAFKAJS = "tests/compat/test_kafkajs.py::"
KCAT = "tests/compat/test_kcat.py::"
JAVA_TXN = "tests/compat/test_java_client.py::"
JAVA_DATA = "tests/compat/test_java_clients_data.py::"
TOOLS = "tests/compat/test_kafka_tools.py::"
TOOLS_CLUSTER = "tests/cluster/test_kafka_tools_cluster.py::"
PEERS = "tests/compat/test_peer_regressions.py::"
SCRAM = "tests/compat/test_scram_clients.py::test_clients_log_in_with_sasl_and_are_refused_otherwise"
SECURITY = "tests/compat/test_security_clients.py::"
READ_COMMITTED = "tests/compat/test_txn_read_committed.py::"
TXN = "tests/txn/test_clients.py::"
GROUPS = "tests/groups/test_groups_clients.py::"
SPARK = "tests/spark/test_kafka_connector.py::"
SPARK_CLUSTER = "tests/cluster/test_spark_kafka_connector_cluster.py::"


@dataclass(frozen=True)
class Table:
    """Rows of claims: (what, one tuple of node ids per column)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]


@dataclass(frozen=True)
class Section:
    title: str
    before: str
    tables: tuple[Table, ...]
    after: str = ""


def codec_table(test: str, whats: Sequence[str]) -> Table:
    """Claims each made by one test run once per codec (`test[codec]`)."""
    return Table(CODECS, tuple((w, tuple((f"{test}[{c}]",) for c in CODECS)) for w in whats))


def status_table(rows: Sequence[tuple[str, str | Sequence[str]]]) -> Table:
    """Claims with one status each, made by the named tests together."""
    return Table(("status",), tuple((w, ((t,) if isinstance(t, str) else tuple(t),)) for w, t in rows))


def grid(columns: Sequence[str], rows: Sequence[tuple[str, Sequence[str | Sequence[str]]]]) -> Table:
    return Table(tuple(columns), tuple((w, tuple((c,) if isinstance(c, str) else tuple(c) for c in cells))
                                       for w, cells in rows))


# -- the versions under test: read from what is installed (None: not found here) ------------------

def _run(*cmd: str) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout + p.stderr) if p.returncode == 0 else None


def _node() -> str | None:
    out = _run("node", "--version")
    return out.strip().lstrip("v").split(".")[0] if out else None


def _package(path: str) -> dict[str, str] | None:
    try:
        data: dict[str, str] = json.loads((REPO / path / "package.json").read_text())
        return data
    except (OSError, ValueError):
        return None


def _jar_version(directory: str, name: str) -> str | None:
    for jar in sorted((REPO / directory).glob(f"{name}-*.jar")):
        m = re.fullmatch(re.escape(name) + r"-(\d[\w.]*)\.jar", jar.name)
        if m:
            return m.group(1)
    return None


def _jdk() -> str | None:
    out = _run("java", "-version")
    m = re.search(r'version "(\d+)', out or "")
    return m.group(1) if m else None


def _confluent() -> str | None:
    import confluent_kafka

    version = confluent_kafka.version()  # (a (str, int) tuple in some releases)
    version = version if isinstance(version, str) else version[0]
    return f"{version} (librdkafka {confluent_kafka.libversion()[0]})"


def _kafka_python() -> str | None:
    import kafka

    return str(kafka.__version__)


def _aiokafka() -> str | None:
    import aiokafka

    return str(aiokafka.__version__)


def _kafkajs() -> str | None:
    pkg, node = _package("compat/kafkajs/node_modules/kafkajs"), _node()
    return f"{pkg['version']} on node {node}" if pkg and node else None


def _node_rdkafka() -> str | None:
    pkg, node = _package("compat/node-rdkafka/node_modules/node-rdkafka"), _node()
    if not pkg or not node:
        return None
    return f"{pkg['version'].lstrip('v')} (librdkafka {pkg.get('librdkafka', '?')}) on node {node}"


def _kcat() -> str | None:
    m = re.search(r"Version ([\d.]+) .*librdkafka ([\d.]+)", _run("kcat", "-V") or "")
    return f"{m.group(1)} (librdkafka {m.group(2)})" if m else None


def _java_client() -> str | None:
    version, jdk = _jar_version("build/jars/clients", "kafka-clients"), _jdk()
    return f"{version} on JDK {jdk}" if version and jdk else None


def _kafka_tools() -> str | None:
    version, jdk = _jar_version("build/jars/tools", "kafka-tools"), _jdk()
    return f"{version} on JDK {jdk}" if version and jdk else None


def _spark_connector() -> str | None:
    import pyspark

    connector = _jar_version("build/jars/spark-kafka", "spark-sql-kafka-0-10_2.13")
    clients, jdk = _jar_version("build/jars/spark-kafka", "kafka-clients"), _jdk()
    if not (connector and clients and jdk):
        return None
    return f"{connector} (kafka-clients {clients}; PySpark {pyspark.__version__}) on JDK {jdk}"


# (client, how the version is read, how the tests drive it)
OVERVIEW: tuple[tuple[str, Callable[[], str | None], str], ...] = (
    ("confluent-kafka (librdkafka)", _confluent,
     "in-process: `tests/compat/test_confluent.py`, groups `tests/groups/test_groups_clients.py`, transactions "
     "`tests/txn/test_clients.py`, `tests/compat/test_txn_read_committed.py`"),
    ("kafka-python", _kafka_python, "in-process: `tests/compat/test_kafka_python.py` and the same group and "
     "transaction files"),
    ("aiokafka", _aiokafka, "in-process (`asyncio.run`): `tests/compat/test_aiokafka.py`, "
     "`tests/compat/test_security_clients.py`, a group in `tests/groups/test_groups_clients.py`"),
    ("kafkajs", _kafkajs, "`compat/kafkajs/runner.js` and `txn.js`, subprocesses printing JSON: "
     "`tests/compat/test_kafkajs.py`, `tests/compat/test_security_clients.py`, `tests/txn/test_clients.py`"),
    ("node-rdkafka", _node_rdkafka, "`compat/node-rdkafka/txn.js`, a subprocess printing JSON: "
     "`tests/txn/test_clients.py`"),
    ("kcat", _kcat, "subprocess: `tests/compat/test_kcat.py`"),
    ("Kafka's Java client (kafka-clients)", _java_client, "`compat/java/*.java`, a subprocess printing JSON: "
     "`tests/compat/test_java_client.py` (transactions), `tests/compat/test_java_clients_data.py` (the rest)"),
    ("Kafka's command-line tools (kafka-tools)", _kafka_tools, "`java -cp <jars> <MainClass>` subprocesses "
     "(`tests/compat/kafkatools.py`): `tests/compat/test_kafka_tools.py`, `tests/cluster/test_kafka_tools_cluster.py`"),
    ("Spark's Kafka connector (spark-sql-kafka-0-10)", _spark_connector, "the tests' shared SparkSession with its "
     "jars: `tests/spark/test_kafka_connector.py`, `tests/cluster/test_spark_kafka_connector_cluster.py`"),
)


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name, read, _ in OVERVIEW:
        try:
            out[name] = read()
        except (ImportError, OSError, KeyError, AttributeError):
            out[name] = None
    return out


# -- the sections --------------------------------------------------------------------------------

CODEC_NOTE = ("Codec rows: the record batches are also read back raw (`tests/compat/rawwire.py`, a wire "
              "client that shares no code with Samsa) to check which codec the broker stored.")

SECTIONS: tuple[Section, ...] = (
    Section("confluent-kafka", "", (
        codec_table(CONFLUENT + "test_codec_roundtrip_and_list_offsets", (
            "produce with the codec (acks=all, two batches), all delivered at offsets 0..29",
            "read back by assignment from the beginning: keys, values, headers, timestamps, order",
            "codec stored by the broker is what librdkafka sent¹",
            "ListOffsets earliest / latest (AdminClient.list_offsets, get_watermark_offsets)",
            "ListOffsets by timestamp (offsets_for_times, AdminClient for_timestamp)",
        )),
        status_table((
            ("create topic with AdminClient (3 partitions, leaders, no errors); creating again → "
             "TOPIC_ALREADY_EXISTS", CONFLUENT + "test_create_topic_with_admin_client"),
            ("all five codecs interleaved in one partition, read back in order",
             CONFLUENT + "test_all_codecs_interleaved_in_one_partition"),
            ("idempotent producer (`enable.idempotence=true`, 5 in flight, 600 records): delivered once each, in "
             "order, offsets 0..599", CONFLUENT + "test_idempotent_producer_delivers_exactly_once_in_order"),
            ("clean restart: SIGTERM exits 0, all 150 records there after start, the log continues at offset 150",
             CONFLUENT + "test_data_survives_clean_restart"),
            ("kill -9: all 300 acknowledged records (200 acks=all, 100 acks=1) there after start",
             CONFLUENT + "test_acknowledged_data_survives_kill9"),
            ("retention: `log.segment.bytes=2000`, topic `retention.bytes=3000`: old segments deleted, the log start "
             "offset moves up (the first segment file's base offset), latest unchanged; a fetch at 0 is "
             "OFFSET_OUT_OF_RANGE (librdkafka with `auto.offset.reset=error`, and raw); `earliest` resumes at the "
             "log start offset", CONFLUENT + "test_retention_deletes_old_segments"),
        )),
        status_table((
            ("consumer group: three members share six partitions, each of 3,000 records read by exactly one member",
             GROUPS + "test_three_members_share_six_partitions_exactly_once"),
            ("members joining and leaving with the range, roundrobin and cooperative-sticky assignors: every "
             "partition owned, 600 records read once",
             [GROUPS + f"test_members_leaving_and_joining_keep_every_partition_owned[{a}]"
              for a in ("range", "roundrobin", "cooperative-sticky")]),
            ("a kill -9 of the broker, then the group resumes from its committed offsets (classic and KIP-848 "
             "`group.protocol=consumer`)",
             [GROUPS + f"test_restart_resumes_from_committed_offsets[{p}]" for p in ("classic", "consumer")]),
            ("committed offsets survive a clean restart (`committed()`)",
             GROUPS + "test_clean_restart_keeps_offsets_and_committed_api"),
            ("a static member (`group.instance.id`) that leaves and comes back gets its partitions back",
             GROUPS + "test_static_member_gets_its_partitions_back"),
        )),
        status_table((
            ("transactions: commit, abort, commit; read_committed reads the committed records, read_uncommitted "
             "all but the control records", TXN + "test_confluent_commit_abort_and_isolation"),
            ("consume-transform-produce with `send_offsets_to_transaction`: 50 records copied exactly once, the "
             "group's offset committed with them", TXN + "test_confluent_consume_transform_produce"),
            ("read_committed over transactions written with raw requests: aborted and control records skipped, "
             "stops at an open transaction until it commits", READ_COMMITTED + "test_confluent_kafka_read_committed"),
        )),
    ), "¹ librdkafka (every version) compresses LZ4 only if the broker advertises FindCoordinator v0 (its "
       "stand-in for \"broker ≥ 0.8.2\"). Samsa advertises it, so LZ4 is really compressed; the test expects "
       "exactly what librdkafka's rule predicts from Samsa's ApiVersions (`librdkafka_sends` in "
       "`tests/compat/helpers.py`)."),
    Section("kafka-python", "kafka-python compresses snappy, lz4 and zstd through optional packages "
            "(`python-snappy`, `lz4`, `zstandard`), which the `test` extra installs.", (
        codec_table(KAFKA_PYTHON + "test_codec_roundtrip_and_list_offsets", (
            "produce (acks=all, two flushes), offsets 0..29",
            "read back by assignment (`group_id=None`), seek_to_beginning, everything equal and in order",
            "broker stored the codec",
            "beginning_offsets / end_offsets",
            "offsets_for_times",
        )),
        status_table((
            ("create topic with KafkaAdminClient (3 partitions); again → TopicAlreadyExistsError",
             KAFKA_PYTHON + "test_create_topic_with_admin_client"),
            ("consumer group of two members on four partitions with the range, roundrobin and sticky assignors: "
             "400 records each read once, offsets committed",
             [GROUPS + f"test_kafka_python_group[{a}]" for a in ("range", "roundrobin", "sticky")]),
            ("transactions: commit, abort, commit with a group's offsets (`send_offsets_to_transaction`); "
             "read_committed and read_uncommitted readers", TXN + "test_kafka_python_commit_abort_and_offsets"),
            ("read_committed over transactions written with raw requests: aborted and control records skipped, "
             "stops at an open transaction until it commits", READ_COMMITTED + "test_kafka_python_read_committed"),
        )),
    )),
    Section("aiokafka", "aiokafka compresses every codec with `cramjam`, a Samsa dependency.", (
        codec_table(AIOKAFKA + "test_codec_roundtrip_and_list_offsets", (
            "produce (acks=all), offsets 0..29",
            "read back by assignment (`group_id=None`), everything equal and in order",
            "broker stored the codec",
            "beginning_offsets / end_offsets",
            "offsets_for_times",
        )),
        status_table((
            ("create topic with AIOKafkaAdminClient (3 partitions, described); again → TOPIC_ALREADY_EXISTS (36)",
             AIOKAFKA + "test_create_topic_with_admin_client"),
            ("consumer group: 100 records read, offsets committed", GROUPS + "test_aiokafka_group"),
            ("SASL_SSL with PLAIN: produce and read back over TLS", SECURITY + "test_aiokafka_over_sasl_ssl"),
        )),
    )),
    Section("kafkajs", "kafkajs ships none and gzip; the runner registers snappy (`kafkajs-snappy`), LZ4 "
            "(`lz4js`) and ZSTD (`@bokuweb/zstd-wasm`), all pure JS / WASM. Its Consumer works only inside a "
            "group, so the codec checks read with kafkajs's own broker-level Fetch (the same request encoder, "
            "record-batch decoder and codecs its Consumer uses).", (
        codec_table(KAFKAJS + "test_codec_roundtrip_and_list_offsets", (
            "create topic with the admin client (`createTopics`, `waitForLeaders`), metadata",
            "produce (acks=-1, two sends), base offsets 0 and 15",
            "read back with kafkajs's Fetch + decoder, everything equal and in order",
            "broker stored the codec",
            "`fetchTopicOffsets` low / high",
            "`fetchTopicOffsetsByTimestamp`",
        )),
        status_table((
            ("SASL/PLAIN: produce and read back; a wrong password refused",
             SECURITY + "test_kafkajs_over_sasl_plain_and_refused_with_a_wrong_password"),
            ("SASL_SSL with PLAIN (gzip): produce and read back over TLS", SECURITY + "test_kafkajs_over_sasl_ssl"),
            ("transactions (commit, abort, commit; read_committed and read_uncommitted readers) and "
             "consume-transform-produce with `sendOffsets`", TXN + "test_kafkajs_transactions"),
        )),
    )),
    Section("node-rdkafka", "librdkafka from Node, with the librdkafka it bundles; run for transactions only "
            "(`compat/node-rdkafka/txn.js`).", (
        status_table((
            ("transactions: commit, abort, commit; read_committed and read_uncommitted readers; "
             "consume-transform-produce with `sendOffsetsToTransaction`", TXN + "test_node_rdkafka_transactions"),
        )),
    )),
    Section("kcat", "kcat has no admin API (the topic is auto-created by producing) and cannot set per-record "
            "timestamps (look-ups are checked against the timestamps read back).", (
        codec_table(KCAT + "test_codec_roundtrip_and_list_offsets", (
            "produce (`-P -z codec -K : -H h=v`), topic auto-created, `-L` shows it",
            "read back (`-C -o beginning -e -J`, no group): keys, values, headers, order",
            "codec stored is what librdkafka 2.0 sends³",
            "`-Q` earliest (-2), latest (-1), by timestamp, none after the last",
        )),
    ), "³ librdkafka 2.0.x compresses a codec only if the broker's Produce range reaches down to the codec's "
       "oldest Produce version (v0 for gzip, snappy, LZ4). Samsa, like Kafka 4.0, starts at Produce v3, so "
       "Debian's kcat sends gzip, snappy and LZ4 uncompressed; only zstd is compressed (it needs v7). Newer "
       "librdkafka checks the negotiated version instead. Not a Samsa bug; the records land intact."),
    Section("Kafka's Java client (kafka-clients)", "The reference client, and the only one that knows "
            "transaction version 2 (KIP-890 part 2). Its jars come from `scripts/kafka-jars.sh clients`; the "
            "tests compile `compat/java/*.java` once per session and run one scenario per program run. Without a "
            "JDK or the jars they skip, unless `SAMSA_REQUIRE_JAVA` is set (`./test.sh`). Every transaction test "
            "runs with the broker finalizing `transaction.version` 2 (the default) and 1.", (
        grid(("TV2", "TV1"), (
            ("transactional producer (acks=all, idempotent): commit, abort, commit over 2 partitions; read_committed "
             "reads the committed records, read_uncommitted committed + aborted, no control records",
             [JAVA_TXN + f"test_commit_abort_commit_and_isolation_levels[{v}]" for v in ("tv2", "tv1")]),
            ("the version used: EndTxn ×3, AddPartitionsToTxn never (TV2) or each transaction (TV1); the epoch "
             "after each EndTxn: +1 (TV2) or unchanged (TV1), alike at the coordinator, in the client and at the "
             "partition leaders",
             [JAVA_TXN + f"test_the_transaction_version_the_broker_finalizes_is_used[{v}]" for v in ("tv2", "tv1")]),
            ("consume-transform-produce, `sendOffsetsToTransaction(offsets, consumer.groupMetadata())`, classic and "
             "KIP-848 groups: offsets committed, output exactly once",
             [[JAVA_TXN + f"test_consume_transform_produce_with_send_offsets[{v}-{g}]" for g in ("classic", "consumer")]
              for v in ("tv2", "tv1")]),
            ("fencing: a second producer's `initTransactions` aborts the first's open transaction; the first's "
             "commit (and a send before it) fail with ProducerFenced / InvalidProducerEpoch",
             [[JAVA_TXN + f"test_second_producer_fences_the_first[{v}-{s}]" for s in ("commit", "send-then-commit")]
              for v in ("tv2", "tv1")]),
        )),
        codec_table(JAVA_DATA + "test_idempotent_producer_codec_roundtrip_and_offsets_by_time", (
            "idempotent producer (a producer id, the leader holds its last sequence), 30 keyed records with a header "
            "and CreateTime timestamps in two batches, offsets 0..29",
            "read back by assignment: keys, values, headers, timestamps, order",
            "broker stored the codec",
            "`offsetsForTimes`, `beginningOffsets`, `endOffsets`; `Admin.listOffsets` forTimestamp / earliest / "
            "latest / maxTimestamp",
        )),
        status_table((
            ("two members of a group on 4 partitions (a alone, b joins, b leaves), classic with "
             "`CooperativeStickyAssignor` and KIP-848: incremental, commitSync, 120 records read exactly once",
             [JAVA_DATA + f"test_two_members_rebalance_incrementally_without_loss_or_duplicates[{p}]"
              for p in ("classic", "consumer")]),
            ("Admin: describeCluster, createTopics (configs, validateOnly), describeTopics, listTopics, "
             "describeConfigs, incrementalAlterConfigs, createPartitions, deleteRecords, groups and their offsets, "
             "deleteTopics; each failing call raises the exception class Kafka's would",
             JAVA_DATA + "test_admin_topics_configs_partitions_records_groups"),
            ("ApiVersions v5 (KIP-1242): every connection negotiates at once; the client names the cluster and node "
             "it expects", JAVA_DATA + "test_api_versions_v5_names_the_cluster_and_node_and_is_answered_at_once"),
            ("a misrouted connection (another cluster's broker at the address): REBOOTSTRAP_REQUIRED, the producer "
             "rebootstraps and its record never reaches the wrong broker",
             JAVA_DATA + "test_misrouted_connection_is_refused_and_the_client_rebootstraps"),
            ("Fetch v17 by topic id (KIP-516), seen in the broker's request log, alone and through a group's "
             "rebalance over fetch sessions",
             ["tests/compat/test_java_fetch_v17.py::test_the_java_consumer_fetches_at_v17_by_topic_id",
              "tests/compat/test_java_fetch_v17.py::test_a_java_group_rebalances_over_fetch_sessions_by_topic_id"]),
        )),
    )),
    Section("Kafka's command-line tools (kafka-tools)", "The main classes behind `bin/kafka-*.sh`, run from Kafka's "
            "jars (`tests/compat/kafkatools.py`), each checked by its own output and, from outside, by the change "
            "it made. The last four run on a 3-broker ZooKeeper cluster.", (
        status_table((
            ("kafka-topics: `--create` with `--config`, again (Kafka's error, exit 1), `--alter --partitions`, "
             "`--describe` (Kafka's format, the topic id), `--list`, `--delete`",
             TOOLS + "test_topics_create_describe_alter_list_delete"),
            ("kafka-console-producer and kafka-console-consumer: keys, headers, key separators",
             TOOLS + "test_console_producer_and_consumer_keys_and_headers"),
            ("kafka-console-consumer `--group`: offsets committed, a second run reads only what is new",
             TOOLS + "test_console_consumer_group_commits_and_resumes"),
            ("kafka-consumer-groups: `--list`, `--describe` (offsets and lags), `--reset-offsets`, `--delete`",
             TOOLS + "test_consumer_groups_list_describe_reset_delete"),
            ("kafka-configs: topic configs (alter, describe with synonyms, delete; an unknown one refused), broker "
             "and default broker dynamic configs, a static one refused",
             [TOOLS + "test_configs_topic_describe_alter_delete", TOOLS + "test_configs_broker_dynamic"]),
            ("kafka-producer-perf-test and kafka-consumer-perf-test", TOOLS + "test_producer_and_consumer_perf_tests"),
            ("kafka-get-offsets (`--time -1`, `-2`, a timestamp, `-5`) and kafka-delete-records",
             TOOLS + "test_get_offsets_and_delete_records"),
            ("kafka-log-dirs `--describe`: the log dir, each replica's size", TOOLS + "test_log_dirs_describe"),
            ("kafka-reassign-partitions with `log_dirs`: `--execute` moves a replica to another log dir "
             "(AlterReplicaLogDirs, `--replica-alter-log-dirs-throttle`), `--verify` follows it to the end, "
             "kafka-log-dirs shows it there", TOOLS + "test_reassign_partitions_moves_a_replica_between_log_dirs"),
            ("kafka-leader-election `--election-type preferred`", TOOLS_CLUSTER + "test_leader_election_preferred"),
            ("kafka-reassign-partitions `--generate`, `--execute`, `--verify`",
             TOOLS_CLUSTER + "test_reassign_partitions_generate_execute_verify"),
            ("kafka-transactions `list`, `describe`", TOOLS_CLUSTER + "test_transactions_list_and_describe"),
            ("kafka-acls `--add`, `--list`, `--remove` and kafka-configs SCRAM users",
             TOOLS_CLUSTER + "test_acls_and_scram_users"),
        )),
    )),
    Section("Spark's Kafka connector (spark-sql-kafka-0-10)", "`format(\"kafka\")` with Kafka's Java AdminClient, "
            "consumer and producer. Its jars must match PySpark's version exactly: "
            "`scripts/kafka-jars.sh spark-kafka`.", (
        status_table((
            ("batch read with offset bounds: the same rows as Samsa's own source", SPARK
             + "test_batch_read_with_offset_bounds"),
            ("a stream into parquet, restarted from its checkpoint: every offset once",
             SPARK + "test_stream_restarted_from_its_checkpoint_reads_every_offset_once"),
            ("the batch sink: keys, values, headers, partitions",
             SPARK + "test_batch_sink_writes_keys_values_headers_and_partitions"),
            ("the streaming sink, from one topic into another", SPARK + "test_stream_sink_from_one_topic_into_another"),
            ("startingOffsetsByTimestamp, includeHeaders, subscribePattern, minPartitions, every codec",
             SPARK + "test_timestamps_headers_patterns_and_split_ranges"),
            ("read_committed over aborted transactions, batch and streaming",
             SPARK + "test_read_committed_skips_aborted_transactions"),
            ("3 brokers: reads and both sinks through the kill -9 of a partition leader",
             SPARK_CLUSTER + "test_kafka_connector_reads_and_writes_through_a_leader_kill"),
        )),
    )),
    Section("SASL: SCRAM and PLAIN, every client", "One broker with SASL_PLAINTEXT and SASL_SSL listeners offering "
            "SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN. For each client, mechanism and listener: log in, produce 20 "
            "records and read them back; a wrong password and an unknown user are refused.", (
        grid(("SCRAM-SHA-256", "SCRAM-SHA-256 TLS", "SCRAM-SHA-512", "SCRAM-SHA-512 TLS", "PLAIN", "PLAIN TLS"), tuple(
            (what, [f"{SCRAM}[{client}-{m}-{p}]" for m in ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
                    for p in ("SASL_PLAINTEXT", "SASL_SSL")])
            for client, what in (("confluent", "confluent-kafka (refused with Kafka's message)"),
                                 ("kafka-python", "kafka-python²"),
                                 ("aiokafka", "aiokafka (refused: SaslAuthenticationFailed)"),
                                 ("kafkajs", "kafkajs (refused with Kafka's message)"),
                                 ("kcat", "kcat, librdkafka 2.0.2⁴ (refused with Kafka's message)")))),
    ), "² kafka-python 3.0 reads the SASL_AUTHENTICATION_FAILED answer and the close after it in one go and drops "
       "the answer: it reports a disconnection and retries until its bootstrap times out.\n"
       "⁴ librdkafka 2.0 sends its own nonce twice in the client-final message; Kafka accepts a nonce that *ends "
       "with* the server's, and so does Samsa (RFC 5802 asks for the exact nonce)."),
    Section("Peer bugs, as regression tests", "From `shared/bench/README.md`, \"Peer behaviour\".", (
        status_table((
            ("(a) after 1, 1,000 and 3,000 records: AdminClient latest, watermarks, kafka-python `end_offsets` and the "
             "Fetch high watermark all equal the count", PEERS + "test_a_list_offsets_latest_equals_records_produced"),
            ("(b) a parked Fetch is answered < 1 s after a produce",
             PEERS + "test_b_waiting_fetch_returns_when_data_arrives_raw"),
            ("(b) 60 times: a Fetch sent just before a produce is answered < 1 s",
             PEERS + "test_b_fetch_racing_a_produce_is_not_missed"),
            ("(b) confluent consumer with `fetch.wait.max.ms=5000`: produce-to-consume latency < 1 s",
             PEERS + "test_b_consumer_latency_with_long_fetch_wait"),
            ("(c) Fetch partition and response max bytes honoured; a large first batch comes back whole (KIP-74)",
             PEERS + "test_c_fetch_respects_partition_max_bytes"),
            ("(d) ApiVersions v3: no tagged field at its default; v0 lists the same keys",
             PEERS + "test_d_api_versions_v3_has_no_default_tagged_fields"),
            ("(d) ApiVersions v127 → UNSUPPORTED_VERSION in a v0 body (KIP-511)",
             PEERS + "test_d_api_versions_unsupported_version_answers_v0"),
            ("(d) Debian's kcat `-L` works, no \"Read underflow\"", PEERS + "test_d_debian_kcat_connects"),
            ("(e) an idle Fetch is held for its max wait", PEERS + "test_e_idle_fetch_is_held_for_max_wait_raw"),
            ("(e) an idle confluent consumer sends ≤ 4 Fetch/s", PEERS + "test_e_idle_consumer_sends_few_fetches"),
        )),
    )),
)


# -- rendering -----------------------------------------------------------------------------------

def status(ids: Sequence[str], outcomes: Mapping[str, str], kept: str | None) -> str:
    """✅ if every test passed, ❌ if one failed; else (not all ran) the doc's mark, or ?."""
    got = [outcomes.get(i) for i in ids]
    if any(o == "failed" for o in got):
        return FAIL
    if all(o == "passed" for o in got):
        return PASS
    return kept or UNKNOWN


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def doc_cells(block: str) -> dict[tuple[str, int, str, str], str]:
    """The marks and versions in the doc's block: (section, table number, row, column) -> cell."""
    out: dict[tuple[str, int, str, str], str] = {}
    section, table, header = "overview", -1, None
    for line in block.splitlines():
        if line.startswith("### "):
            section, table, header = line[4:].strip(), -1, None
        elif line.startswith("|") and header is None:
            header, table = _cells(line), table + 1
        elif line.startswith("|") and header is not None and not line.startswith("| ---"):
            cells = _cells(line)
            for col, cell in zip(header[1:], cells[1:]):
                out[(section, table, cells[0], col)] = cell
        elif not line.startswith("|"):
            header = None
    return out


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render(outcomes: Mapping[str, str], found_versions: Mapping[str, str | None], doc_block: str) -> str:
    kept = doc_cells(doc_block)
    marks: list[str] = []
    lines = [CLIENTS_START, "", _row(("client", "version under test", "how it is driven")), "| --- | --- | --- |"]
    for name, _, how in OVERVIEW:
        version = found_versions.get(name) or kept.get(("overview", 0, name, "version under test")) or UNKNOWN
        lines.append(_row((name, version, how)))
    body: list[str] = []
    for s in SECTIONS:
        body += [f"### {s.title}", ""]
        if s.before:
            body += [s.before, ""]
        for n, t in enumerate(s.tables):
            body += [_row(("what", *t.columns)), "| --- |" + " --- |" * len(t.columns)]
            for what, per_column in t.rows:
                row = [status(ids, outcomes, kept.get((s.title, n, what, col))) for col, ids in zip(t.columns, per_column)]
                marks += row
                body.append(_row((what, *row)))
            body.append("")
        if s.after:
            body += [s.after, ""]
    summary = (f"{PASS} passes · {FAIL} fails · {UNKNOWN} not run when this was written. In all: "
               f"{marks.count(PASS)} {PASS}, {marks.count(FAIL)} {FAIL}, {marks.count(UNKNOWN)} {UNKNOWN}.")
    lines += ["", summary, "", *body, CLIENTS_END]
    return "\n".join(lines)


def all_test_ids() -> set[str]:
    """Every node id the registry names."""
    ids: set[str] = set()
    for s in SECTIONS:
        for t in s.tables:
            for _, per_column in t.rows:
                for column in per_column:
                    ids.update(column)
    return ids
