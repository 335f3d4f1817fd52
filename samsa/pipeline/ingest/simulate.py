"""A simulated fleet of air-quality sensors writing `sensor_readings` (contract.py), keyed by sensor id.

How it works:

* **Model.** Sensors are spread round-robin over cities. A reading's PM2.5 is the city's baseline
  × a diurnal factor of the city's local hour (low at night, peaks at the morning and evening rush)
  × the city's pollution-episode factor × a fixed per-sensor bias × per-reading noise. PM10
  follows PM2.5 plus coarse dust; NO2 follows traffic (rush hours); O3 peaks in the sunny
  afternoon and is eaten by NO2; temperature has a diurnal cycle around the city's mean.
* **Episodes.** Each city starts pollution episodes at random (a Poisson process,
  `episodes_per_hour`); one multiplies PM by a peak of 3–8 for 2–6 minutes, ramping up and
  down, so a polluted city climbs through AQI 151 ("Unhealthy") and back. At start the fleet is
  in its steady state: some cities are already mid-episode.
* **Faults.** `late_ratio` of readings carry an event time 5–90 s in the past (late, out of
  order); `bad_ratio` come from faulty sensors: malformed JSON, a missing field, a negative
  concentration or a timestamp in the future — what the Spark job sends to `pipeline_dlq`.
* **Speed.** `ReadingGenerator.chunk(n, ...)` draws a whole chunk at once with numpy; numbers
  become text by indexing tables of preformatted strings (0.1 steps), and each record is one
  `%` of a per-sensor prefix and those strings. The pacing loop of `Simulator.run` sends a chunk
  every few milliseconds so the rate stays even: about 1.3 µs of Python per record for the
  JSON and 3 µs for librdkafka's produce().
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from samsa.pipeline.contract import POLLUTANTS, READING_FIELDS, READINGS
from samsa.pipeline.ingest.producer import IngestProducer

log = logging.getLogger("samsa.ingest.simulate")


@dataclass(frozen=True)
class City:
    name: str
    lat: float
    lon: float
    utc_offset_h: float  # standard time; daylight saving is ignored
    pm25: float  # baseline PM2.5, µg/m³ (daily mean without episodes)
    temperature: float = 15.0  # mean °C
    no2: float = 30.0  # baseline NO2, µg/m³


# From clean to polluted. Baselines are rough annual means, set so that the dirtiest cities
# hover around AQI 100–150 and an episode pushes most of the others past 151.
DEFAULT_CITIES: tuple[City, ...] = (
    City("Reykjavik", 64.1466, -21.9426, 0.0, 4.0, 5.0, 12.0),
    City("Sydney", -33.8688, 151.2093, 10.0, 7.0, 18.0, 20.0),
    City("New York", 40.7128, -74.0060, -5.0, 9.0, 13.0, 35.0),
    City("Paris", 48.8566, 2.3522, 1.0, 13.0, 12.0, 38.0),
    City("Mexico City", 19.4326, -99.1332, -6.0, 22.0, 17.0, 50.0),
    City("Beijing", 39.9042, 116.4074, 8.0, 35.0, 13.0, 45.0),
    City("Cairo", 30.0444, 31.2357, 2.0, 40.0, 22.0, 55.0),
    City("Delhi", 28.6139, 77.2090, 5.5, 48.0, 25.0, 50.0),
)

# Episode shape: peak factor, length, and ramps at both ends.
EPISODE_PEAK = (3.0, 8.0)
EPISODE_MINUTES = (2.0, 6.0)
EPISODE_RAMP_S = 40.0
# Late readings are this much older than their send time.
LATE_MS = (5_000, 90_000)
# Faulty sensors' future timestamps: this far ahead.
FUTURE_MS = (3_600_000, 86_400_000)
BAD_KINDS = ("malformed JSON", "missing field", "negative concentration", "timestamp in the future")

# Preformatted numbers, one per 0.1 step: concentrations 0.0–2000.0, temperatures -60.0–+60.0.
_CONC_MAX = 20_000
_CONCENTRATION_TEXT = np.array([f"{i / 10:.1f}" for i in range(_CONC_MAX + 1)], dtype=object)
_TEMP_MIN, _TEMP_MAX = -600, 600
_TEMPERATURE_TEXT = np.array([f"{i / 10:.1f}" for i in range(_TEMP_MIN, _TEMP_MAX + 1)], dtype=object)
_RECORD_TAIL = ',"pm25":%s,"pm10":%s,"no2":%s,"o3":%s,"temperature":%s}'


def parse_cities(spec: str) -> tuple[City, ...]:
    """`--cities`: comma-separated names from DEFAULT_CITIES (any case) and/or custom cities
    `NAME:LAT:LON:UTC_OFFSET:PM25[:TEMPERATURE]`. Raises ValueError with a readable message."""
    known = {c.name.lower(): c for c in DEFAULT_CITIES}
    out: list[City] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if ":" not in item:
            if item.lower() not in known:
                names = ", ".join(c.name for c in DEFAULT_CITIES)
                raise ValueError(f"unknown city {item!r}: use one of {names} or NAME:LAT:LON:UTC_OFFSET:PM25")
            out.append(known[item.lower()])
            continue
        parts = item.split(":")
        if len(parts) not in (5, 6) or not parts[0]:
            raise ValueError(f"bad city {item!r}: expected NAME:LAT:LON:UTC_OFFSET:PM25[:TEMPERATURE]")
        try:
            nums = [float(p) for p in parts[1:]]
        except ValueError:
            raise ValueError(f"bad city {item!r}: LAT, LON, UTC_OFFSET, PM25 and TEMPERATURE are numbers") from None
        if not (-90 <= nums[0] <= 90 and -180 <= nums[1] <= 180 and nums[3] >= 0):
            raise ValueError(f"bad city {item!r}: latitude, longitude or PM2.5 out of range")
        out.append(City(parts[0], nums[0], nums[1], nums[2], nums[3], *nums[4:5]))
    if not out:
        raise ValueError("no cities given")
    return tuple(out)


def sensor_ids(cities: Sequence[City], sensors: int) -> list[str]:
    """Sensor i belongs to city i mod len(cities) and is named like "new-york-003"."""
    counts = [0] * len(cities)
    ids = []
    for i in range(sensors):
        c = i % len(cities)
        counts[c] += 1
        slug = re.sub(r"[^a-z0-9]+", "-", cities[c].name.lower()).strip("-") or f"city{c}"
        ids.append(f"{slug}-{counts[c]:03d}")
    return ids


def _diurnal_pm(hour: np.ndarray) -> np.ndarray:
    """PM factor by local hour: ~0.7 before dawn, rush-hour peaks near 1.4 (8:30) and 1.5 (19:00)."""
    return (0.7 + 0.7 * np.exp(-((hour - 8.5) ** 2) / 4.5) + 0.8 * np.exp(-((hour - 19.0) ** 2) / 8.0)
            + 0.15 * np.cos((hour - 14.0) * (math.pi / 12)))


def _traffic(hour: np.ndarray) -> np.ndarray:
    """NO2 factor by local hour: commuting peaks, quiet nights."""
    return 0.45 + 0.9 * np.exp(-((hour - 8.0) ** 2) / 3.0) + 0.8 * np.exp(-((hour - 18.5) ** 2) / 4.0)


def _sun(hour: np.ndarray) -> np.ndarray:
    """O3 factor by local hour: photochemistry, highest mid-afternoon."""
    return 0.35 + 0.9 * np.clip(np.sin((hour - 6.0) * (math.pi / 14)), 0.0, None)


@dataclass
class _Episode:
    start_ms: float
    end_ms: float
    peak: float

    def factor(self, t_ms: float) -> float:
        if not self.start_ms <= t_ms < self.end_ms:
            return 1.0
        ramp = EPISODE_RAMP_S * 1000
        rise = min(1.0, (t_ms - self.start_ms) / ramp, (self.end_ms - t_ms) / ramp)
        return 1.0 + (self.peak - 1.0) * rise


class ReadingGenerator:
    """Draws readings of the fleet, a chunk at a time (see the module comment). Deterministic for a
    seed and the same sequence of `chunk` calls."""

    def __init__(
        self,
        cities: Sequence[City] = DEFAULT_CITIES,
        sensors: int = 50,
        *,
        seed: int | None = None,
        late_ratio: float = 0.02,
        bad_ratio: float = 0.005,
        episodes_per_hour: float = 3.0,
    ) -> None:
        if sensors < 1 or not cities:
            raise ValueError("need at least one sensor and one city")
        if not (0 <= late_ratio <= 1 and 0 <= bad_ratio <= 1):
            raise ValueError("late and bad ratios are between 0 and 1")
        if episodes_per_hour < 0:
            raise ValueError("episodes per hour cannot be negative")
        self.cities = tuple(cities)
        self.late_ratio = late_ratio
        self.bad_ratio = bad_ratio
        self.episodes_per_hour = episodes_per_hour
        self.rng = np.random.default_rng(seed)
        rng = self.rng
        self.ids = sensor_ids(self.cities, sensors)
        self.keys = np.array([s.encode() for s in self.ids], dtype=object)
        self.city_of = np.arange(sensors) % len(self.cities)
        lat = np.array([self.cities[c].lat for c in self.city_of]) + rng.uniform(-0.04, 0.04, sensors)
        lon = np.array([self.cities[c].lon for c in self.city_of]) + rng.uniform(-0.06, 0.06, sensors)
        self.lat, self.lon = np.round(lat, 4), np.round(lon, 4)
        self._prefix = np.array(
            [
                f'{{"sensor_id":{json.dumps(sid)},"city":{json.dumps(self.cities[c].name)},'
                f'"lat":{float(la)!r},"lon":{float(lo)!r},"ts":'
                for sid, c, la, lo in zip(self.ids, self.city_of, self.lat, self.lon)
            ],
            dtype=object,
        )
        self._bias = rng.lognormal(0.0, 0.15, sensors)  # a sensor reads consistently high or low
        self._temp_bias = rng.normal(0.0, 0.6, sensors)
        self._offset_h = np.array([c.utc_offset_h for c in self.cities])
        self._pm25 = np.array([c.pm25 for c in self.cities])
        self._no2 = np.array([c.no2 for c in self.cities])
        self._temp = np.array([c.temperature for c in self.cities])
        self._next_sensor = 0
        self._episodes: list[_Episode | None] = [None] * len(self.cities)
        self._next_episode_ms: list[float] | None = None
        self.episode_log: list[tuple[str, float, float, float]] = []  # (city, start ms, end ms, peak)

    # -- episodes ------------------------------------------------------------------------------

    def _wait_ms(self) -> float:
        if self.episodes_per_hour <= 0:
            return math.inf
        return float(self.rng.exponential(3_600_000 / self.episodes_per_hour))

    def _new_episode(self, city: int, start_ms: float, under_way: bool = False) -> _Episode:
        length = self.rng.uniform(*EPISODE_MINUTES) * 60_000
        e = _Episode(start_ms, start_ms + length, float(self.rng.uniform(*EPISODE_PEAK)))
        if under_way:  # the fleet starts in the middle of it
            elapsed = self.rng.uniform(0, length)
            e.start_ms -= elapsed
            e.end_ms -= elapsed
        self.episode_log.append((self.cities[city].name, e.start_ms, e.end_ms, e.peak))
        log.info("pollution episode in %s: PM x%.1f for %.1f min%s", self.cities[city].name, e.peak, length / 60_000,
                 f" ({(start_ms - e.start_ms) / 60_000:.1f} min under way)" if under_way else "")
        return e

    def _episode_factors(self, t_ms: float) -> np.ndarray:
        if self._next_episode_ms is None:
            # Steady state at start: a city is mid-episode with the share of time episodes take.
            busy = self.episodes_per_hour * sum(EPISODE_MINUTES) / 2 / 60
            self._next_episode_ms = []
            for c in range(len(self.cities)):
                if self.rng.random() < busy / (1 + busy):
                    self._episodes[c] = self._new_episode(c, t_ms, under_way=True)
                self._next_episode_ms.append(t_ms + self._wait_ms())
        factors = np.ones(len(self.cities))
        for c, e in enumerate(self._episodes):
            if (e is None or t_ms >= e.end_ms) and t_ms >= self._next_episode_ms[c]:
                start = max(self._next_episode_ms[c], e.end_ms if e is not None else 0.0)
                e = self._episodes[c] = self._new_episode(c, start)
                self._next_episode_ms[c] = e.end_ms + self._wait_ms()
            if e is not None:
                factors[c] = e.factor(t_ms)
        return factors

    # -- readings ------------------------------------------------------------------------------

    def chunk(self, n: int, start_ms: float, step_ms: float = 0.0) -> tuple[list[bytes], list[str]]:
        """`n` readings whose send times are start_ms, start_ms + step_ms, ...: (keys, JSON values)."""
        rng = self.rng
        sensors = (self._next_sensor + np.arange(n)) % len(self.ids)
        self._next_sensor = (self._next_sensor + n) % len(self.ids)
        city = self.city_of[sensors]
        ts = (start_ms + np.arange(n) * step_ms).astype(np.int64)
        hour = (ts / 3_600_000.0 + self._offset_h[city]) % 24.0
        episode = self._episode_factors(start_ms)[city]

        pm25 = self._pm25[city] * _diurnal_pm(hour) * episode * self._bias[sensors] * rng.lognormal(0.0, 0.12, n)
        pm10 = pm25 * rng.uniform(1.4, 1.9, n) + rng.gamma(2.0, 3.0, n)
        traffic = _traffic(hour)
        no2 = self._no2[city] * traffic * self._bias[sensors] * rng.lognormal(0.0, 0.15, n)
        o3 = 70.0 * _sun(hour) / (0.6 + 0.4 * traffic) * rng.lognormal(0.0, 0.1, n)
        temperature = (self._temp[city] + 5.0 * np.cos((hour - 15.0) * (math.pi / 12))
                       + self._temp_bias[sensors] + rng.normal(0.0, 0.3, n))

        late = np.flatnonzero(rng.random(n) < self.late_ratio)
        if late.size:
            ts[late] -= rng.integers(LATE_MS[0], LATE_MS[1], late.size)

        def conc(x: np.ndarray) -> list[str]:
            text: list[str] = _CONCENTRATION_TEXT[np.clip(np.rint(x * 10), 0, _CONC_MAX).astype(np.intp)].tolist()
            return text

        temp_i = np.clip(np.rint(temperature * 10), _TEMP_MIN, _TEMP_MAX).astype(np.intp) - _TEMP_MIN
        rows = zip(
            self._prefix[sensors].tolist(), ts.tolist(), conc(pm25), conc(pm10), conc(no2), conc(o3),
            _TEMPERATURE_TEXT[temp_i].tolist(),
        )
        fmt = "%s%d" + _RECORD_TAIL
        values = [fmt % r for r in rows]

        bad = np.flatnonzero(rng.random(n) < self.bad_ratio)
        for i in bad.tolist():
            values[i] = self._spoil(values[i])
        return self.keys[sensors].tolist(), values

    def _spoil(self, good: str) -> str:
        """A faulty sensor's version of a reading: one of BAD_KINDS."""
        kind = int(self.rng.integers(len(BAD_KINDS)))
        if kind == 0:
            return good[: int(self.rng.integers(10, len(good) - 1))]  # cut short mid-record
        record = json.loads(good)
        if kind == 1:
            del record[READING_FIELDS[int(self.rng.integers(1, len(READING_FIELDS)))]]
        elif kind == 2:
            record[POLLUTANTS[int(self.rng.integers(len(POLLUTANTS)))]] = round(-self.rng.uniform(0.1, 50.0), 1)
        else:
            record["ts"] += int(self.rng.integers(*FUTURE_MS))
        return json.dumps(record, separators=(",", ":"))


class SimulatorStats(TypedDict):
    """`Simulator.stats()`: a plain dict, so a dashboard or status line can use it as is."""

    elapsed_s: float  # since `run` started (until it stopped)
    generated: int
    skipped: int  # readings not generated because sending fell more than a second behind
    sent: int
    acked: int
    failed: int
    queued: int
    rate: float  # acknowledged readings per second over `elapsed_s`


class Simulator:
    """Sends the fleet's readings to `topic` at `rate` readings/s until `stop` is set (or `duration`).

    `producer` may be given (shared, or a test fake); otherwise one is made for `bootstrap`.
    `wall_clock` gives the event time (epoch seconds); `pace_clock` is monotonic seconds.
    """

    TICK_S = 0.02  # a chunk per tick: 400 readings at 20,000/s
    # Readings not yet generated, or not yet acknowledged, beyond this many seconds' worth: the
    # broker is not keeping up; generating waits (and due readings are skipped) rather than block.
    MAX_BACKLOG_S = 1.0

    def __init__(
        self,
        bootstrap: str,
        *,
        topic: str = READINGS,
        rate: float = 1000.0,
        sensors: int = 50,
        cities: Sequence[City] = DEFAULT_CITIES,
        seed: int | None = None,
        late_ratio: float = 0.02,
        bad_ratio: float = 0.005,
        episodes_per_hour: float = 3.0,
        duration: float | None = None,
        producer: IngestProducer | None = None,
        wall_clock: Callable[[], float] = time.time,
        pace_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.topic = topic
        self.rate = float(rate)
        self.duration = duration
        self.generator = ReadingGenerator(cities, sensors, seed=seed, late_ratio=late_ratio, bad_ratio=bad_ratio,
                                          episodes_per_hour=episodes_per_hour)
        self.producer = producer if producer is not None else IngestProducer(bootstrap)
        self._wall = wall_clock
        self._pace = pace_clock
        self._started: float | None = None
        self._stopped: float | None = None
        self.generated = 0
        self.skipped = 0

    def run(self, stop: threading.Event, flush_timeout: float = 30.0) -> None:
        """Send until `stop` is set or `duration` has passed, then flush (up to `flush_timeout` s)."""
        t0 = self._started = self._pace()
        last_warning = -math.inf
        limit = math.inf if self.duration is None else self.rate * self.duration
        slots = 0  # readings due so far, skipped ones included
        try:
            while not stop.is_set():
                now = self._pace()
                due = min(limit, self.rate * (now - t0))
                backlog = int(due) - slots
                if backlog > self.rate * self.MAX_BACKLOG_S:
                    lost = backlog - int(self.rate * self.TICK_S)
                    self.skipped += lost
                    slots += lost
                    backlog -= lost
                    if now - last_warning >= 10:
                        last_warning = now
                        log.warning("sending is more than %.0f s behind: %d readings skipped so far",
                                    self.MAX_BACKLOG_S, self.skipped)
                if backlog > 0 and self.producer.outstanding() <= self.rate * self.MAX_BACKLOG_S + 1000:
                    step_ms = 1000.0 / self.rate
                    start_ms = self._wall() * 1000.0 - backlog * step_ms
                    keys, values = self.generator.chunk(backlog, start_ms, step_ms)
                    self.producer.send_batch(self.topic, keys, values)
                    self.generated += backlog
                    slots += backlog
                self.producer.poll(0)
                if slots >= limit:
                    break
                stop.wait(self.TICK_S)
        finally:
            self._stopped = self._pace()
            left = self.producer.flush(flush_timeout)
            if left:
                log.warning("%d readings were still unacknowledged after %.0f s", left, flush_timeout)

    def stats(self) -> SimulatorStats:
        if self._started is None:
            elapsed = 0.0
        else:
            elapsed = (self._stopped if self._stopped is not None else self._pace()) - self._started
        p = self.producer.stats()
        return SimulatorStats(elapsed_s=elapsed, generated=self.generated, skipped=self.skipped, sent=p.sent,
                              acked=p.acked, failed=p.failed, queued=p.queued,
                              rate=p.acked / elapsed if elapsed > 0 else 0.0)
