"""The dashboard's state and health figures as pure functions: records and times in, snapshot out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.pipeline.dashboard import health
from samsa.pipeline.dashboard.live import LiveState
from samsa.pipeline.dashboard.state import CATEGORY_COLORS, PipelineState, PipelineTopics, categories

MIN = 60_000
T0 = 1_795_000_000_000 // MIN * MIN


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([], None),
        ([(0.0, 10)], None),
        ([(0.0, 10), (0.2, 50)], None),  # too short a span to tell
        ([(0.0, 10), (1.0, 10)], 0.0),
        ([(0.0, 10), (1.0, 40), (2.0, 110)], 50.0),
        ([(0.0, 100), (2.0, 3)], 0.0),  # topic recreated: no negative rate
        ([(0.0, 0), (3.0, 10)], 3.3),
    ],
)
def test_rate(samples: list[tuple[float, int]], expected: float | None) -> None:
    assert health.rate(samples) == expected


@pytest.mark.parametrize(
    ("ends", "processed", "expected"),
    [
        (None, {"0": 1}, None),
        ({0: 10}, None, None),
        ({0: 10, 1: 7}, {"0": 4, "1": 7}, 6),
        ({0: 10, 1: 7}, {"0": 4}, 13),  # a partition the job has not reported counts from 0
        ({0: 10}, {"0": 12}, 0),  # the job reports past our older sample: caught up
        ({}, {"0": 3}, 0),
    ],
)
def test_lag(ends: dict[int, int] | None, processed: dict[str, int] | None, expected: int | None) -> None:
    assert health.lag(ends, processed) == expected


@pytest.mark.parametrize(
    ("last", "now", "timeout", "expected"),
    [
        (None, T0, 30, health.STARTING),  # no status yet, and no start timeout: starting
        (T0, T0, 30, health.RUNNING),
        (T0, T0 + 30_000, 30, health.RUNNING),
        (T0, T0 + 30_001, 30, health.NOT_RUNNING),
        (T0 + 5_000, T0, 30, health.RUNNING),  # a status stamped slightly ahead of our clock
    ],
)
def test_job_state(last: int | None, now: int, timeout: float, expected: str) -> None:
    assert health.job_state(last, now, timeout)[0] == expected


S, R, N = health.STARTING, health.RUNNING, health.NOT_RUNNING
WAITING = "waiting for its first pipeline_status record"
FIRST_WINDOWS = "its first windows are arriving; its first pipeline_status record ends its first micro-batch"
STALE = "no pipeline_status record for more than 30 s"


@pytest.mark.parametrize(
    ("status", "output", "started", "since", "start_timeout", "now", "expected"),
    [
        # a dashboard alone (the job's start unknown): starting for start_timeout after it looked
        (None, None, None, T0, 120, T0 + 60_000, (S, WAITING)),
        (None, None, None, T0, 120, T0 + 120_001, (N, "no pipeline_status record received")),
        # ... unless windows are arriving: the first micro-batch writes them before its status
        (None, T0 + 119_000, None, T0, 120, T0 + 140_000, (S, FIRST_WINDOWS)),
        (None, T0 - 31_000, None, T0, 120, T0 + 121_000, (N, "no pipeline_status record received")),
        # an old status, the job's start unknown: not running at once
        (T0 - 60_000, None, None, T0, 120, T0, (N, STALE)),
        (T0 - 60_000, T0 - 1_000, None, T0, 120, T0, (R, STALE + ", but its windows are arriving")),
        # the demo: it started the job at T0 and waits as long as Spark takes
        (None, None, T0, T0, None, T0 + 600_000, (S, WAITING)),
        (T0 - 5_000, None, T0, T0, None, T0 + 1_000, (S, WAITING)),  # an earlier run's status
        (T0 - 5_000, T0 - 1_000, T0, T0, None, T0 + 1_000, (S, WAITING)),  # and its windows
        (T0 - 5_000, T0 + 50_000, T0, T0, None, T0 + 51_000, (S, FIRST_WINDOWS)),
        (T0 + 52_000, T0 + 50_000, T0, T0, None, T0 + 53_000, (R, "")),
        (T0 + 52_000, None, T0, T0, None, T0 + 83_000, (N, STALE)),
        (T0 - 5_000, None, T0, T0, 120, T0 + 121_000, (N, "no pipeline_status record since the job started")),
    ],
)
def test_job_state_until_the_first_status(status: int | None, output: int | None, started: int | None, since: int,
                                          start_timeout: float | None, now: int, expected: tuple[str, str]) -> None:
    assert health.job_state(status, now, 30, last_output_ms=output, job_started_ms=started, watching_since_ms=since,
                            start_timeout_s=start_timeout) == expected


def agg(kind: str, city: str, start: int, aqi: int, sensor: str | None = None, **extra: Any) -> bytes:
    rec = {"kind": kind, "city": city, "sensor_id": sensor, "window_start": start, "window_end": start + MIN,
           "count": 3, "pm25_avg": 10.0, "aqi": aqi, "category": None, **extra}
    return json.dumps(rec).encode()


def fresh(**kw: Any) -> PipelineState:
    state = PipelineState(PipelineTopics(), **kw)
    state.refresh(T0)
    return state


def city(snap: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in snap["cities"] if c["city"] == name)


def test_re_emitted_windows_replace_and_older_ones_do_not_win() -> None:
    s = fresh()
    assert s.apply("aggregates", None, agg("city_1m", "Paris", T0, 40), T0)
    assert s.apply("aggregates", None, agg("city_1m", "Paris", T0, 75), T0)
    assert s.apply("aggregates", None, agg("city_5m", "Paris", T0, 60), T0)
    assert not s.apply("aggregates", None, agg("city_5m", "Paris", T0 - 5 * MIN, 99), T0)
    assert s.apply("aggregates", None, agg("sensor_1m", "Paris", T0, 20, sensor="p-1"), T0)
    assert s.apply("aggregates", None, agg("sensor_1m", "Paris", T0, 22, sensor="p-1"), T0)
    snap = s.snapshot()
    paris = city(snap, "Paris")
    assert [(p["window_start"], p["aqi"]) for p in paris["series"]] == [(T0, 75)]
    assert paris["latest"]["category"] == "Moderate" and paris["latest"]["color"] == CATEGORY_COLORS["Moderate"]
    assert paris["latest_5m"]["aqi"] == 60
    assert [(x["sensor_id"], x["aqi"]) for x in snap["sensors"]] == [("p-1", 22)]


def test_series_keeps_the_last_hour_of_event_time() -> None:
    s = fresh(series_minutes=60)
    for m in range(0, 90, 10):
        s.apply("aggregates", None, agg("city_1m", "Oslo", T0 + m * MIN, m), T0)
    assert not s.apply("aggregates", None, agg("city_1m", "Oslo", T0, 1), T0)  # too old to keep
    assert not s.apply("aggregates", None, agg("city_1m", "Rome", T0, 5), T0)
    s.apply("aggregates", None, agg("city_5m", "Rome", T0, 5), T0)
    s.apply("aggregates", None, agg("city_5m", "Bern", T0 + 80 * MIN, 7), T0)
    snap = s.snapshot()
    assert [c["city"] for c in snap["cities"]] == ["Bern", "Oslo"]  # nothing of Rome's in the last hour
    assert [p["aqi"] for p in city(snap, "Oslo")["series"]] == [20, 30, 40, 50, 60, 70, 80]
    assert city(snap, "Bern")["series"] == [] and city(snap, "Bern")["latest_5m"]["aqi"] == 7
    assert snap["series_window"] == {"from": T0 + 20 * MIN, "to": T0 + 80 * MIN}


def test_alerts_keep_the_newest_windows_one_per_city_and_window() -> None:
    s = fresh(max_alerts=3)
    for m in range(5):
        alert = {"city": "Delhi", "window_start": T0 + m * MIN, "window_end": T0 + (m + 1) * MIN, "aqi": 160 + m,
                 "category": "Unhealthy", "threshold": 151, "pm25_avg": 70.0}
        s.apply("alerts", b"Delhi", json.dumps(alert).encode(), T0)
    old = {"city": "Delhi", "window_start": T0 - MIN, "aqi": 300, "category": "Very Unhealthy"}
    assert not s.apply("alerts", b"Delhi", json.dumps(old).encode(), T0)
    update = {"city": "Delhi", "window_start": T0 + 4 * MIN, "aqi": 210, "category": "Very Unhealthy"}
    s.apply("alerts", b"Delhi", json.dumps(update).encode(), T0)
    alerts = s.snapshot()["alerts"]
    assert [(a["window_start"] - T0) // MIN for a in alerts] == [4, 3, 2]
    assert alerts[0]["aqi"] == 210 and alerts[0]["color"] == CATEGORY_COLORS["Very Unhealthy"]


@pytest.mark.parametrize(
    "value",
    [b"not json", b"[1, 2]", agg("city_1m", "X", T0, 10)[:-1], json.dumps({"kind": "city_1m", "city": "X"}).encode(),
     agg("weekly", "X", T0, 10), agg("city_1m", "X", T0, 10).replace(b'"aqi": 10', b'"aqi": NaN'),
     agg("city_1m", "X", T0, 10).replace(b'"aqi": 10', b'"aqi": "high"'), None],
)
def test_malformed_records_are_counted_not_fatal(value: bytes | None) -> None:
    s = fresh()
    s.apply("aggregates", None, value, T0)
    snap = s.snapshot()
    assert snap["ignored_records"] == 1 and snap["cities"] == []
    json.dumps(snap, allow_nan=False)


def test_sensor_sliding_windows_are_known_but_not_shown() -> None:
    s = fresh()
    s.apply("aggregates", None, agg("sensor_5m", "X", T0, 10), T0)
    snap = s.snapshot()
    assert snap["ignored_records"] == 0 and snap["sensors"] == [] and snap["cities"] == []


def test_sensor_positions_come_from_readings_and_known_sensors_are_not_parsed() -> None:
    s = fresh()
    reading = {"sensor_id": "d-1", "city": "Delhi", "lat": 28.6, "lon": 77.2, "ts": T0, "pm25": 90.0}
    assert not s.apply("readings", b"d-1", json.dumps(reading).encode(), T0)  # not in the table yet
    assert s.apply("aggregates", None, agg("sensor_1m", "Delhi", T0, 170, sensor="d-1"), T0)
    assert not s.apply("readings", b"d-1", b"garbage that would not parse", T0)  # skipped by key
    (sensor,) = s.snapshot()["sensors"]
    assert (sensor["lat"], sensor["lon"], sensor["category"]) == (28.6, 77.2, "Unhealthy")
    # A position carried by the aggregate itself wins.
    s.apply("aggregates", None, agg("sensor_1m", "Delhi", T0 + MIN, 170, sensor="d-1", lat=1.5, lon=2.5), T0)
    assert (s.snapshot()["sensors"][0]["lat"], s.snapshot()["sensors"][0]["lon"]) == (1.5, 2.5)


def test_health_from_offsets_and_status() -> None:
    s = fresh(job_timeout_s=30)
    topics = s.topics
    status = {"ts": T0, "batch_id": 3, "input_rows_per_second": float("nan"),
              "end_offsets": {topics.readings: {"0": 40, "1": 35}}}
    s.apply("status", b"job", json.dumps(status).encode(), T0)
    s.observe_offsets(100.0, {"readings": {0: (0, 50), 1: (0, 40)}, "aggregates": {0: (0, 10)}, "dlq": {0: (2, 7)}})
    assert s.refresh(T0 + 1000)
    s.observe_offsets(102.0, {"readings": {0: (0, 70), 1: (0, 50)}, "aggregates": {0: (0, 20)}, "dlq": {0: (2, 7)}})
    assert s.refresh(T0 + 3000)
    assert not s.refresh(T0 + 3000)  # nothing new: no change to announce
    snap = s.snapshot()
    assert snap["health"] == {"ingest_rate": 15.0, "throughput": 20.0, "lag": 45, "readings_end_offset": 120}
    assert snap["dlq"]["count"] == 5
    assert snap["job"]["state"] == "running" and snap["job"]["status"]["input_rows_per_second"] is None
    assert s.refresh(T0 + 31_000)  # the status is now too old
    assert s.snapshot()["job"]["state"] == "not_running"
    s.set_broker("unreachable", "Connection refused")
    assert s.refresh(T0 + 32_000)
    snap = s.snapshot()
    assert snap["broker"] == {"state": "unreachable", "error": "Connection refused"}
    assert snap["health"]["ingest_rate"] is None  # no rate across an outage


def test_categories_line_up_with_the_aqi_table() -> None:
    cats = categories()
    assert [c["name"] for c in cats] == list(CATEGORY_COLORS)
    assert [(c["aqi_low"], c["aqi_high"]) for c in cats] == [(0, 50), (51, 100), (101, 150), (151, 200),
                                                             (201, 300), (301, 500)]
    assert cats[3]["color"] == "#ff0000" and cats[5]["pm25_high"] == 325.4


def test_live_state_versions_and_waits() -> None:
    clock = [T0]
    live = LiveState(PipelineState(), clock_ms=lambda: clock[0])
    v0, body0 = live.payload()
    assert live.payload()[1] is body0  # rendered once per version
    live.update(lambda s: s.apply("aggregates", None, agg("city_1m", "Lima", T0, 12), T0))
    assert live.wait_newer(v0, 0)
    v1, _ = live.payload()
    live.update(lambda s: False)  # nothing changed
    assert live.payload()[0] == v1 and not live.wait_newer(v1, 0)
    assert live.wait_until(lambda snap: snap["cities"][0]["city"] == "Lima", 0)["version"] == v1
    with pytest.raises(TimeoutError):
        live.wait_until(lambda snap: False, 0.05)
    clock[0] += 60_000  # time alone can change the snapshot: a status ages out
    live.update(lambda s: s.apply("status", b"job", json.dumps({"ts": T0 + 60_000}).encode(), T0))
    clock[0] += 31_000
    live.update(lambda s: False)
    assert live.snapshot()["job"]["state"] == "not_running"
