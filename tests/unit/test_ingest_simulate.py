"""The sensor fleet's generator: contract JSON, fault ratios, the model's shape, determinism."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import numpy as np
import pytest

from samsa.pipeline import aqi
from samsa.pipeline.contract import POLLUTANTS, READING_FIELDS
from samsa.pipeline.ingest import simulate
from samsa.pipeline.ingest.simulate import DEFAULT_CITIES, City, ReadingGenerator, Simulator, parse_cities, sensor_ids

T0 = 1_795_000_000_000  # ms
HOUR_MS = 3_600_000


def classify(value: str, sent_ms: float) -> str:
    """The fault a reading carries, judged from its text alone: what the Spark job will do."""
    try:
        r = json.loads(value)
    except json.JSONDecodeError:
        return "malformed JSON"
    if any(f not in r for f in READING_FIELDS):
        return "missing field"
    if any(r[p] < 0 for p in POLLUTANTS):
        return "negative concentration"
    if r["ts"] > sent_ms + 60_000:
        return "timestamp in the future"
    if r["ts"] < sent_ms - 4_000:
        return "late"
    return "ok"


def draw(
    g: ReadingGenerator, chunks: int, n: int, start_ms: int = T0, step_ms: float = 1.0
) -> list[tuple[bytes, str, float]]:
    out = []
    for c in range(chunks):
        t = start_ms + c * n * step_ms
        keys, values = g.chunk(n, t, step_ms)
        out += [(k, v, t + i * step_ms) for i, (k, v) in enumerate(zip(keys, values))]
    return out


def test_readings_follow_the_contract_and_are_keyed_by_sensor_id() -> None:
    g = ReadingGenerator(seed=3, late_ratio=0, bad_ratio=0)
    rows = draw(g, 10, 500)
    ids = set(sensor_ids(DEFAULT_CITIES, 50))
    by_city: dict[str, set[str]] = {}
    for key, value, sent in rows:
        r = json.loads(value)
        assert list(r) == list(READING_FIELDS)
        assert key == r["sensor_id"].encode() and r["sensor_id"] in ids
        assert isinstance(r["ts"], int) and abs(r["ts"] - sent) <= 1
        assert all(isinstance(r[p], float) and 0 <= r[p] < 2000 for p in POLLUTANTS)
        assert -60 < r["temperature"] < 60
        city = next(c for c in DEFAULT_CITIES if c.name == r["city"])
        assert abs(r["lat"] - city.lat) < 0.05 and abs(r["lon"] - city.lon) < 0.07
        by_city.setdefault(r["city"], set()).add(r["sensor_id"])
    assert len(by_city) == 8 and sum(len(s) for s in by_city.values()) == 50
    assert Counter(k for k, _, _ in rows) == dict.fromkeys((i.encode() for i in ids), 100)  # round-robin


@pytest.mark.parametrize("late_ratio,bad_ratio", [(0.02, 0.005), (0.1, 0.05), (0.0, 0.0)])
def test_late_and_bad_readings_come_at_the_asked_ratios(late_ratio: float, bad_ratio: float) -> None:
    g = ReadingGenerator(seed=11, late_ratio=late_ratio, bad_ratio=bad_ratio)
    n = 50_000
    kinds = Counter(classify(v, sent) for _, v, sent in draw(g, 50, n // 50))
    bad = n - kinds["ok"] - kinds["late"]
    # ± 5 binomial standard deviations (+ a little): fails only if the ratio is wrong.
    for observed, p in ((kinds["late"], late_ratio * (1 - bad_ratio)), (bad, bad_ratio)):
        sd = (n * p * (1 - p)) ** 0.5
        assert abs(observed - n * p) <= 5 * sd + 2, (observed, n * p, kinds)
    if bad_ratio:
        for kind in simulate.BAD_KINDS:  # every kind of fault, in roughly equal shares
            assert kinds[kind] > bad / 8, kinds


def test_late_readings_are_5_to_90_seconds_old_and_out_of_order() -> None:
    g = ReadingGenerator(seed=5, late_ratio=0.2, bad_ratio=0)
    rows = draw(g, 20, 1000)
    ages = [sent - json.loads(v)["ts"] for _, v, sent in rows if classify(v, sent) == "late"]
    assert ages and min(ages) >= 5_000 and max(ages) <= 90_000
    ts = [json.loads(v)["ts"] for _, v, _ in rows]
    assert any(b < a for a, b in zip(ts, ts[1:]))


def test_the_same_seed_gives_the_same_readings() -> None:
    a = draw(ReadingGenerator(seed=9, episodes_per_hour=30), 5, 300)
    b = draw(ReadingGenerator(seed=9, episodes_per_hour=30), 5, 300)
    c = draw(ReadingGenerator(seed=10, episodes_per_hour=30), 5, 300)
    assert a == b and a != c


def mean_pm25(g: ReadingGenerator, city: str, start_ms: int, seconds: int = 60) -> float:
    values = []
    for s in range(seconds):
        _, vals = g.chunk(len(g.ids), start_ms + s * 1000, 0)
        values += [r["pm25"] for r in map(json.loads, vals) if r["city"] == city]
    return float(np.mean(values))


def test_rush_hour_is_dirtier_than_the_small_hours() -> None:
    paris = next(c for c in DEFAULT_CITIES if c.name == "Paris")
    g = ReadingGenerator([paris], 5, seed=1, late_ratio=0, bad_ratio=0, episodes_per_hour=0)
    day = T0 - T0 % (24 * HOUR_MS)  # midnight UTC; Paris is UTC+1
    night = mean_pm25(g, "Paris", day + 3 * HOUR_MS)  # 04:00 local
    rush = mean_pm25(g, "Paris", day + 7 * HOUR_MS + HOUR_MS // 2)  # 08:30 local
    assert rush > 1.6 * night
    assert 0.4 * paris.pm25 < night < paris.pm25


def test_cities_range_from_clean_to_polluted() -> None:
    g = ReadingGenerator(seed=2, late_ratio=0, bad_ratio=0, episodes_per_hour=0)
    means = {c.name: mean_pm25(g, c.name, T0, 20) for c in DEFAULT_CITIES}
    assert aqi.aqi_pm25(means["Reykjavik"]) <= 50  # Good
    assert aqi.aqi_pm25(means["Delhi"]) > 100  # unhealthy for sensitive groups at least
    assert len(DEFAULT_CITIES) == 8


def test_an_episode_multiplies_pm_and_ramps_back() -> None:
    e = simulate._Episode(0.0, 300_000.0, 5.0)
    ramp = simulate.EPISODE_RAMP_S * 1000
    assert [e.factor(t) for t in (-1, 0, ramp / 2, ramp, 150_000, 300_000 - ramp / 2, 300_000)] == [
        1.0, 1.0, 3.0, 5.0, 5.0, 3.0, 1.0
    ]


def test_episodes_come_at_the_asked_frequency_and_push_cities_past_aqi_151() -> None:
    g = ReadingGenerator(seed=4, late_ratio=0, bad_ratio=0, episodes_per_hour=3)
    for minute in range(10 * 60):  # ten hours of event time, a small chunk per minute
        g.chunk(8, T0 + minute * 60_000, 0)
    per_city_hour = len(g.episode_log) / len(DEFAULT_CITIES) / 10
    assert 1.8 < per_city_hour < 4.2, g.episode_log
    assert all(3 <= peak <= 8 and 2 * 60_000 <= end - start <= 6 * 60_000 for _, start, end, peak in g.episode_log)


def test_a_two_minute_demo_usually_shows_an_unhealthy_city() -> None:
    unhealthy = 0
    starts = np.random.default_rng(0).integers(0, 24 * HOUR_MS, 12)
    for seed, start in enumerate(starts.tolist()):
        g = ReadingGenerator(seed=seed, late_ratio=0, bad_ratio=0)
        pm: dict[tuple[str, int], list[float]] = {}
        for s in range(120):
            for v in g.chunk(50, T0 + start + s * 1000, 20)[1]:
                r = json.loads(v)
                pm.setdefault((r["city"], s // 60), []).append(r["pm25"])
        if any(aqi.aqi_pm25(float(np.mean(x))) >= aqi.ALERT_THRESHOLD for x in pm.values()):
            unhealthy += 1
    assert unhealthy >= 8, f"only {unhealthy} of 12 two-minute runs reached AQI 151"


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("paris, DELHI", ["Paris", "Delhi"]),
        ("Oslo:59.91:10.75:1:6", ["Oslo"]),
        ("Oslo:59.91:10.75:1:6:7.5,reykjavik", ["Oslo", "Reykjavik"]),
    ],
)
def test_parse_cities(spec: str, expected: list[str]) -> None:
    cities = parse_cities(spec)
    assert [c.name for c in cities] == expected
    if cities[0].name == "Oslo":
        assert cities[0] == City("Oslo", 59.91, 10.75, 1.0, 6.0, *([7.5] if ":7.5" in spec else []))


@pytest.mark.parametrize("spec", ["Atlantis", "Oslo:1:2", "Oslo:a:b:c:d", "Oslo:95:0:0:5", ",", "Oslo:1:2:0:-3"])
def test_parse_cities_rejects(spec: str) -> None:
    with pytest.raises(ValueError):
        parse_cities(spec)


def test_sensor_ids_are_spread_over_cities() -> None:
    ids = sensor_ids(DEFAULT_CITIES[:3], 7)
    assert ids == ["reykjavik-001", "sydney-001", "new-york-001", "reykjavik-002", "sydney-002", "new-york-002",
                   "reykjavik-003"]


class CountingSender:
    def __init__(self) -> None:
        self.n = 0
        self.flushed = False

    def send_batch(self, topic: str, keys: list[Any], values: list[Any]) -> None:
        assert len(keys) == len(values)
        self.n += len(values)

    def poll(self, timeout: float = 0.0) -> None:
        pass

    def flush(self, timeout: float) -> int:
        self.flushed = True
        return 0

    def outstanding(self) -> int:
        return 0

    def stats(self) -> Any:
        from samsa.pipeline.ingest.producer import ProducerStats

        return ProducerStats(self.n, self.n, 0, 0, 0)


def test_simulator_paces_to_the_rate_and_stops_on_duration() -> None:
    sender = CountingSender()
    sim = Simulator("unused", rate=4000, duration=0.5, seed=1, producer=sender)  # type: ignore[arg-type]
    sim.run(threading.Event())
    assert sender.n == sim.generated == 2000 and sender.flushed
    st = sim.stats()
    assert 0.45 <= st["elapsed_s"] < 2.0
    assert (st["generated"], st["acked"], st["failed"], st["skipped"]) == (2000, 2000, 0, 0)
    assert 1000 < st["rate"] <= 4400


def test_simulator_stops_when_told() -> None:
    sender = CountingSender()
    sim = Simulator("unused", rate=1000, seed=1, producer=sender)  # type: ignore[arg-type]
    stop = threading.Event()
    t = threading.Thread(target=sim.run, args=(stop,))
    t.start()
    stop.set()
    t.join(5)
    assert not t.is_alive() and sender.flushed
