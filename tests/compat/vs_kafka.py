"""What the differential tests against Apache Kafka share (test_vs_kafka.py over raw frames,
test_admin_vs_kafka.py through Kafka's Admin client): a registry of cases, raw-frame helpers,
and the comparison tables of docs/compat.md.

A case is a function of a bootstrap address returning {field: value} (only what a client acts
on: error codes, offsets, states, never a broker's own ids or clocks); it is run against both
brokers and the two dicts compared field by field. `differing` and `render` work on the result
of every case: {case: {"kafka": {...}, "samsa": {...}}}.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.protocol.records import build_batch
from tests.rawclient import RawClient

Case = Callable[[str], dict[str, Any]]
Results = dict[str, dict[str, Any]]
DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"
UPDATE_HINT = "SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest {} rewrites it"


class CaseSet:
    """`@cases("what it sends")` registers a `case_<name>` function under `<name>`, in order."""

    def __init__(self) -> None:
        self.cases: dict[str, tuple[str, Case]] = {}

    def __call__(self, what: str) -> Callable[[Case], Case]:
        def register(fn: Case) -> Case:
            self.cases[fn.__name__.removeprefix("case_")] = (what, fn)
            return fn
        return register


def name() -> str:
    return "vs-" + uuid.uuid4().hex[:10]


def client(bootstrap: str) -> RawClient:
    return RawClient(bootstrap, timeout=30)


def create(c: RawClient, topic: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
           validate_only: bool = False) -> tuple[int, int]:
    """CreateTopics v7: (error code, topic config error code)."""
    resp = c.request(19, 7, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": rf,
                                         "assignments": [], "configs": [{"name": k, "value": v}
                                                                        for k, v in (configs or {}).items()]}],
                             "timeout": 30000, "validate_only": validate_only})
    t = resp.topics[0]
    return int(t.error_code), int(t.topic_config_error_code)


def ready(c: RawClient, topic: str, partitions: int = 1) -> None:
    """Until every partition has a leader that serves it: Kafka's KRaft answers CreateTopics
    first, and its Metadata names the leaders before the leader has created the log (requests
    to it meanwhile get NOT_LEADER_OR_FOLLOWER), so a ListOffsets of each must succeed too."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = c.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        t = md.topics[0]
        if int(t.error_code) == 0 and len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions):
            lo = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": i, "current_leader_epoch": -1, "timestamp": -1} for i in range(partitions)]}]})
            if all(int(p.error_code) == 0 for x in lo.topics for p in x.partitions):
                return
        time.sleep(0.05)  # metadata propagation has no event a client can await
    raise AssertionError(f"{topic} has no leaders after 30 s")


def topic(c: RawClient, partitions: int = 1) -> str:
    """A new topic, once every partition has a leader."""
    t = name()
    assert create(c, t, partitions) == (0, 0)
    ready(c, t, partitions)
    return t


def coordinator(c: RawClient, key: str, key_type: int = 0) -> None:
    """Until the group (key_type 0) or transaction (1) coordinator of `key` answers: Kafka
    creates __consumer_offsets / __transaction_state on the first FindCoordinator and answers
    COORDINATOR_NOT_AVAILABLE until it leads them, then NOT_COORDINATOR or
    COORDINATOR_LOAD_IN_PROGRESS until the partition is loaded. Both brokers are one node, so
    the connection already reaches the coordinator; a DescribeGroups (DescribeTransactions)
    of the key tells when it is loaded."""
    deadline = time.monotonic() + 60
    while True:
        resp = c.request(10, 4, {"key_type": key_type, "coordinator_keys": [key]})
        error = int(resp.coordinators[0].error_code)
        if error == 0:
            if key_type == 0:
                error = int(c.request(15, 5, {"groups": [key], "include_authorized_operations": False})
                            .groups[0].error_code)
            else:
                error = int(c.request(65, 0, {"transactional_ids": [key]}).transaction_states[0].error_code)
        if error not in COORDINATOR_NOT_READY:
            return
        assert time.monotonic() < deadline, f"the coordinator of {key!r} still answers {error} after 60 s"
        time.sleep(0.05)  # the coordinator's partition loads in the background: nothing to await


COORDINATOR_NOT_READY = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def produce(c: RawClient, topic: str, records: bytes, acks: int = -1, partition: int = 0, version: int = 9,
            transactional_id: str | None = None) -> Any:
    resp = c.request(0, version, {"transactional_id": transactional_id, "acks": acks, "timeout": 30000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def batch(values: list[bytes], timestamp: int) -> bytes:
    return build_batch([(b"k", v, [], timestamp) for v in values])


def closed(c: RawClient) -> bool:
    return c.is_closed_by_peer(timeout=10)


def plain(v: Any) -> Any:
    """A result as JSON would have it (tuples as lists, keys as strings), for comparing."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def differing(got: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{field: (kafka's, samsa's)} for every field of one case whose values differ."""
    k, s = got["kafka"], got["samsa"]
    return {f: (k.get(f), s.get(f)) for f in k.keys() | s.keys() if k.get(f) != s.get(f)}


def render(marker: str, cases: dict[str, str], results: Results, differences: dict[str, dict[str, str]]) -> str:
    """The table of docs/compat.md between `<!-- marker:start -->` and `<!-- marker:end -->`:
    a row a case (`cases`: name -> what it does), Kafka's answer in full, Samsa's where it differs
    and why (from `differences`: case -> {field: why}). A field named "" is shown as its value
    alone (test_admin_vs_kafka.py's cases are single steps)."""
    lines = [f"<!-- {marker}:start -->", "", "| case | Apache Kafka 4.4 | Samsa | |", "|---|---|---|---|"]
    for case_name, what in cases.items():
        r = results[case_name]
        k = "; ".join(_field(a, v) for a, v in r["kafka"].items())
        fields = [a for a, v in r["samsa"].items() if v != r["kafka"].get(a)]
        fields += [a for a in r["kafka"] if a not in r["samsa"]]
        s = "; ".join(_field(a, r["samsa"].get(a, "(absent)")) for a in fields) or "same"
        why = " ".join(_field(a, differences.get(case_name, {}).get(a, "not explained")) + "." for a in fields)
        lines.append(f"| {what} | {k} | {s} | {why or '✅'} |")
    lines += ["", f"<!-- {marker}:end -->"]
    return "\n".join(lines)


def _field(name: str, v: Any) -> str:
    """One field of a row: "name: value" (a case of one unnamed field shows the value alone)."""
    return f"{name}: {_show(v)}" if name else _show(v)


def _show(v: Any) -> str:
    """A value in the table (error codes are Kafka's numbers)."""
    return str(v).replace("|", "\\|")


def check_doc(marker: str, heading: str, table: str, test_file: str) -> None:
    """docs/compat.md holds `table` between its markers; with SAMSA_UPDATE_COMPAT_DOC set, it is
    written there first (appended under `heading` the first time)."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    text = DOC.read_text()
    if os.environ.get("SAMSA_UPDATE_COMPAT_DOC"):
        if start in text:
            text = text[:text.index(start)] + table + text[text.index(end) + len(end):]
        else:
            text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + table + "\n"
        DOC.write_text(text)
    assert start in text, f"docs/compat.md has no {start}: {UPDATE_HINT.format(test_file)}"
    documented = text[text.index(start):text.index(end) + len(end)]
    if documented != table:
        lines = documented.splitlines()
        wrong = [f"now: {row}\n    documented: {lines[i] if i < len(lines) else '(none)'}"
                 for i, row in enumerate(table.splitlines()) if i >= len(lines) or lines[i] != row]
        raise AssertionError(f"docs/compat.md's table is not these results ({UPDATE_HINT.format(test_file)}):\n"
                             + "\n".join(wrong[:10]))
