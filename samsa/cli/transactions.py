"""`samsa transactions`: kafka-transactions.sh -- look at transactions and producers, find hanging
transactions and abort them (KIP-664).

    samsa transactions --bootstrap-server HOST:PORT [--command-config FILE] COMMAND ...

    list [--duration-filter MS]                  every broker's transactions (ListTransactions)
    describe --transactional-id ID               one id's state at its coordinator
    describe-producers --topic T --partition P [--broker-id B]
                                                 a partition's producers, from its leader or broker B
    find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]
                                                 open transactions no coordinator will ever end
    abort --topic T --partition P (--start-offset O |
          --producer-id X --producer-epoch E --coordinator-epoch C)
                                                 write an ABORT marker for one hanging transaction

Flags, tables and error texts follow Kafka's TransactionsCommand; the base flags may also come
after the command. A transaction is hanging when its partition's leader holds it open, its
producer wrote nothing for longer than --max-transaction-timeout (the largest timeout a producer
may have), and no transactional id's current transaction at a coordinator holds that partition
(so no coordinator will ever write its marker); `abort` then writes the marker as a coordinator
would, which needs CLUSTER_ACTION on the cluster.

One difference from Kafka: `find-hanging --broker-id B` searches the partitions B leads, not
every partition B is a replica of, because a Samsa broker describes the producers of the
partitions it leads only (followers hold the same transactions). Kafka's texts end in "Enable
debug logging for additional detail."; ours do not, as the tool has no such logging.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.txn_admin import AdminError, TxnAdmin
from samsa.cli.txn_tables import (
    DESCRIBE_HEADERS,
    HANGING_HEADERS,
    LIST_HEADERS,
    PRODUCERS_HEADERS,
    TopicPartition,
    TxnDescription,
    abort_spec_text,
    describe_row,
    describe_txn_error,
    hanging_row,
    hanging_transactions,
    kafka_message,
    open_transactions,
    pretty_table,
    producer_row,
    tp_text,
)
from samsa.protocol.errors import ErrorCode

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


def _bounded_int(bits: int) -> Any:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer value: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range ({lo}..{hi})")
        return value

    return convert


_int16, _int32, _int64 = _bounded_int(16), _bounded_int(32), _bounded_int(64)


def _base_flags(p: ArgumentParser, default: Any) -> None:
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", default=default,
                   help="REQUIRED: the broker(s) to connect to, host:port, comma-separated")
    p.add_argument("--command-config", metavar="FILE", default=default,
                   help="client properties file (security.protocol, ssl.*, sasl.*, default.api.timeout.ms)")


_EXAMPLES = """examples:
  samsa transactions --bootstrap-server localhost:9092 list
  samsa transactions --bootstrap-server localhost:9092 describe --transactional-id my-app
  samsa transactions --bootstrap-server localhost:9092 describe-producers --topic t --partition 0
  samsa transactions --bootstrap-server localhost:9092 find-hanging --broker-id 0
  samsa transactions --bootstrap-server localhost:9092 abort --topic t --partition 0 --start-offset 42

Run `samsa transactions COMMAND --help` for a command's flags."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa transactions", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Inspect the transactional state of producers (like kafka-transactions.sh): "
                       "list and describe\ntransactions, describe a partition's producers, find hanging transactions "
                       "and abort them.", epilog=_EXAMPLES)
    p.add_argument("-v", "--version", action="store_true", help="print Samsa's version and exit")
    _base_flags(p, None)
    # The base flags are accepted after the command too (without overriding ones given before it).
    common = ArgumentParser(add_help=False)
    _base_flags(common, argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    ls = sub.add_parser("list", parents=[common], help="list the transactions of every coordinator",
                        description="List the transactions every broker coordinates.")
    ls.add_argument("--duration-filter", type=_int64, metavar="MS",
                    help="only transactions open longer than MS milliseconds (below 0: all, the default)")

    d = sub.add_parser("describe", parents=[common], help="describe a transactional id",
                       description="Describe a transactional id's state at its coordinator.")
    d.add_argument("--transactional-id", required=True, metavar="ID", help="the transactional id")

    dp = sub.add_parser("describe-producers", parents=[common], help="describe the producers of a partition",
                        description="Describe the producers a partition's leader (or --broker-id) knows.")
    dp.add_argument("--topic", required=True, help="topic name")
    dp.add_argument("--partition", required=True, type=_int32, help="partition number")
    dp.add_argument("--broker-id", type=_int32, metavar="ID",
                    help="ask this broker instead of the partition's leader")

    fh = sub.add_parser("find-hanging", parents=[common], help="find hanging transactions",
                        description="Find open transactions that no coordinator will complete: needs "
                        "--broker-id or --topic.")
    fh.add_argument("--broker-id", type=_int32, metavar="ID", help="search the partitions this broker leads")
    fh.add_argument("--topic", help="search this topic only (required with --partition)")
    fh.add_argument("--partition", type=_int32, help="search this partition of --topic only")
    fh.add_argument("--max-transaction-timeout", type=_int32, metavar="MINUTES",
                    default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                    help="the largest transaction timeout producers use, in minutes: only transactions idle "
                    f"longer are suspects (default {DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN})")

    ab = sub.add_parser("abort", parents=[common], help="abort a hanging transaction (needs ClusterAction)",
                        description="Abort one open transaction of a partition by writing its ABORT marker. "
                        "Name it by --start-offset, or by --producer-id, --producer-epoch and "
                        "--coordinator-epoch (as describe-producers or find-hanging show them).")
    ab.add_argument("--topic", required=True, help="topic name")
    ab.add_argument("--partition", required=True, type=_int32, help="partition number")
    ab.add_argument("--start-offset", type=_int64, metavar="OFFSET",
                    help="first offset of the transaction to abort")
    ab.add_argument("--producer-id", type=_int64, metavar="ID", help="producer id of the transaction")
    ab.add_argument("--producer-epoch", type=_int16, metavar="EPOCH", help="its producer epoch")
    ab.add_argument("--coordinator-epoch", type=_int32, metavar="EPOCH",
                    help="coordinator epoch of the producer's last marker (-1: none yet; 0 is used)")
    return p


def _fail(context: str, cause: object) -> CliError:
    """Kafka's printErrorAndExit(message, cause): `message: cause.`"""
    return CliError(f"{context}: {cause}.")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _timeout(props: dict[str, str]) -> float:
    text = props.get("default.api.timeout.ms")
    if text is None:
        return cl.DEFAULT_TIMEOUT_S
    try:
        return int(text) / 1000.0
    except ValueError:
        raise CliError(f"invalid value for default.api.timeout.ms: {text!r}") from None


# --- the commands ----------------------------------------------------------------------------------
def list_transactions(admin: TxnAdmin, a: argparse.Namespace) -> None:
    duration = a.duration_filter if a.duration_filter is not None else -1
    try:
        by_broker = admin.list_transactions(duration_filter=duration)
    except AdminError as e:
        raise _fail("Failed to list transactions", e) from None
    rows = [[tid, str(broker), str(pid), state] for broker, listings in sorted(by_broker.items())
            for tid, pid, state in listings]
    print(pretty_table(LIST_HEADERS, rows), end="")


def describe(admin: TxnAdmin, a: argparse.Namespace) -> None:
    tid = a.transactional_id
    context = f"Failed to describe transaction state of transactional-id `{tid}`"
    try:
        d = admin.describe_transaction(tid)
    except AdminError as e:
        raise _fail(context, e) from None
    if d is None:
        raise _fail(context, describe_txn_error(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, tid))
    print(pretty_table(DESCRIBE_HEADERS, [describe_row(d, _now_ms())]), end="")


def describe_producers(admin: TxnAdmin, a: argparse.Namespace) -> None:
    tp = (a.topic, a.partition)
    where = f"broker {a.broker_id}" if a.broker_id is not None else "leader"
    try:
        producers = admin.describe_producers([tp], a.broker_id)[tp]
    except AdminError as e:
        raise _fail(f"Failed to describe producers for partition {tp_text(tp)} on {where}", e) from None
    print(pretty_table(PRODUCERS_HEADERS, [producer_row(p) for p in producers]), end="")


def abort(admin: TxnAdmin, a: argparse.Namespace) -> None:
    tp = (a.topic, a.partition)
    if a.start_offset is None and a.producer_id is None:
        raise CliError("The transaction to abort must be identified either with --start-offset (for brokers on "
                       "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                       "brokers)")
    if a.start_offset is None:
        if a.producer_epoch is None:
            raise CliError("Missing required argument --producer-epoch")
        if a.coordinator_epoch is None:
            raise CliError("Missing required argument --coordinator-epoch")
        pid, epoch, coordinator_epoch = a.producer_id, a.producer_epoch, a.coordinator_epoch
    else:
        try:
            producers = admin.describe_producers([tp])[tp]
        except AdminError as e:
            raise _fail(f"Failed to validate producer state for partition {tp_text(tp)}", e) from None
        found = next((p for p in producers if p.current_txn_start_offset == a.start_offset), None)
        if found is None:
            raise CliError(f"Could not find any open transactions starting at offset {a.start_offset} on partition "
                           f"{tp_text(tp)}")
        pid, epoch, coordinator_epoch = found.producer_id, found.producer_epoch, found.coordinator_epoch
    # A producer whose first transaction hangs has no coordinator epoch yet (-1): 0 is no newer than
    # any coordinator's, so the partition accepts the marker (Kafka does the same).
    coordinator_epoch = max(coordinator_epoch, 0)
    spec = abort_spec_text(tp, pid, epoch, coordinator_epoch)
    try:
        admin.abort(tp, pid, epoch, coordinator_epoch, spec)
    except AdminError as e:
        raise _fail(f"Failed to abort transaction {spec}", e) from None


def find_hanging(admin: TxnAdmin, a: argparse.Namespace) -> None:
    if a.topic is None and a.broker_id is None:
        raise CliError("The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                       "the search")
    if a.partition is not None and a.topic is None:
        raise CliError("The --partition argument requires --topic to be provided")
    max_timeout_ms = a.max_transaction_timeout * 60_000
    partitions = _partitions_to_search(admin, a.topic, a.partition, a.broker_id)
    where = f"broker {a.broker_id}" if a.broker_id is not None else "their leaders"
    try:
        producers = admin.describe_producers(partitions, a.broker_id) if partitions else {}
    except AdminError as e:
        raise _fail(f"Failed to describe producers for {len(partitions)} partitions on {where}", e) from None
    candidates = open_transactions(producers, _now_ms(), max_timeout_ms)
    hanging = []
    if candidates:
        producer_ids = sorted({p.producer_id for _, p in candidates})
        try:
            listed = admin.list_transactions(producer_ids=producer_ids)
        except AdminError as e:
            raise _fail(f"Failed to list transactions for {len(producer_ids)} producers", e) from None
        wanted = set(producer_ids)
        tids = {pid: tid for listings in listed.values() for tid, pid, _ in listings if pid in wanted}
        descriptions: dict[str, TxnDescription | None] = {}
        try:
            for tid in sorted(set(tids.values())):
                descriptions[tid] = admin.describe_transaction(tid)
        except AdminError as e:
            raise _fail(f"Failed to describe {len(set(tids.values()))} transactions", e) from None
        hanging = hanging_transactions(candidates, tids, descriptions)
    now = _now_ms()
    print(pretty_table(HANGING_HEADERS, [hanging_row(t, now) for t in hanging]), end="")


def _partitions_to_search(admin: TxnAdmin, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[TopicPartition]:
    """The partition given; or those of --topic (of every topic without it) that `broker_id` leads."""
    if topic is not None and partition is not None:
        return [(topic, partition)]
    md = admin.partitions([topic] if topic is not None else None)
    errors = {t: code for t, code in md.topic_errors.items() if code != ErrorCode.LEADER_NOT_AVAILABLE}
    if errors:
        name, code = sorted(errors.items())[0]
        what = "1 topics" if topic is not None else f"{len(md.topic_errors)} topics"
        raise _fail(f"Failed to describe {what}", f"{kafka_message(code)} (topic `{name}`)")
    return sorted(tp for tp, leader in md.leaders.items() if broker_id is None or leader == broker_id)


COMMANDS = {"list": list_transactions, "describe": describe, "describe-producers": describe_producers,
            "find-hanging": find_hanging, "abort": abort}


@cl.one_line_errors
def run(argv: list[str]) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.version:
        from samsa import __version__

        print(f"samsa {__version__}")
        return 0
    if a.command is None:
        parser.error("a command is required: " + ", ".join(COMMANDS))
    if not a.bootstrap_server:
        parser.error("the following arguments are required: --bootstrap-server")
    props = cl.load_properties(a.command_config) if a.command_config else {}
    admin = TxnAdmin(a.bootstrap_server, props, _timeout(props))
    COMMANDS[a.command](admin, a)
    return 0

