"""City windows combined from sensor windows equal grouping the readings directly."""

from __future__ import annotations

import random
from typing import Any

from samsa.pipeline.windows import FIELDS, MINUTE, CityWindows


def sensor_windows(readings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in readings:
        groups.setdefault((r["sensor_id"], r["ts"] - r["ts"] % MINUTE), []).append(r)
    out = []
    for (sensor, minute), rs in groups.items():
        w = {"sensor_id": sensor, "city": rs[0]["city"], "window_start": minute, "count": len(rs),
             "last_event_ts": max(r["ts"] for r in rs), "lat": 1.0, "lon": 2.0,
             "pm25_max": max(r["pm25"] for r in rs), "pm10_max": max(r["pm10"] for r in rs)}
        for f in FIELDS:
            values = [r[f] for r in rs if r[f] is not None]
            w[f"{f}_sum"], w[f"{f}_n"] = (sum(values) if values else None), len(values)
        out.append(w)
    return out


def readings(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"sensor_id": f"s{rnd.randint(1, 6)}", "city": "", "ts": rnd.randrange(10 * MINUTE),
             "pm25": rnd.uniform(0, 90), "pm10": rnd.uniform(0, 150),
             "no2": rnd.choice([None, rnd.uniform(0, 50)]), "o3": rnd.uniform(0, 80), "temperature": None}
            for _ in range(n)]


def with_city(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rs:
        r["city"] = "A" if r["sensor_id"] in ("s1", "s2", "s3") else "B"
    return rs


def test_city_windows_equal_direct_grouping_across_batches_and_refinements() -> None:
    first, second = with_city(readings(300, 1)), with_city(readings(200, 2))
    cw = CityWindows()
    emitted: dict[tuple[str, str, int], dict[str, Any]] = {}
    for w in cw.update(sensor_windows(first)):
        emitted[(w["kind"], w["key"], w["window_start"])] = w
    # the second batch re-emits sensor windows refined with more readings (update mode)
    touched = {(r["sensor_id"], r["ts"] - r["ts"] % MINUTE) for r in second}
    refined = [w for w in sensor_windows(first + second) if (w["sensor_id"], w["window_start"]) in touched]
    for w in cw.update(refined):
        emitted[(w["kind"], w["key"], w["window_start"])] = w

    everything = first + second
    for (kind, key, start), w in emitted.items():
        length = MINUTE if kind == "city_1m" else 5 * MINUTE
        field = "sensor_id" if kind == "sensor_5m" else "city"
        rs = [r for r in everything if r[field] == key and start <= r["ts"] < start + length]
        assert w["count"] == len(rs) and w["window_end"] == start + length
        assert abs(w["pm25_avg"] - sum(r["pm25"] for r in rs) / len(rs)) < 1e-9
        assert w["pm10_max"] == max(r["pm10"] for r in rs)
        no2 = [r["no2"] for r in rs if r["no2"] is not None]
        assert (w["no2_avg"] is None) == (not no2)
        if no2:
            assert abs(w["no2_avg"] - sum(no2) / len(no2)) < 1e-9
        assert w["temperature_avg"] is None
    minutes = {r["ts"] - r["ts"] % MINUTE for r in everything}
    assert {(c, s) for k, c, s in emitted if k == "city_1m"} == {(r["city"], r["ts"] - r["ts"] % MINUTE)
                                                                 for r in everything}
    assert {s for k, _, s in emitted if k == "city_5m"} == {m - k * MINUTE for m in minutes for k in range(5)}
    assert {(key, s) for k, key, s in emitted if k == "sensor_5m"} == {
        (r["sensor_id"], r["ts"] - r["ts"] % MINUTE - k * MINUTE) for r in everything for k in range(5)}


def test_load_restores_the_state_a_restart_needs() -> None:
    rs = with_city(readings(300, 3))
    a, b = CityWindows(), CityWindows()
    a.update(sensor_windows(rs[:200]))
    b.load(sensor_windows(rs[:200]))
    later = sensor_windows(rs[200:])
    assert a.update(later) == b.update(later)


def test_old_minutes_are_forgotten() -> None:
    cw = CityWindows(keep_ms=5 * MINUTE)
    cw.update([{"sensor_id": "s", "city": "A", "window_start": 0, "count": 1, "last_event_ts": 0,
                **{f"{f}_sum": 1.0 for f in FIELDS}, **{f"{f}_n": 1 for f in FIELDS}, "pm25_max": 1.0,
                "pm10_max": 1.0}])
    cw.update([{"sensor_id": "s", "city": "A", "window_start": 60 * MINUTE, "count": 1, "last_event_ts": 0,
                **{f"{f}_sum": 1.0 for f in FIELDS}, **{f"{f}_n": 1 for f in FIELDS}, "pm25_max": 1.0,
                "pm10_max": 1.0}])
    assert list(cw.minutes) == [("A", 60 * MINUTE)]
