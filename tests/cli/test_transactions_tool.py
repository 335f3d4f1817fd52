"""`samsa transactions` end to end: kafka-transactions.sh's commands, tables and error texts against
a real broker, its transactions driven with raw requests; and the pure half (tables, the hanging
decision) as tables.

describe-producers, find-hanging and abort need DescribeProducers (61) and WriteTxnMarkers (27),
the log side of issue 18: their tests run when the broker advertises both (`needs_log_side`) and
are skipped until then; one test checks the tool's answer to a broker without them instead.

Hanging transactions are made as they arise without KIP-890's verification (the broker runs with
`transaction.partition.verification.enable=false`): a transactional batch whose producer no
coordinator knows, or written to a partition its transaction never added. Their batches carry a
timestamp 20 minutes old, so the default --max-transaction-timeout (15 min) finds them without
waiting.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli.txn_tables import (
    DESCRIBE_HEADERS,
    HANGING_HEADERS,
    LIST_HEADERS,
    PRODUCERS_HEADERS,
    ProducerState,
    TxnDescription,
    hanging_row,
    hanging_transactions,
    open_transactions,
    pretty_table,
)
from samsa.protocol.records import build_batch
from tests.broker.test_acls import acl_broker, sasl_raw
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess, free_port
from tests.cli.helpers import ok, one_line_error, samsa
from tests.rawclient import RawClient
from tests.txn.txnclient import add_partitions, describe_txn, init_txn

MINUTE_MS = 60_000


# --- the pure half ------------------------------------------------------------------------------
def test_pretty_table_is_kafkas_padded_and_tab_terminated() -> None:
    assert pretty_table(("A", "Long"), [["xyz", "1"], ["", "22"]]) == "A  \tLong\t\nxyz\t1   \t\n   \t22  \t\n"
    assert pretty_table(("A", "B"), []) == "A\tB\t\n"


def _p(pid: int, start: int, last_ts: int, epoch: int = 0) -> ProducerState:
    return ProducerState(pid, epoch, 0, last_ts, -1, start)


def test_candidates_are_open_transactions_idle_longer_than_the_max_timeout() -> None:
    now = 100 * MINUTE_MS
    producers = {("t", 0): [_p(1, 5, now - 16 * MINUTE_MS), _p(2, -1, 0), _p(3, 7, now - 15 * MINUTE_MS)],
                 ("t", 1): [_p(4, 0, now - 15 * MINUTE_MS - 1)]}
    got = open_transactions(producers, now, 15 * MINUTE_MS)
    assert [(tp, p.producer_id) for tp, p in got] == [(("t", 0), 1), (("t", 1), 4)]


def _d(tid: str, *tps: tuple[str, int], state: str = "Ongoing") -> TxnDescription:
    return TxnDescription(0, tid, state, 1, 0, 60000, 1, frozenset(tps))


@pytest.mark.parametrize(("tids", "descriptions", "hanging"), [
    ({}, {}, True),                                                  # no transactional id has this producer
    ({1: "a"}, {"a": None}, True),                                   # listed, then not found at its coordinator
    ({1: "a"}, {"a": _d("a", ("t", 1))}, True),                      # its transaction does not hold the partition
    ({1: "a"}, {"a": _d("a", ("t", 0), ("t", 1))}, False),           # the coordinator will write the marker
    ({1: "a"}, {"a": _d("a", ("t", 0), state="PrepareAbort")}, False),  # ... is writing it now
    ({2: "a"}, {"a": _d("a", ("t", 0))}, True),                      # the id belongs to another producer
])
def test_hanging_decision(tids: dict[int, str], descriptions: dict[str, TxnDescription | None],
                          hanging: bool) -> None:
    candidate = (("t", 0), _p(1, 5, 0))
    assert hanging_transactions([candidate], tids, descriptions) == ([candidate] if hanging else [])


def test_hanging_row_gives_whole_minutes() -> None:
    row = hanging_row((("t", 3), ProducerState(9, 2, 4, 1000, -1, 42)), 1000 + 20 * MINUTE_MS - 1)
    assert row == ["t", "3", "9", "2", "-1", "42", "1000", "19"]


# --- against a broker -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-tool"), {"transaction.partition.verification.enable": "false"})
    b.start()
    yield b
    b.close()


def txn(b: BrokerProcess, *args: str, config: str | None = None) -> tuple[int, str, str]:
    extra = ("--command-config", config) if config else ()
    p = samsa("transactions", "--bootstrap-server", b.bootstrap, *extra, *args)
    return p.returncode, p.stdout, p.stderr


def table(out: str, headers: tuple[str, ...]) -> list[list[str]]:
    """The rows of a Kafka table, after checking its header and that every cell ends in a tab."""
    lines = out.splitlines()
    assert lines and [c.strip() for c in lines[0].split("\t")] == [*headers, ""], out
    rows = []
    for line in lines[1:]:
        cells = line.split("\t")
        assert len(cells) == len(headers) + 1 and cells[-1] == "", out
        rows.append([c.strip() for c in cells[:-1]])
    return rows


def has_apis(b: BrokerProcess, *keys: int) -> bool:
    with RawClient(b.bootstrap) as c:
        versions = {k.api_key for k in c.request(18, 3, {"client_software_name": "t",
                                                         "client_software_version": "1"}).api_keys}
    return all(k in versions for k in keys)


def needs_log_side(b: BrokerProcess) -> None:
    assert has_apis(b, 61, 27), "the broker must serve DescribeProducers (61) and WriteTxnMarkers (27)"


def produce_txn(c: RawClient, tid: str, topic: str, partition: int, pid: int, epoch: int, seq: int,
                age_ms: int = 0) -> int:
    """A transactional batch (Produce v11, so no implicit add-partition) `age_ms` old; its base offset."""
    ts = int(time.time() * 1000) - age_ms
    records = build_batch([(None, b"v", [], ts)], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                          transactional=True)
    resp = c.request(0, 11, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(records)}]}]})
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return int(part.base_offset)


def test_list_shows_each_coordinators_transactions(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        empty = init_txn(c, "tool-list-empty")
        ongoing = init_txn(c, "tool-list-ongoing")
        assert add_partitions(c, "tool-list-ongoing", ongoing.producer_id, ongoing.producer_epoch,
                              {topic_name: [0]}) == {(topic_name, 0): 0}
    rc, out, err = txn(broker, "list")
    assert rc == 0, err
    rows = {r[0]: r for r in table(out, LIST_HEADERS)}
    assert rows["tool-list-empty"] == ["tool-list-empty", "0", str(empty.producer_id), "Empty"]
    assert rows["tool-list-ongoing"] == ["tool-list-ongoing", "0", str(ongoing.producer_id), "Ongoing"]
    # --duration-filter: only transactions open longer than that
    rc, out, err = txn(broker, "list", "--duration-filter", str(3_600_000))
    assert rc == 0, err
    assert not {"tool-list-empty", "tool-list-ongoing"} & {r[0] for r in table(out, LIST_HEADERS)}


def test_describe_empty_and_ongoing(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, partitions=2)
        empty = init_txn(c, "tool-desc-empty", timeout_ms=45000)
        ongoing = init_txn(c, "tool-desc-ongoing")
        add_partitions(c, "tool-desc-ongoing", ongoing.producer_id, ongoing.producer_epoch, {topic_name: [1, 0]})
        started = describe_txn(c, "tool-desc-ongoing").transaction_start_time
    rc, out, err = txn(broker, "describe", "--transactional-id", "tool-desc-empty")
    assert rc == 0, err
    assert table(out, DESCRIBE_HEADERS) == [["0", "tool-desc-empty", str(empty.producer_id), "0", "Empty", "45000",
                                             "None", "None", ""]]
    before = int(time.time() * 1000)
    rc, out, err = txn(broker, "describe", "--transactional-id", "tool-desc-ongoing")
    after = int(time.time() * 1000)
    assert rc == 0, err
    [row] = table(out, DESCRIBE_HEADERS)
    assert row[:7] == ["0", "tool-desc-ongoing", str(ongoing.producer_id), "0", "Ongoing", "60000", str(started)]
    assert before - started <= int(row[7]) <= after - started  # TransactionDurationMs: now - start
    assert row[8] == f"{topic_name}-0,{topic_name}-1"


def test_describe_of_an_unknown_id_is_kafkas_error(broker: BrokerProcess) -> None:
    line = one_line_error(txn(broker, "describe", "--transactional-id", "tool-nobody")[::2])
    assert line == ("samsa transactions: error: Failed to describe transaction state of transactional-id "
                    "`tool-nobody`: DescribeTransactions request for transactionalId `tool-nobody` failed because "
                    "the ID could not be found.")


def test_base_flags_may_follow_the_command(broker: BrokerProcess) -> None:
    out = ok(samsa("transactions", "list", "--bootstrap-server", broker.bootstrap))
    table(out, LIST_HEADERS)


def test_help_names_every_command() -> None:
    out = ok(samsa("transactions", "--help"))
    for command in ("list", "describe", "describe-producers", "find-hanging", "abort"):
        assert command in out
    assert "transactions" in ok(samsa("--help"))
    assert "--start-offset" in ok(samsa("transactions", "abort", "--help"))


@pytest.mark.parametrize(("args", "code", "message"), [
    (["list"], 2, "samsa transactions: error: the following arguments are required: --bootstrap-server (see --help)"),
    (["--bootstrap-server", "{b}"], 2, "a command is required: list, describe, describe-producers, find-hanging, abort"),
    (["--bootstrap-server", "{b}", "describe"], 2, "the following arguments are required: --transactional-id"),
    (["--bootstrap-server", "{b}", "describe-producers", "--topic", "t", "--partition", "x"], 2,
     "argument --partition: invalid integer value: 'x'"),
    (["--bootstrap-server", "{b}", "abort", "--topic", "t", "--partition", "0", "--producer-id", "1",
      "--producer-epoch", "40000", "--coordinator-epoch", "0"], 2, "argument --producer-epoch: 40000 is out of range"),
    (["--bootstrap-server", "{b}", "nonsense"], 2, "invalid choice: 'nonsense'"),
    (["--bootstrap-server", "{b}", "abort", "--topic", "t", "--partition", "0"], 1,
     "samsa transactions: error: The transaction to abort must be identified either with --start-offset (for "
     "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)"),
    (["--bootstrap-server", "{b}", "abort", "--topic", "t", "--partition", "0", "--producer-id", "5"], 1,
     "samsa transactions: error: Missing required argument --producer-epoch"),
    (["--bootstrap-server", "{b}", "abort", "--topic", "t", "--partition", "0", "--producer-id", "5",
      "--producer-epoch", "1"], 1, "samsa transactions: error: Missing required argument --coordinator-epoch"),
    (["--bootstrap-server", "{b}", "find-hanging"], 1, "samsa transactions: error: The `find-hanging` command "
     "requires either --topic or --broker-id to limit the scope of the search"),
    (["--bootstrap-server", "{b}", "find-hanging", "--broker-id", "0", "--partition", "0"], 1,
     "samsa transactions: error: The --partition argument requires --topic to be provided"),
    (["--bootstrap-server", "nohost", "list"], 2, "samsa transactions: error: Invalid url in bootstrap.servers: nohost"),
    (["--bootstrap-server", "{b}", "--command-config", "/nonexistent/x.properties", "list"], 1,
     "cannot read properties file /nonexistent/x.properties"),
    (["--bootstrap-server", "{b}", "list"], 1, "Connection refused"),
])
def test_bad_arguments_are_one_line_without_a_broker(args: list[str], code: int, message: str) -> None:
    # Nothing listens on {b}: every mistake here is found before the tool connects, or is the
    # connection failure itself.
    unused = f"127.0.0.1:{free_port()}"
    line = one_line_error(samsa("transactions", *[a.replace("{b}", unused) for a in args]), codes=(code,))
    assert message in line, line


def test_command_config_carries_sasl_and_authorization_applies(tmp_path: Path) -> None:
    b = acl_broker(tmp_path).start()
    try:
        with sasl_raw(b, "admin") as c:
            r = init_txn(c, "tool-sasl")
            assert r.error_code == 0
        admin, bob = tmp_path / "admin.properties", tmp_path / "bob.properties"
        for path, user in ((admin, "admin"), (bob, "bob")):
            path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
                            f"sasl.password={user}-secret\n")
        rc, out, err = txn(b, "describe", "--transactional-id", "tool-sasl", config=str(admin))
        assert rc == 0, err
        assert table(out, DESCRIBE_HEADERS)[0][:5] == ["0", "tool-sasl", str(r.producer_id), "0", "Empty"]
        rc, out, err = txn(b, "list", config=str(admin))
        assert rc == 0, err
        assert [row[0] for row in table(out, LIST_HEADERS)] == ["tool-sasl"]
        # bob may not describe the id: not listed, and describing it is Kafka's authorization error
        rc, out, err = txn(b, "list", config=str(bob))
        assert rc == 0, err
        assert table(out, LIST_HEADERS) == []
        line = one_line_error(txn(b, "describe", "--transactional-id", "tool-sasl", config=str(bob))[::2])
        assert line == ("samsa transactions: error: Failed to describe transaction state of transactional-id "
                        "`tool-sasl`: FindCoordinator request for transactionalId `tool-sasl` failed due to "
                        "authorization failure.")
        # no credentials: the SASL listener is not spoken to in plaintext
        one_line_error(txn(b, "list")[::2])
    finally:
        b.close()


def test_a_silent_server_times_out_after_default_api_timeout_ms(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        bootstrap = f"127.0.0.1:{server.getsockname()[1]}"
        config = tmp_path / "admin.properties"
        config.write_text("default.api.timeout.ms=1500\n")
        start = time.monotonic()
        line = one_line_error(samsa("transactions", "--bootstrap-server", bootstrap, "--command-config", str(config),
                                    "list"))
        assert line == f"samsa transactions: error: request to {bootstrap} failed: timed out", line
        assert time.monotonic() - start < 8


# --- needing the log side (DescribeProducers, WriteTxnMarkers) ------------------------------------------
GHOST_PID = 7_000_001  # a producer id no coordinator handed out (the counter starts at 0)


def test_describe_producers(broker: BrokerProcess, topic_name: str) -> None:
    needs_log_side(broker)
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        r = init_txn(c, "tool-producers")
        add_partitions(c, "tool-producers", r.producer_id, r.producer_epoch, {topic_name: [0]})
        produce_txn(c, "tool-producers", topic_name, 0, r.producer_id, r.producer_epoch, 0)
        produce_txn(c, "tool-producers", topic_name, 0, r.producer_id, r.producer_epoch, 1)
        ghost_offset = produce_txn(c, "tool-ghost", topic_name, 0, GHOST_PID, 3, 0)
    for extra in ((), ("--broker-id", "0")):
        rc, out, err = txn(broker, "describe-producers", "--topic", topic_name, "--partition", "0", *extra)
        assert rc == 0, err
        rows = sorted(table(out, PRODUCERS_HEADERS), key=lambda row: int(row[0]))
        assert [row[:4] + row[5:] for row in rows] == [[str(r.producer_id), "0", "-1", "1", "0"],
                                                      [str(GHOST_PID), "3", "-1", "0", str(ghost_offset)]]
        assert all(int(row[4]) > 0 for row in rows)  # LastTimestamp
    line = one_line_error(txn(broker, "describe-producers", "--topic", topic_name, "--partition", "0",
                              "--broker-id", "9")[::2])
    assert line == (f"samsa transactions: error: Failed to describe producers for partition {topic_name}-0 on "
                    "broker 9: Broker 9 is not in the cluster's metadata.")
    line = one_line_error(txn(broker, "describe-producers", "--topic", "tool-no-such-topic", "--partition", "0")[::2])
    assert line == ("samsa transactions: error: Failed to describe producers for partition tool-no-such-topic-0 on "
                    "leader: Failed to fetch metadata for partition tool-no-such-topic-0 because metadata for topic "
                    "`tool-no-such-topic` could not be found.")


def read_committed(c: RawClient, topic: str, partition: int) -> tuple[int, int, list[tuple[int, int]]]:
    """A read_committed Fetch v12 from offset 0: (high watermark, last stable offset, aborted transactions)."""
    resp = c.request(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0, p
    return p.high_watermark, p.last_stable_offset, sorted((a.producer_id, a.first_offset)
                                                          for a in p.aborted_transactions or [])


def _hanging(broker: BrokerProcess, topic: str, *args: str) -> list[list[str]]:
    rc, out, err = txn(broker, "find-hanging", *args)
    assert rc == 0, err
    return [row for row in table(out, HANGING_HEADERS) if row[0] == topic]


def test_find_hanging_then_abort(broker: BrokerProcess, topic_name: str) -> None:
    needs_log_side(broker)
    old = 20 * MINUTE_MS
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, partitions=2)
        # A producer no coordinator knows: hanging.
        ghost = produce_txn(c, "tool-ghost", topic_name, 0, GHOST_PID + 1, 0, 0, age_ms=old)
        # A real transaction holding partition 1, whose producer also wrote to partition 0 without
        # adding it: hanging in partition 0 only.
        init_txn(c, "tool-stray")
        r = init_txn(c, "tool-stray")  # epoch 1, so that an older epoch exists
        pid, epoch = r.producer_id, r.producer_epoch
        assert epoch == 1
        add_partitions(c, "tool-stray", pid, epoch, {topic_name: [1]})
        produce_txn(c, "tool-stray", topic_name, 1, pid, epoch, 0, age_ms=old)
        stray = produce_txn(c, "tool-stray", topic_name, 0, pid, epoch, 0, age_ms=old)
        # A fresh one: hanging too, but idle for less than any timeout.
        fresh = produce_txn(c, "tool-fresh", topic_name, 1, GHOST_PID + 2, 0, 0)
    expected = [[topic_name, "0", str(GHOST_PID + 1), "0", "-1", str(ghost), "20"],
                [topic_name, "0", str(pid), str(epoch), "-1", str(stray), "20"]]

    def shown(rows: list[list[str]]) -> list[list[str]]:
        return sorted(row[:6] + row[7:] for row in rows)  # LastTimestamp left out

    assert shown(_hanging(broker, topic_name, "--broker-id", "0")) == sorted(expected)
    assert shown(_hanging(broker, topic_name, "--topic", topic_name)) == sorted(expected)
    assert shown(_hanging(broker, topic_name, "--topic", topic_name, "--partition", "1")) == []
    assert shown(_hanging(broker, topic_name, "--topic", topic_name, "--partition", "1",
                          "--max-transaction-timeout", "0")) == [[topic_name, "1", str(GHOST_PID + 2), "0", "-1",
                                                                   str(fresh), "0"]]
    assert shown(_hanging(broker, topic_name, "--topic", topic_name, "--max-transaction-timeout", "21")) == []

    # abort by start offset; then by producer (coordinator epoch -1: none yet, so 0 is written)
    line = one_line_error(txn(broker, "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "99")[::2])
    assert line == ("samsa transactions: error: Could not find any open transactions starting at offset 99 on "
                    f"partition {topic_name}-0")
    assert txn(broker, "abort", "--topic", topic_name, "--partition", "0", "--start-offset", str(ghost)) == (0, "", "")
    assert shown(_hanging(broker, topic_name, "--topic", topic_name)) == [expected[1]]
    # an epoch older than the producer's is refused by the partition, in Kafka's words
    spec = (f"AbortTransactionSpec(topicPartition={topic_name}-0, producerId={pid}, producerEpoch={epoch - 1}, "
            "coordinatorEpoch=0)")
    line = one_line_error(txn(broker, "abort", "--topic", topic_name, "--partition", "0", "--producer-id", str(pid),
                              "--producer-epoch", str(epoch - 1), "--coordinator-epoch", "-1")[::2])
    assert line == (f"samsa transactions: error: Failed to abort transaction {spec}: WriteTxnMarkers request with "
                    f"{spec} failed due an invalid producer epoch.")
    assert txn(broker, "abort", "--topic", topic_name, "--partition", "0", "--producer-id", str(pid),
               "--producer-epoch", str(epoch), "--coordinator-epoch", "-1") == (0, "", "")
    assert shown(_hanging(broker, topic_name, "--topic", topic_name)) == []
    rc, out, err = txn(broker, "describe-producers", "--topic", topic_name, "--partition", "0")
    assert rc == 0, err
    assert {row[0]: row[5] for row in table(out, PRODUCERS_HEADERS)} == {str(GHOST_PID + 1): "None", str(pid): "None"}
    # aborted, not committed: read_committed readers skip both, and nothing holds the LSO back
    with RawClient(broker.bootstrap) as c:
        hw, lso, aborted = read_committed(c, topic_name, 0)
    assert (lso, aborted) == (hw, sorted([(GHOST_PID + 1, ghost), (pid, stray)]))
    # the real transaction is untouched: partition 1 is still in it
    rc, out, err = txn(broker, "describe", "--transactional-id", "tool-stray")
    assert rc == 0, err
    assert table(out, DESCRIBE_HEADERS)[0][4::4] == ["Ongoing", f"{topic_name}-1"]

