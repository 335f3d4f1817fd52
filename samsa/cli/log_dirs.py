"""`samsa log-dirs --describe`: kafka-log-dirs.sh — each broker's log dirs and the replicas in them.

Asks every broker (or those of `--broker-list`) with DescribeLogDirs and prints Kafka's tool's
output: two lines, then the JSON

    Querying brokers for log directories information
    Received log directory information from brokers 0,1
    {"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":123,
      "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data/samsa"}]}],"version":1}

`--topic-list a,b` keeps those topics' partitions. A failed dir's "error" is the Java exception
Kafka's tool would name (KafkaStorageException).

`--cleaner` (a Samsa extension) adds, after the JSON, the log cleaner's state of each compacted
log: its first dirty offset, dirty ratio, last clean and what it reclaimed, or why it is
uncleanable (Samsa's DescribeLogCleaner API).
"""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka.admin import AdminClient

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.protocol.errors import ErrorCode
from samsa.protocol.samsa_apis import DESCRIBE_LOG_CLEANER_KEY

DESCRIBE_LOG_DIRS = 35
_ERROR_CLASSES = {ErrorCode.KAFKA_STORAGE_ERROR: "org.apache.kafka.common.errors.KafkaStorageException",
                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
                      "org.apache.kafka.common.errors.ClusterAuthorizationException"}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa log-dirs",
                       description="Query the log directories of brokers and the replicas in them "
                                   "(like kafka-log-dirs.sh).")
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: the server(s) to use for bootstrapping.")
    p.add_argument("--command-config", metavar="FILE", help="Property file with configs for the admin client.")
    p.add_argument("--describe", action="store_true",
                   help="REQUIRED: describe the log directories on the brokers.")
    p.add_argument("--topic-list", metavar="T1,T2", default="",
                   help="Only these topics' partitions (default: every topic).")
    p.add_argument("--broker-list", metavar="0,1,2", default="",
                   help="Only these brokers (default: every broker in the cluster).")
    p.add_argument("--cleaner", action="store_true",
                   help="Also print the log cleaner's state of each compacted log (a Samsa extension).")
    return p


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    if not argv:
        p.print_help()
        return 1
    a = p.parse_args(argv)
    missing = [f for f, v in (("--bootstrap-server", a.bootstrap_server), ("--describe", a.describe)) if not v]
    if missing:
        p.error("missing required option(s): " + ", ".join(missing))
    try:
        wanted_brokers = {int(b) for b in a.broker_list.split(",") if b.strip()}
    except ValueError:
        p.error(f"--broker-list expects broker ids separated by commas, got {a.broker_list!r}")
    topics = {t.strip() for t in a.topic_list.split(",") if t.strip()}
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    known = {b.id: (b.host, b.port) for b in md.brokers.values()}
    absent = sorted(wanted_brokers - set(known))
    if absent:
        raise CliError(f"ERROR: The given brokers do not exist from --broker-list: {','.join(map(str, absent))}. "
                       f"Current existent brokers: {','.join(map(str, sorted(known)))}")
    targets = sorted(wanted_brokers or known)
    timeout = errors.timeout
    print("Querying brokers for log directories information", flush=True)
    described = {b: _describe(*known[b], timeout, props) for b in targets}
    print(f"Received log directory information from brokers {','.join(map(str, targets))}")
    print(format_json(described, topics))
    if a.cleaner:
        print()
        for line in format_cleaner({b: _cleaner(*known[b], timeout, props) for b in targets}, topics):
            print(line)
    return 0


def _describe(host: str, port: int, timeout: float, props: dict[str, str]) -> Any:
    resp = cl.raw_request(host, port, DESCRIBE_LOG_DIRS, 4, {"topics": None}, timeout, props)
    if resp.error_code:
        raise CliError(f"broker {host}:{port} refused DescribeLogDirs: {ErrorCode(resp.error_code).name}")
    return resp


def _cleaner(host: str, port: int, timeout: float, props: dict[str, str]) -> Any:
    resp = cl.raw_request(host, port, DESCRIBE_LOG_CLEANER_KEY, 0, {"topics": None}, timeout, props)
    if resp.error_code:
        raise CliError(f"broker {host}:{port} refused DescribeLogCleaner: {ErrorCode(resp.error_code).name}")
    return resp


def format_json(described: dict[int, Any], topics: set[str]) -> str:
    """Kafka's tool's JSON (its key order, compact separators)."""
    brokers = []
    for broker, resp in described.items():
        dirs = []
        for d in resp.results:
            parts = [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                      "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                     for t in d.topics if not topics or t.name in topics for p in t.partitions]
            error = _ERROR_CLASSES.get(ErrorCode(d.error_code), ErrorCode(d.error_code).name) if d.error_code else None
            dirs.append({"partitions": parts, "error": error, "logDir": d.log_dir})
        brokers.append({"broker": broker, "logDirs": dirs})
    return json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":"))


def format_cleaner(per_broker: dict[int, Any], topics: set[str]) -> list[str]:
    """A table of each compacted log's cleaner state."""
    rows = [("BROKER", "PARTITION", "FIRST-DIRTY", "DIRTY-RATIO", "CLEANS", "LAST-CLEAN", "RECLAIMED", "STATE")]
    now_ms = int(time.time() * 1000)
    for broker, resp in per_broker.items():
        for lg in resp.logs:
            if topics and lg.topic not in topics:
                continue
            last = "never" if lg.last_clean_ms < 0 else f"{(now_ms - lg.last_clean_ms) / 1000:.0f} s ago"
            state = ("uncleanable: " + lg.uncleanable_reason if lg.uncleanable_reason is not None
                     else "cleaning" if lg.in_progress else "ok")
            rows.append((str(broker), f"{lg.topic}-{lg.partition}", str(lg.first_dirty_offset),
                         f"{lg.dirty_ratio:.2f}", str(lg.cleans), last, f"{lg.bytes_reclaimed:,} B", state))
    if len(rows) == 1:
        return ["No compacted logs."]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows]
