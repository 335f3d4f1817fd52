"""US EPA Air Quality Index from PM2.5 and PM10 concentrations (µg/m³), 2024 breakpoints.

The index of one pollutant interpolates linearly inside the breakpoint row its concentration
(PM2.5 truncated to 0.1, PM10 to 1) falls in; a location's AQI is the larger of the two. The
Spark job builds the same computation as column expressions from `PM25` and `PM10`, so the
table lives here once.
"""

from __future__ import annotations

import math

# (concentration low, concentration high, index low, index high)
PM25 = ((0.0, 9.0, 0, 50), (9.1, 35.4, 51, 100), (35.5, 55.4, 101, 150), (55.5, 125.4, 151, 200),
        (125.5, 225.4, 201, 300), (225.5, 325.4, 301, 500))
PM10 = ((0, 54, 0, 50), (55, 154, 51, 100), (155, 254, 101, 150), (255, 354, 151, 200),
        (355, 424, 201, 300), (425, 604, 301, 500))
# (lowest index of the category, name), ascending
CATEGORIES = ((0, "Good"), (51, "Moderate"), (101, "Unhealthy for Sensitive Groups"), (151, "Unhealthy"),
              (201, "Very Unhealthy"), (301, "Hazardous"))
ALERT_THRESHOLD = 151  # "Unhealthy" and worse


def _index(c: float, table: tuple[tuple[float, float, int, int], ...], step: float) -> int:
    c = math.floor(c / step + 1e-9) * step
    if c <= 0:
        return 0
    for clo, chi, ilo, ihi in table:
        if c <= chi:
            return round((ihi - ilo) / (chi - clo) * (c - clo) + ilo)
    return 500  # beyond the table: the top of the scale


def aqi_pm25(c: float) -> int:
    return _index(c, PM25, 0.1)


def aqi_pm10(c: float) -> int:
    return _index(c, PM10, 1.0)


def aqi(pm25: float | None, pm10: float | None) -> int:
    """The AQI of a location: the larger of its PM2.5 and PM10 indexes (a missing one is ignored)."""
    parts = [f(c) for f, c in ((aqi_pm25, pm25), (aqi_pm10, pm10)) if c is not None]
    return max(parts) if parts else 0


def category(index: int) -> str:
    name = CATEGORIES[0][1]
    for low, n in CATEGORIES:
        if index >= low:
            name = n
    return name
