"""Pipeline health as pure functions of what the dashboard has seen: no I/O, no clock.

* ingest rate and broker throughput: records per second between the oldest and newest of a few
  recent samples of summed log end offsets;
* Spark job lag: how far the job's last reported end offsets (`pipeline_status.end_offsets`)
  trail the log end offsets of `sensor_readings`, summed over partitions;
* job state: "running" while the last `pipeline_status` is younger than a timeout; "starting"
  until the job's first one (a Spark job's first micro-batch can take a minute, and its windows
  reach the topics before the status that ends the batch); "not running" once it is stale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RUNNING = "running"
STARTING = "starting"
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


def job_state(
    last_status_ms: int | None,
    now_ms: int,
    timeout_s: float,
    *,
    last_output_ms: int | None = None,
    job_started_ms: int | None = None,
    watching_since_ms: int | None = None,
    start_timeout_s: float | None = None,
) -> tuple[str, str]:
    """(state, reason) of the Spark job, from what its topics show.

    `last_status_ms`: the newest pipeline_status record; `last_output_ms`: the newest window or
    alert it wrote. `job_started_ms`: when the job was started, if known (the demo starts it):
    status records from before are an earlier run's. Until a status record of this run arrives
    the job is STARTING, for `start_timeout_s` from `job_started_ms` (else from
    `watching_since_ms`, when the dashboard began to look; None: as long as it takes). A job whose
    windows are arriving is never NOT_RUNNING."""
    timeout_ms = timeout_s * 1000
    current = last_status_ms is not None and (job_started_ms is None or last_status_ms >= job_started_ms)
    if current and last_status_ms is not None and now_ms - last_status_ms <= timeout_ms:
        return RUNNING, ""
    flowing = (last_output_ms is not None and now_ms - last_output_ms <= timeout_ms
               and (job_started_ms is None or last_output_ms >= job_started_ms))
    stale = f"no pipeline_status record for more than {timeout_s:g} s"
    if current:
        return (RUNNING, stale + ", but its windows are arriving") if flowing else (NOT_RUNNING, stale)
    if flowing:
        return STARTING, "its first windows are arriving; its first pipeline_status record ends its first micro-batch"
    since = job_started_ms if job_started_ms is not None else watching_since_ms
    if start_timeout_s is None or since is None or now_ms - since <= start_timeout_s * 1000:
        return STARTING, "waiting for its first pipeline_status record"
    if last_status_ms is None:
        return NOT_RUNNING, "no pipeline_status record received"
    return NOT_RUNNING, "no pipeline_status record since the job started"
