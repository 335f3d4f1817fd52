"""The dashboard's in-memory picture of the pipeline, built from the records of its topics.

One writer (the reader thread) feeds it records (`apply`), end-offset samples (`observe_offsets`)
and broker reachability (`set_broker`), and calls `refresh(now_ms)` to recompute the health
figures; `snapshot()` renders everything as the JSON-ready dict served at /api/state and over
/events. No I/O, no threads, no clock of its own: times are arguments, so tests feed it tables.

What is kept (record formats: `samsa.pipeline.contract`):

* city_1m windows per city for the last `series_minutes` of event time, counted back from the
  newest city_1m window seen; a window re-emitted (same city and window_start) replaces the
  earlier record, as the Spark job re-emits windows it updates;
* the newest city_5m window per city and the newest sensor_1m window per sensor, with the
  sensor's position taken from the aggregate if it has one, else from its readings;
* the `max_alerts` alerts with the newest windows (one per city and window);
* the newest `pipeline_status`, the `max_dlq` latest dead letters, end offsets of every topic.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import asdict, dataclass, fields
from typing import Any

from samsa.pipeline import aqi, contract
from samsa.pipeline.dashboard import health

# US EPA colours of the AQI categories (names as in `aqi.CATEGORIES`).
CATEGORY_COLORS = {
    "Good": "#00e400",
    "Moderate": "#ffff00",
    "Unhealthy for Sensitive Groups": "#ff7e00",
    "Unhealthy": "#ff0000",
    "Very Unhealthy": "#8f3f97",
    "Hazardous": "#7e0023",
}
_RAW_PREVIEW_CHARS = 200


@dataclass(frozen=True)
class PipelineTopics:
    """The topic of each role; defaults are the contract's names."""

    readings: str = contract.READINGS
    raw_http: str = contract.RAW_HTTP
    aggregates: str = contract.AGGREGATES
    alerts: str = contract.ALERTS
    status: str = contract.STATUS
    dlq: str = contract.DLQ

    def roles(self) -> dict[str, str]:
        """topic name -> role (the field name)."""
        return {getattr(self, f.name): f.name for f in fields(self)}

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def categories() -> list[dict[str, Any]]:
    """The AQI categories with their index and PM2.5 ranges and colours, for the page's bands."""
    out = []
    lows = [low for low, _ in aqi.CATEGORIES]
    for i, (low, name) in enumerate(aqi.CATEGORIES):
        high = lows[i + 1] - 1 if i + 1 < len(lows) else 500
        pm_low, pm_high = aqi.PM25[i][0], aqi.PM25[i][1]
        out.append({"name": name, "aqi_low": low, "aqi_high": high, "pm25_low": pm_low, "pm25_high": pm_high,
                    "color": CATEGORY_COLORS[name]})
    return out


def _category_of(rec: dict[str, Any], index: int) -> str:
    name = rec.get("category")
    return name if isinstance(name, str) and name in CATEGORY_COLORS else aqi.category(index)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    return float(value)


def _finite(obj: Any) -> Any:
    """`obj` with NaN and infinities (which JSON.parse rejects) replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _window(rec: dict[str, Any]) -> dict[str, Any]:
    """The fields of an aggregate or alert the page shows; raises on a malformed record."""
    value = _number(rec["aqi"])
    if value is None:
        raise ValueError("aqi is null")
    index = round(value)
    name = _category_of(rec, index)
    start = int(rec["window_start"])
    end = rec.get("window_end")
    return {
        "city": str(rec["city"]),
        "window_start": start,
        "window_end": int(end) if end is not None else None,
        "aqi": index,
        "category": name,
        "color": CATEGORY_COLORS[name],
        "pm25": _number(rec.get("pm25_avg")),
    }


class PipelineState:
    def __init__(
        self,
        topics: PipelineTopics | None = None,
        *,
        job_timeout_s: float = 30.0,
        job_start_timeout_s: float | None = 120.0,
        job_started_ms: int | None = None,
        series_minutes: float = 60.0,
        max_alerts: int = 50,
        max_dlq: int = 10,
        rate_window_s: float = 5.0,
    ) -> None:
        """`job_timeout_s`: a job whose last status is older is not running. Until its first status
        the job is starting, for `job_start_timeout_s` (None: as long as it takes) from
        `job_started_ms` when the caller started the job then (status records from before are an
        earlier run's), else from the first `refresh`."""
        self.topics = topics or PipelineTopics()
        self.job_timeout_s = job_timeout_s
        self.job_start_timeout_s = job_start_timeout_s
        self.job_started_ms = job_started_ms
        self._watching_since_ms: int | None = None
        self._output_ms: int | None = None  # the newest window or alert record's timestamp
        self.series_ms = int(series_minutes * 60_000)
        self.max_alerts = max_alerts
        self.rate_window_s = rate_window_s
        self._city_1m: dict[str, dict[int, dict[str, Any]]] = {}
        self._newest_1m: int | None = None
        self._city_5m: dict[str, dict[str, Any]] = {}
        self._sensors: dict[str, dict[str, Any]] = {}
        self._positions: dict[str, tuple[float, float]] = {}
        self._alerts: dict[tuple[str, int], dict[str, Any]] = {}
        self._status: dict[str, Any] | None = None
        self._status_ms: int | None = None
        self._dlq: deque[dict[str, Any]] = deque(maxlen=max_dlq)
        self._end_offsets: dict[str, dict[int, tuple[int, int]]] = {}
        self._samples: deque[tuple[float, int, int]] = deque()
        self._broker: dict[str, Any] = {"state": "connecting", "error": None}
        self._ignored = 0
        self._now_ms = 0
        self._health: dict[str, Any] = {}

    # -- records ---------------------------------------------------------------------------

    def knows_position(self, sensor_id: str) -> bool:
        return sensor_id in self._positions

    def apply(self, role: str, key: bytes | None, value: bytes | None, ts_ms: int) -> bool:
        """Take one record of the topic with role `role`; True if the snapshot changed."""
        if role == "readings":
            return self._apply_reading(key, value)
        if role not in ("aggregates", "alerts", "status", "dlq"):
            return False
        try:
            rec = json.loads(value or b"")
            if not isinstance(rec, dict):
                raise TypeError("not a JSON object")
            if role in ("aggregates", "alerts"):  # the job's output: it is at work
                self._output_ms = ts_ms if self._output_ms is None else max(self._output_ms, ts_ms)
            if role == "aggregates":
                return self._apply_aggregate(rec)
            if role == "alerts":
                return self._apply_alert(rec)
            if role == "status":
                return self._apply_status(rec, ts_ms)
            return self._apply_dlq(rec, key, ts_ms)
        except (ValueError, TypeError, KeyError):
            self._ignored += 1
            return True

    def _apply_reading(self, key: bytes | None, value: bytes | None) -> bool:
        sensor = key.decode("utf-8", "replace") if key else None
        if sensor is not None and sensor in self._positions:
            return False  # the common case: a sensor we already placed, not worth parsing
        try:
            rec = json.loads(value or b"")
            sensor = str(rec.get("sensor_id") or sensor)
            lat, lon = _number(rec["lat"]), _number(rec["lon"])
        except (ValueError, TypeError, KeyError, AttributeError):
            return False  # the Spark job sends bad readings to the DLQ; not ours to count
        if lat is None or lon is None:
            return False
        self._positions[sensor] = (lat, lon)
        return sensor in self._sensors

    def _apply_aggregate(self, rec: dict[str, Any]) -> bool:
        kind = rec["kind"]
        point = _window(rec)
        point["count"] = rec.get("count")
        point["pm25_max"] = _number(rec.get("pm25_max"))
        city, start = point["city"], point["window_start"]
        if kind == "city_1m":
            if self._newest_1m is not None and start < self._newest_1m - self.series_ms:
                return False
            self._city_1m.setdefault(city, {})[start] = point
            if self._newest_1m is None or start > self._newest_1m:
                self._newest_1m = start
                self._prune_series()
            return True
        if kind == "city_5m":
            return self._keep_newest(self._city_5m, city, point)
        if kind == "sensor_1m":
            point["sensor_id"] = str(rec["sensor_id"])
            lat, lon = _number(rec.get("lat")), _number(rec.get("lon"))
            if lat is not None and lon is not None:
                self._positions[point["sensor_id"]] = (lat, lon)
            return self._keep_newest(self._sensors, point["sensor_id"], point)
        if kind == "sensor_5m":
            return False  # stored and on the topic; the page shows sensors' latest minute
        raise ValueError(f"unknown aggregate kind {kind!r}")

    @staticmethod
    def _keep_newest(table: dict[str, dict[str, Any]], key: str, point: dict[str, Any]) -> bool:
        current = table.get(key)
        if current is not None and point["window_start"] < current["window_start"]:
            return False
        table[key] = point
        return True

    def _prune_series(self) -> None:
        assert self._newest_1m is not None
        oldest = self._newest_1m - self.series_ms
        for city, windows in list(self._city_1m.items()):
            for start in [s for s in windows if s < oldest]:
                del windows[start]
            if not windows:
                del self._city_1m[city]

    def _apply_alert(self, rec: dict[str, Any]) -> bool:
        alert = _window(rec)
        threshold = rec.get("threshold")
        alert["threshold"] = int(threshold) if threshold is not None else None
        key = (alert["city"], alert["window_start"])
        if key not in self._alerts and len(self._alerts) >= self.max_alerts:
            oldest = min(self._alerts, key=lambda k: k[1])
            if key[1] <= oldest[1]:
                return False
            del self._alerts[oldest]
        self._alerts[key] = alert
        return True

    def _apply_status(self, rec: dict[str, Any], ts_ms: int) -> bool:
        ts = rec.get("ts")
        status_ms = int(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else ts_ms
        if self._status_ms is not None and status_ms < self._status_ms:
            return False
        self._status, self._status_ms = _finite(rec), status_ms
        return True

    def _apply_dlq(self, rec: dict[str, Any], key: bytes | None, ts_ms: int) -> bool:
        raw = rec.get("raw")
        self._dlq.append({
            "reason": str(rec.get("reason", "?")),
            "topic": rec.get("topic"),
            "partition": rec.get("partition"),
            "offset": rec.get("offset"),
            "key": key.decode("utf-8", "replace") if key else None,
            "raw": raw[:_RAW_PREVIEW_CHARS] if isinstance(raw, str) else None,
            "ts": ts_ms,
        })
        return True

    # -- offsets, broker, health -------------------------------------------------------------

    def observe_offsets(self, now_s: float, offsets: dict[str, dict[int, tuple[int, int]]]) -> None:
        """A sample of (log start, log end) offsets per partition of each role's topic that exists."""
        self._end_offsets = offsets
        readings = sum(high for _, high in offsets.get("readings", {}).values())
        everything = sum(high for parts in offsets.values() for _, high in parts.values())
        self._samples.append((now_s, readings, everything))
        while len(self._samples) > 2 and self._samples[1][0] <= now_s - self.rate_window_s:
            self._samples.popleft()

    def set_broker(self, state: str, error: str | None = None) -> None:
        """"ok", "connecting" or "unreachable" (with the client's reason)."""
        self._broker = {"state": state, "error": error}
        if state != "ok":
            self._samples.clear()  # no rates from before an outage

    def refresh(self, now_ms: int) -> bool:
        """Recompute the health figures at `now_ms`; True if they changed."""
        self._now_ms = now_ms
        if self._watching_since_ms is None:
            self._watching_since_ms = now_ms
        state, reason = health.job_state(
            self._status_ms, now_ms, self.job_timeout_s, last_output_ms=self._output_ms,
            job_started_ms=self.job_started_ms, watching_since_ms=self._watching_since_ms,
            start_timeout_s=self.job_start_timeout_s)
        readings = self._end_offsets.get("readings")
        processed = None
        if self._status is not None:
            offsets = self._status.get("end_offsets")
            part = offsets.get(self.topics.readings) if isinstance(offsets, dict) else None
            processed = {str(k): int(v) for k, v in part.items()} if isinstance(part, dict) else None
        dlq = self._end_offsets.get("dlq")
        new = {
            "broker": dict(self._broker),
            "job": {"state": state, "reason": reason, "last_status_ts": self._status_ms,
                    "timeout_s": self.job_timeout_s},
            "ingest_rate": health.rate([(t, n) for t, n, _ in self._samples]),
            "throughput": health.rate([(t, n) for t, _, n in self._samples]),
            "lag": health.lag({p: high for p, (_, high) in readings.items()} if readings else None, processed),
            "readings_end_offset": sum(high for _, high in readings.values()) if readings else None,
            "dlq_count": sum(high - low for low, high in dlq.values()) if dlq is not None else None,
        }
        changed = new != self._health
        self._health = new
        return changed

    # -- rendering ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        h = self._health
        newest = self._newest_1m
        oldest = None if newest is None else newest - self.series_ms
        # Cities with a window in the kept hour (5-minute windows count when no 1-minute one came).
        recent_5m = {c: w for c, w in self._city_5m.items() if oldest is None or w["window_start"] >= oldest}
        cities = []
        for city in sorted(set(self._city_1m) | set(recent_5m)):
            series = [self._city_1m[city][s] for s in sorted(self._city_1m.get(city, {}))]
            latest = series[-1] if series else None
            cities.append({"city": city, "latest": latest, "latest_5m": recent_5m.get(city),
                           "series": [{k: p[k] for k in ("window_start", "window_end", "aqi", "pm25", "category")}
                                      for p in series]})
        sensors = []
        for sid, point in sorted(self._sensors.items(), key=lambda kv: (kv[1]["city"], kv[0])):
            lat, lon = self._positions.get(sid, (None, None))
            sensors.append({**point, "lat": lat, "lon": lon})
        alerts = sorted(self._alerts.values(), key=lambda a: (a["window_start"], a["city"]), reverse=True)
        return {
            "updated_at": self._now_ms,
            "topics": self.topics.as_dict(),
            "broker": h.get("broker", dict(self._broker)),
            "job": {**h.get("job", {}), "status": self._status},
            "health": {k: h.get(k) for k in ("ingest_rate", "throughput", "lag", "readings_end_offset")},
            "series_window": None if newest is None else {"from": newest - self.series_ms, "to": newest},
            "cities": cities,
            "sensors": sensors,
            "alerts": alerts,
            "dlq": {"count": h.get("dlq_count"), "latest": list(reversed(self._dlq))},
            "categories": categories(),
            "ignored_records": self._ignored,
        }
