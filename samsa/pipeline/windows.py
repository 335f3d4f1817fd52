"""City windows and sliding windows from sensor minutes: the second level of the job's
two-level aggregation.

Spark's stateful step computes one window per (sensor, minute) — count, per pollutant the sum
and number of values, and the maxima — with the watermark. A city's 1-minute window is the
combination of its sensors' windows of that minute, and a city's or a sensor's 5-minute
sliding window (1-minute slide) the combination of five consecutive minutes: sums add up, counts add up, maxima take
the maximum, so the result is exactly what grouping the readings would give. Doing this second
level here, on a few hundred rows per micro-batch, keeps Spark's work at one state row per
reading instead of seven.

`CityWindows` keeps the latest sensor windows of the recent minutes (a sensor window that is
emitted again, refined by late readings, replaces the earlier one) and, for the sensor
windows of a micro-batch, returns every city and sliding window they change. After a restart it is
refilled from the stored window updates (`load`), so the next batch continues from the same
numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FIELDS = ("pm25", "pm10", "no2", "o3", "temperature")
MAXIMA = ("pm25", "pm10")
MINUTE = 60_000
SLIDING = 5  # minutes in the sliding window


def combine(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One window from windows over disjoint readings (each with count, <f>_sum, <f>_n,
    <f>_max, last_event_ts, lat, lon)."""
    parts = list(parts)
    out: dict[str, Any] = {"count": sum(p["count"] for p in parts)}
    for f in FIELDS:
        n = sum(p[f"{f}_n"] for p in parts)
        total = sum(p[f"{f}_sum"] for p in parts if p[f"{f}_n"])
        out[f"{f}_n"] = n
        out[f"{f}_sum"] = total
        out[f"{f}_avg"] = total / n if n else None
    for f in MAXIMA:
        values = [p[f"{f}_max"] for p in parts if p[f"{f}_max"] is not None]
        out[f"{f}_max"] = max(values) if values else None
    out["last_event_ts"] = max(p["last_event_ts"] for p in parts)
    located = [p for p in parts if p.get("lat") is not None and p.get("lon") is not None]
    out["lat"] = sum(p["lat"] for p in located) / len(located) if located else None
    out["lon"] = sum(p["lon"] for p in located) / len(located) if located else None
    return out


class CityWindows:
    def __init__(self, keep_ms: int = 30 * MINUTE) -> None:
        self.keep_ms = keep_ms
        # (city, minute start) -> sensor id -> that sensor's window of that minute
        self.minutes: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
        self.newest = 0

    def load(self, sensor_windows: Iterable[dict[str, Any]]) -> None:
        """Refill from stored sensor windows (in the order they were written)."""
        for w in sensor_windows:
            self._put(w)
        self._forget()

    def update(self, sensor_windows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Take a micro-batch's sensor windows; return the city windows they change."""
        touched: set[tuple[str, int]] = set()
        sensors: set[tuple[str, str, int]] = set()
        for w in sensor_windows:
            self._put(w)
            touched.add((w["city"], w["window_start"]))
            sensors.add((w["city"], w["sensor_id"], w["window_start"]))
        out = []
        for city, minute in sorted(touched):
            out.append(self._window("city_1m", city, minute, 1))
        starts = {(city, minute - k * MINUTE) for city, minute in touched for k in range(SLIDING)}
        for city, start in sorted(starts):
            out.append(self._window("city_5m", city, start, SLIDING))
        sensor_starts = {(city, sensor, minute - k * MINUTE) for city, sensor, minute in sensors
                         for k in range(SLIDING)}
        for city, sensor, start in sorted(sensor_starts):
            out.append(self._window("sensor_5m", city, start, SLIDING, sensor))
        self._forget()
        return [w for w in out if w is not None]

    def _put(self, w: dict[str, Any]) -> None:
        self.minutes.setdefault((w["city"], w["window_start"]), {})[w["sensor_id"]] = w
        self.newest = max(self.newest, w["window_start"])

    def _window(self, kind: str, city: str, start: int, minutes: int, sensor: str | None = None
                ) -> dict[str, Any] | None:
        """The window of `city` (or of one `sensor` in it) over `minutes` minutes from `start`."""
        cells = [self.minutes.get((city, start + m * MINUTE), {}) for m in range(minutes)]
        parts = [w for cell in cells for s, w in cell.items() if sensor is None or s == sensor]
        if not parts:
            return None
        return {"kind": kind, "key": sensor or city, "city": city, "sensor_id": sensor, "window_start": start,
                "window_end": start + minutes * MINUTE, **combine(parts)}

    def _forget(self) -> None:
        oldest = self.newest - self.keep_ms
        for key in [k for k in self.minutes if k[1] < oldest]:
            del self.minutes[key]
