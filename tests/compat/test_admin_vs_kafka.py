"""Kafka's own Admin client against Apache Kafka and against Samsa, step by step.

compat/java/JavaAdminDiff.java (the "admin-diff" scenario of SamsaJavaClient) runs one sequence
of Admin calls -- topics, configs, partitions, records, consumer groups (classic and KIP-848),
transactions, leader elections, log dirs, ACLs -- most of them ones that must fail, and prints
for each step its value or the class of the exception it ended in, with every name, node id,
producer id, epoch and timestamp made broker-independent. It runs once against a real Apache
Kafka 4.4 (the `apache_kafka` fixture) and once against Samsa; the two results must be equal
step by step, unless the step is in DIFFERENCES with the reason Samsa differs on purpose (a
listed difference that is gone fails too).

The table in docs/compat.md ("Kafka's Admin client against both") is rendered from the results
and checked here; regenerate it with

    SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat/test_admin_vs_kafka.py
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.compat.vs_kafka import Results, check_doc, differing, render

# the sections of the scenario's result, in its order, with what each covers
SECTIONS = {
    "cluster": "describeCluster, describeFeatures",
    "topics": "createTopics (errors, validate only), describeTopics (by name, by id), listTopics",
    "configs": "describeConfigs (sources, synonyms), incrementalAlterConfigs (errors, SET, DELETE, APPEND, SUBTRACT)",
    "partitions": "createPartitions (fewer, the same, validate only, more, unknown topic)",
    "records": "listOffsets (earliest, latest, max timestamp, by timestamp), deleteRecords",
    "groups": "a classic and a KIP-848 group: listGroups, describeConsumerGroups, alter/delete/list offsets, "
              "deleteConsumerGroups, active and closed",
    "transactions": "listTransactions, describeTransactions, describeProducers, fenceProducers",
    "leaders": "electLeaders (RF 1), describeLogDirs, listPartitionReassignments",
    "security": "ACLs without an authorizer, SCRAM credentials, client quotas",
    "cleanup": "deleteTopics",
}

# "section: step" -> why Samsa answers differently (exactly these steps differ)
DIFFERENCES: dict[str, str] = {
    **{f"configs: {step}": "Samsa lists log.retention.hours=168 (DEFAULT_CONFIG) among retention.ms's synonyms, "
                           "the broker default that applies; Kafka keeps a topic config's broker synonyms only from "
                           "the first one that has a value, and log.retention.ms has none, so it lists none "
                           "(samsa/config.py, describe_topic_config)"
       for step in ("describe the topic's (value, source, default, read-only, synonyms)", "describe after")},
}

ERRORS_PACKAGE = "org.apache.kafka.common.errors."


def run_scenario(java_client: list[str], bootstrap: str) -> dict[str, Any]:
    spec = {"scenario": "admin-diff", "bootstrap": bootstrap, "prefix": "ad-" + uuid.uuid4().hex[:10]}
    proc = subprocess.run(java_client + [json.dumps(spec)], capture_output=True, text=True, timeout=600)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"the Java client printed nothing (rc {proc.returncode}): {proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert proc.returncode == 0 and "error" not in out, f"Java client: {out.get('error')}\n{proc.stderr[-4000:]}"
    assert list(out) == list(SECTIONS), list(out)
    return _short(out)


def _short(v: Any) -> Any:
    """Exception classes of Kafka's errors package without the package (the table's width)."""
    if isinstance(v, dict):
        return {k: _short(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_short(x) for x in v]
    return v.removeprefix(ERRORS_PACKAGE) if isinstance(v, str) else v


@pytest.fixture(scope="module")
def results(apache_kafka: str, tmp_path_factory: pytest.TempPathFactory, java_client: list[str]) -> Results:
    """{"section: step": {"kafka": {"": outcome}, "samsa": {"": outcome}}}: one row a step.

    Samsa is a fresh broker of this module's: on the session's shared one, a broker default
    another test changed dynamically would show among the synonyms in the table."""
    broker = BrokerProcess(tmp_path_factory.mktemp("admin-diff")).start()
    try:
        kafka, samsa = run_scenario(java_client, apache_kafka), run_scenario(java_client, broker.bootstrap)
    finally:
        broker.close()
    out: Results = {}
    for section in SECTIONS:
        steps = list(kafka[section]) + [s for s in samsa[section] if s not in kafka[section]]
        for step in steps:
            out[f"{section}: {step}"] = {who: {"": r[section][step]} for who, r in (("kafka", kafka), ("samsa", samsa))
                                         if step in r[section]}
    return out


@pytest.mark.parametrize("section", list(SECTIONS))
def test_samsa_answers_the_admin_client_as_kafka(results: Results, section: str) -> None:
    rows = {name: got for name, got in results.items() if name.startswith(f"{section}: ")}
    assert rows and all(set(got) == {"kafka", "samsa"} for got in rows.values()), (
        f"{section}: steps one broker's run lacks: {[n for n, g in rows.items() if len(g) < 2]}")
    differ = {name: differing(got)[""] for name, got in rows.items() if differing(got)}
    intended = {name for name in DIFFERENCES if name.startswith(f"{section}: ")}
    assert set(differ) == intended, (
        f"{section}: (kafka, samsa) differ at {differ}; the intended differences are {sorted(intended)}")


def test_the_compat_doc_shows_these_results(results: Results) -> None:
    table = render("vs-kafka-admin", {name: name for name in results}, results,
                   {name: {"": why} for name, why in DIFFERENCES.items()})
    check_doc("vs-kafka-admin", "Kafka's Admin client against both", table, "tests/compat/test_admin_vs_kafka.py")
