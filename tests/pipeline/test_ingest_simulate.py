"""`samsa ingest simulate` as a real process against a real broker."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter, defaultdict
from typing import Any

from samsa.pipeline.contract import POLLUTANTS, READING_FIELDS
from tests.cli.helpers import ok, samsa, spawn
from tests.pipeline.ingest_helpers import Reader, create_topic

STATUS = re.compile(r"^simulate: \d+ s, \d+ readings/s, generated \d+, acked \d+, failed \d+, queued \d+$", re.M)
DONE = re.compile(r"^simulate: done after ([\d.]+) s: generated (\d+), acked (\d+) \((\d+)/s\), failed (\d+)$", re.M)


def kind(value: bytes, sent_ms: int) -> str:
    """"ok", "late" or "bad" (what the Spark job sends to the DLQ), from the value and the send time."""
    try:
        r = json.loads(value)
    except json.JSONDecodeError:
        return "bad"
    if any(f not in r for f in READING_FIELDS) or min(r[p] for p in POLLUTANTS) < 0 or r["ts"] > sent_ms + 60_000:
        return "bad"
    return "late" if r["ts"] < sent_ms - 4_000 else "ok"


def test_simulate_sends_contract_readings_at_the_rate_with_late_and_bad_ones(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    out = ok(samsa(
        "ingest", "simulate", "--bootstrap-server", broker.bootstrap, "--topic", topic_name, "--rate", "2000",
        "--duration", "3", "--seed", "7", "--late-ratio", "0.1", "--bad-ratio", "0.05", "--status-interval", "1",
    ))
    done = DONE.search(out)
    assert done, out
    elapsed, (generated, acked, per_s, failed) = float(done[1]), map(int, done.groups()[1:])
    assert (generated, acked, failed) == (6000, 6000, 0)
    assert 2.9 <= elapsed < 4.5 and per_s >= 1400, out
    assert len(STATUS.findall(out)) >= 2, out

    with Reader(broker.bootstrap, topic_name, 3) as reader:
        reader.count(6000)
        assert reader.high_watermarks() == 6000
    kinds: Counter[str] = Counter()
    partitions: dict[bytes, set[int | None]] = defaultdict(set)
    for partition, _, key, value, sent_ms in reader.records:
        assert key is not None and value is not None
        partitions[key].add(partition)
        k = kind(value, sent_ms)
        kinds[k] += 1
        if k != "bad":
            r = json.loads(value)
            assert list(r) == list(READING_FIELDS) and r["sensor_id"].encode() == key
    assert len(partitions) == 50 and all(len(p) == 1 for p in partitions.values())  # keyed by sensor id
    assert len({p for ps in partitions.values() for p in ps}) == 3
    # 10 % late (of the good ones), 5 % bad: generous bounds, far from 0.
    assert 400 <= kinds["late"] <= 750 and 200 <= kinds["bad"] <= 420, kinds


def test_simulate_stops_on_sigterm_after_flushing(broker: Any, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    proc = spawn("ingest", "simulate", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                 "--rate", "500", "--sensors", "5", "--cities", "Paris,Delhi", "--log-level", "WARNING")
    try:
        with Reader(broker.bootstrap, topic_name) as reader:
            reader.count(200)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            done = DONE.search(out)
            assert done and int(done[5]) == 0, out
            acked = int(done[3])
            assert reader.high_watermarks() == acked >= 200
            keys = {r[2] for r in reader.records}
        assert keys <= {b"paris-001", b"delhi-001", b"paris-002", b"delhi-002", b"paris-003"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
