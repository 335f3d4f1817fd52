"""Pipeline health as pure functions of what the dashboard has seen: no I/O, no clock.

* ingest rate and broker throughput: records per second between the oldest and newest of a few
  recent samples of summed log end offsets;
* Spark job lag: how far the job's last reported end offsets (`pipeline_status.end_offsets`)
  trail the log end offsets of `sensor_readings`, summed over partitions;
* job state: "running" while the last `pipeline_status` is younger than a timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RUNNING = "running"
NOT_RUNNING = "not_running"


def rate(samples: Sequence[tuple[float, int]], min_span_s: float = 0.5) -> float | None:
    """Records per second from `(monotonic seconds, summed end offsets)` samples, oldest first.

    None until the samples span `min_span_s`. A total that went down (a topic deleted and
    recreated) counts as no progress, not as a negative rate."""
    if len(samples) < 2:
        return None
    (t0, n0), (t1, n1) = samples[0], samples[-1]
    span = t1 - t0
    if span < min_span_s:
        return None
    return round(max(0, n1 - n0) / span, 1)


def lag(end_offsets: Mapping[int, int] | None, processed: Mapping[str, int] | None) -> int | None:
    """Records of the input topic the job has not processed yet.

    `end_offsets`: partition -> log end offset now; `processed`: the job's last reported end
    offsets for that topic, partition ids as strings as in the JSON. A partition the job has not
    reported counts from 0; one the job reports ahead of our (older) sample counts as caught up."""
    if end_offsets is None or processed is None:
        return None
    total = 0
    for partition, end in end_offsets.items():
        done = processed.get(str(partition), 0)
        total += max(0, end - done)
    return total


def job_state(last_status_ms: int | None, now_ms: int, timeout_s: float) -> tuple[str, str]:
    """(state, reason): RUNNING while the last status is at most `timeout_s` old."""
    if last_status_ms is None:
        return NOT_RUNNING, "no pipeline_status record received"
    if now_ms - last_status_ms <= timeout_s * 1000:
        return RUNNING, ""
    return NOT_RUNNING, f"no pipeline_status record for more than {timeout_s:g} s"
