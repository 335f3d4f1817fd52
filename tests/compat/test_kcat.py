"""Debian 12's kcat (1.7.1, librdkafka 2.0.2) against a real Samsa broker.

kcat has no admin API: the topic is created by producing to it (auto.create.topics.enable).
It cannot set per-record timestamps, so timestamp look-ups are checked against the timestamps
read back. Reads use kcat's simple consumer (-C without -G: no consumer group).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import CODECS, broker_api_versions, librdkafka_sends, stored_codecs


def kcat(kcat_bin: str, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run([kcat_bin, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


def query_offset(kcat_bin: str, bootstrap: str, topic: str, ts: int) -> int:
    out: dict[str, Any] = json.loads(kcat(kcat_bin, "-b", bootstrap, "-J", "-Q", "-t", f"{topic}:0:{ts}"))
    return int(out[topic]["0"]["offset"])


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_and_list_offsets(broker: BrokerProcess, topic_name: str, codec: str, kcat_bin: str) -> None:
    b = broker.bootstrap
    n = 30
    lines = [f"k{i}:{codec}-value-{i}-" + "x" * 40 for i in range(n)]
    for half in (lines[:15], lines[15:]):  # two runs: at least two batches
        kcat(kcat_bin, "-P", "-b", b, "-t", topic_name, "-p", "0", "-z", codec, "-K", ":",
             "-H", "h=v", "-X", "acks=all", "-X", "linger.ms=5", stdin="\n".join(half) + "\n")

    meta = json.loads(kcat(kcat_bin, "-b", b, "-L", "-J", "-t", topic_name))
    (t,) = [t for t in meta["topics"] if t["topic"] == topic_name]
    assert [p["partition"] for p in t["partitions"]] == [0]

    out = kcat(kcat_bin, "-C", "-b", b, "-t", topic_name, "-p", "0", "-o", "beginning", "-e", "-J", "-q")
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [m["offset"] for m in msgs] == list(range(n))
    assert [f"{m['key']}:{m['payload']}" for m in msgs] == lines
    assert all(m["headers"] == ["h", "v"] for m in msgs)
    # librdkafka 2.0 may send it uncompressed, depending on the broker's ApiVersions
    assert stored_codecs(b, topic_name) == {librdkafka_sends(codec, broker_api_versions(b), librdkafka_2_0=True)}

    assert query_offset(kcat_bin, b, topic_name, -2) == 0  # earliest
    assert query_offset(kcat_bin, b, topic_name, -1) == n  # latest
    stamps = [int(m["ts"]) for m in msgs]
    for ts in (stamps[0] - 1000, stamps[0], stamps[n // 2], stamps[-1]):
        want = next(i for i, s in enumerate(stamps) if s >= ts)
        assert query_offset(kcat_bin, b, topic_name, ts) == want, f"offset for timestamp {ts}"
    assert query_offset(kcat_bin, b, topic_name, stamps[-1] + 60_000) == -1  # none at or after
