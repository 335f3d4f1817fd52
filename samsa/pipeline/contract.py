"""What the pipeline's parts agree on: topic names and the JSON each topic carries.

acquisition (`samsa ingest ...`) → Samsa → Spark job (`samsa pipeline run`) → storage
(parquet) and topics → dashboard. Every record value is one UTF-8 JSON object; times are
epoch milliseconds (UTC) unless the field name ends in `_iso`.

`sensor_readings` (key: sensor id), one reading of one sensor::

    {"sensor_id": "paris-003", "city": "Paris", "lat": 48.85, "lon": 2.35,
     "ts": 1795000000000,            # event time, ms; may arrive late or out of order
     "pm25": 12.3, "pm10": 20.1, "no2": 31.0, "o3": 44.2,   # µg/m³
     "temperature": 17.5}            # °C

`plume_pollution` (key: "lat,lon"): each raw HTTP response body of the pollution API, as
received, exactly as the source documents' poller publishes it.

`pipeline_dlq` (key: the bad record's key): a record the job could not use::

    {"reason": "malformed JSON" | "missing field pm25" | "negative pm25" | "timestamp in the future" | ...,
     "topic": "sensor_readings", "partition": 0, "offset": 41, "raw": "<the value as text>"}

`aqi_aggregates` (key: "<kind>:<city or sensor id>"), one event-time window::

    {"kind": "city_1m" | "city_5m" | "sensor_1m" | "sensor_5m", "city": "Paris",
     "sensor_id": null (city kinds) or "paris-003",
     "window_start": ms, "window_end": ms, "count": 120,   # 1-minute tumbling, 5-minute sliding by 1 minute
     "pm25_avg": .., "pm25_max": .., "pm10_avg": .., "pm10_max": .., "no2_avg": .., "o3_avg": ..,
     "temperature_avg": .., "aqi": 57, "category": "Moderate",
     "lat": .., "lon": ..,            # the sensor's position (a city: the mean of its sensors')
     "last_event_ts": ms}             # the newest reading in the window: for freshness and latency

`aqi_alerts` (key: city): a city window whose AQI reached the threshold::

    {"city": "Delhi", "window_start": ms, "window_end": ms, "aqi": 182, "category": "Unhealthy",
     "threshold": 151, "pm25_avg": ..}

`pipeline_status` (key: "job"), written by the Spark job after every micro-batch::

    {"ts": ms, "batch_id": 12, "input_rows": 5000, "input_rows_per_second": ..,
     "processed_rows_per_second": .., "duration_ms": 850,
     "end_offsets": {"sensor_readings": {"0": 1234, "1": 1200}}}
"""

from __future__ import annotations

READINGS = "sensor_readings"
RAW_HTTP = "plume_pollution"
DLQ = "pipeline_dlq"
AGGREGATES = "aqi_aggregates"
ALERTS = "aqi_alerts"
STATUS = "pipeline_status"

POLLUTANTS = ("pm25", "pm10", "no2", "o3")
READING_FIELDS = ("sensor_id", "city", "lat", "lon", "ts", *POLLUTANTS, "temperature")
