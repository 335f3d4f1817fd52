"""Spark's Kafka offsets: the per-partition JSON, resolving specs, data loss, rate limiting.

Spark stores a Kafka source offset as JSON mapping topic -> partition (as a string) -> offset:

    {"orders":{"0":12,"1":40},"users":{"0":3}}

Topics are written in sorted order and partitions in numeric order, with no spaces, so the same
offsets always serialise to the same text (Spark compares checkpointed offsets as text). In
`startingOffsets` / `endingOffsets` an offset of -2 means earliest and -1 latest.

Everything here is pure arithmetic over dicts keyed by (topic, partition): the driver fetches
the earliest (log start) and latest (high watermark or last stable) offsets and calls these.
`rate_limit` spreads `maxOffsetsPerTrigger` over partitions in proportion to their lag, rounding
down but giving every lagging partition at least one offset, as Spark's KafkaMicroBatchStream.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'
TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":-1},"topicB":{"0":1700000000000}}'

INSTRUCTION_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because it is no longer in the topic: either retention deleted it"
    " or the topic was deleted (or recreated) before all its data was processed. If you do not want"
    ' the query to fail in such cases, set the source option "failOnDataLoss" to "false".'
)
INSTRUCTION_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because it is no longer in the topic: either retention deleted it"
    " or the topic was deleted (or recreated) before all its data was processed. If you want the"
    ' query to fail in such cases, set the source option "failOnDataLoss" to "true".'
)


class OffsetJsonError(ValueError):
    """Offset, partition or timestamp JSON that does not have the expected shape."""


def _load(text: str, example: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        raise OffsetJsonError(f"Expected e.g. {example}, got {text}")
    return value


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _partition(key: Any, text: str, example: str) -> int:
    try:
        partition = int(key)
    except (TypeError, ValueError):
        raise OffsetJsonError(f"Expected e.g. {example}, got {text}") from None
    if partition < 0 or str(partition) != str(key).strip():
        raise OffsetJsonError(f"Expected e.g. {example}, got {text}")
    return partition


def _partition_longs(text: str, example: str) -> PartitionOffsets:
    out: PartitionOffsets = {}
    for topic, partitions in _load(text, example).items():
        if not isinstance(partitions, dict):
            raise OffsetJsonError(f"Expected e.g. {example}, got {text}")
        for key, value in partitions.items():
            if not _int(value):
                raise OffsetJsonError(f"Expected e.g. {example}, got {text}")
            out[(topic, _partition(key, text, example))] = value
    return out


def parse_partition_offsets(text: str) -> PartitionOffsets:
    """`{"t":{"0":23}}` -> {("t", 0): 23}; OffsetJsonError when malformed."""
    return _partition_longs(text, OFFSETS_EXAMPLE)


def parse_partition_timestamps(text: str) -> PartitionOffsets:
    """`{"t":{"0":1700000000000}}` -> {("t", 0): 1700000000000} (milliseconds since the epoch)."""
    return _partition_longs(text, TIMESTAMPS_EXAMPLE)


def parse_partitions(text: str) -> list[TopicPartition]:
    """`{"t":[0,1]}` (the `assign` option) -> [("t", 0), ("t", 1)], sorted."""
    out: set[TopicPartition] = set()
    for topic, partitions in _load(text, PARTITIONS_EXAMPLE).items():
        if not isinstance(partitions, list) or not all(_int(p) and p >= 0 for p in partitions):
            raise OffsetJsonError(f"Expected e.g. {PARTITIONS_EXAMPLE}, got {text}")
        out.update((topic, p) for p in partitions)
    return sorted(out)


def format_partition_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """Spark's offset JSON, topics sorted, partitions in numeric order, no spaces."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(nested, separators=(",", ":"))


def resolve_offsets(
    spec: str | Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Turn "earliest", "latest" or per-partition offsets (with -2 / -1) into real offsets.

    `partitions` are those the query reads now; `earliest` and `latest` hold their offsets.
    Per-partition offsets must name exactly these partitions (ValueError otherwise); a real
    offset is kept as given, `find_data_loss` decides whether it is still in the log.
    """
    wanted = sorted(set(partitions))
    if spec == "earliest":
        return {tp: earliest[tp] for tp in wanted}
    if spec == "latest":
        return {tp: latest[tp] for tp in wanted}
    if isinstance(spec, str):
        spec = parse_partition_offsets(spec)
    if set(spec) != set(wanted):
        raise ValueError(
            "If startingOffsets contains specific offsets, you must specify all TopicPartitions."
            f" Use -1 for latest, -2 for earliest. Specified: {_names(spec)} Assigned: {_names(wanted)}"
        )
    out: PartitionOffsets = {}
    for tp in wanted:
        offset = spec[tp]
        out[tp] = earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
    return out


def _names(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(partitions)) + "]"


def find_data_loss(
    start: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int] | None = None,
) -> str | None:
    """What data the next batch cannot read, or None.

    `start` is where the query stands; `earliest` (and `latest`) hold the partitions that exist
    now. Lost: a partition that disappeared, an offset below the log start (retention or
    DeleteRecords removed it), or an offset past the end (the topic was recreated).
    """
    problems = []
    gone = sorted(set(start) - set(earliest))
    if gone:
        problems.append(f"{_names(gone)} are gone. Some data may have been missed")
    for tp in sorted(set(start) & set(earliest)):
        offset = start[tp]
        if offset < earliest[tp]:
            problems.append(
                f"Cannot fetch offset {offset} of {tp[0]}-{tp[1]}: the earliest available offset is"
                f" {earliest[tp]}, so offsets {offset} to {earliest[tp] - 1} were lost"
            )
        elif latest is not None and tp in latest and offset > latest[tp]:
            problems.append(
                f"Partition {tp[0]}-{tp[1]}'s offset was changed from {offset} to {latest[tp]},"
                " some data may have been missed"
            )
    return "; ".join(problems) if problems else None


def data_loss_message(problem: str, fail_on_data_loss: bool) -> str:
    """`problem` followed by Spark's advice on the failOnDataLoss option."""
    advice = INSTRUCTION_FAIL_ON_DATA_LOSS_TRUE if fail_on_data_loss else INSTRUCTION_FAIL_ON_DATA_LOSS_FALSE
    return f"{problem}. {advice}"


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_partition_start: Mapping[TopicPartition, int] | None = None,
) -> PartitionOffsets:
    """End offsets for a batch of at most about `limit` offsets from `start` towards `end`.

    Each partition with lag gets floor(limit * lag / total lag) offsets, and at least one so
    that small partitions are not starved (so the sum may exceed `limit` by the number of
    partitions). Partitions absent from `start` begin at `new_partition_start` (their earliest
    offsets); a partition with no known beginning, or no lag, keeps its end offset.
    """
    new_partition_start = new_partition_start or {}
    begins: dict[TopicPartition, int] = {}
    lags: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        begin = start.get(tp, new_partition_start.get(tp))
        if begin is not None and until - begin > 0:
            begins[tp] = begin
            lags[tp] = until - begin
    total = sum(lags.values())
    if total < 1:
        return dict(end)
    out: PartitionOffsets = {}
    for tp, until in end.items():
        lag = lags.get(tp)
        if lag is None:
            out[tp] = until
            continue
        share = limit * lag // total  # exact integer floor, no float rounding on large offsets
        out[tp] = min(until, begins[tp] + max(share, 1))
    return out


def available_offsets(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """How many offsets lie between `start` and `latest` (new partitions count from 0)."""
    return sum(max(0, until - start.get(tp, 0)) for tp, until in latest.items())


def delay_batch(
    min_offsets: int | None,
    max_trigger_delay_ms: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    last_trigger_ms: int,
    now_ms: int,
) -> bool:
    """minOffsetsPerTrigger: wait while fewer offsets are available, unless the delay has passed.

    The caller sets its last trigger time to now whenever this returns False.
    """
    if min_offsets is None or now_ms - last_trigger_ms >= max_trigger_delay_ms:
        return False
    return available_offsets(start, latest) < min_offsets


def offset_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_partition_start: Mapping[TopicPartition, int] | None = None,
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, from, until) for each partition of `end` with offsets to read, sorted.

    New partitions (absent from `start`) are read from `new_partition_start`, else from 0.
    """
    new_partition_start = new_partition_start or {}
    ranges = []
    for (topic, partition), until in sorted(end.items()):
        begin = start.get((topic, partition), new_partition_start.get((topic, partition), 0))
        if until > begin:
            ranges.append((topic, partition, begin, until))
    return ranges
