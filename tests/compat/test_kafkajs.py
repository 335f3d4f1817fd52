"""kafkajs (node) against a real Samsa broker, through compat/kafkajs/runner.js.

The runner creates the topic with kafkajs's admin client, produces with the codec, lists
offsets with the admin client and reads the partition with kafkajs's own Fetch request and
record-batch decoder (its Consumer needs a consumer group, which Samsa does not have yet).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import CODECS, Rec, base_timestamp_ms, make_records, stored_codecs, timestamp_queries


def run_kafkajs(runner: list[str], spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(runner + [json.dumps(spec)], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert lines, f"kafkajs runner printed nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert proc.returncode == 0 and "error" not in out, f"kafkajs: {out.get('error')}\n{proc.stderr[-2000:]}"
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_and_list_offsets(
    broker: BrokerProcess, topic_name: str, codec: str, kafkajs_runner: list[str]
) -> None:
    n = 30
    base = base_timestamp_ms()
    recs = make_records(codec, n, base)
    queries = timestamp_queries(recs)
    out = run_kafkajs(kafkajs_runner, {
        "bootstrap": broker.bootstrap, "topic": topic_name, "codec": codec, "count": n,
        "baseTs": base, "queryTimestamps": list(queries),
    })
    assert out["created"] is True
    assert out["partitions"] == [0]
    assert [p["baseOffset"] for p in out["produced"]] == [0, 15]
    # the runner builds the same records as make_records (same keys, values, timestamps, header)
    got = [Rec(r["key"], r["value"], r["timestamp"], tuple(r["headers"].items())) for r in out["records"]]
    assert [r["offset"] for r in out["records"]] == list(range(n))
    assert got == recs
    assert out["offsets"] == {"earliest": 0, "latest": n}
    for ts, want in queries.items():
        # kafkajs answers "no record at or after ts" (-1 on the wire) with the latest offset
        assert out["byTimestamp"][str(ts)] == (n if want < 0 else want), f"fetchTopicOffsetsByTimestamp({ts})"
    assert stored_codecs(broker.bootstrap, topic_name) == {codec}
