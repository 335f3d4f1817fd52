"""samsa.spark.offsets: Spark's offset JSON, resolving specs, data loss, maxOffsetsPerTrigger."""

from __future__ import annotations

import pytest

from samsa.spark.offsets import (
    OffsetJsonError,
    available_offsets,
    data_loss_message,
    delay_batch,
    find_data_loss,
    format_partition_offsets,
    offset_ranges,
    parse_partition_offsets,
    parse_partition_timestamps,
    parse_partitions,
    rate_limit,
    resolve_offsets,
)


def test_json_round_trip_is_sorted_and_compact():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 12}
    text = format_partition_offsets(offsets)
    assert text == '{"a":{"0":12},"b":{"2":7,"10":5}}'
    assert parse_partition_offsets(text) == offsets
    assert format_partition_offsets({}) == "{}"


@pytest.mark.parametrize("text", ["", "[]", "{", '{"a":[0]}', '{"a":{"x":1}}', '{"a":{"0":"1"}}', '{"a":{"-1":1}}', '{"a":{"0":true}}'])
def test_malformed_offsets(text):
    with pytest.raises(OffsetJsonError, match="Expected e.g."):
        parse_partition_offsets(text)


def test_partitions_and_timestamps():
    assert parse_partitions('{"t":[1,0],"s":[0]}') == [("s", 0), ("t", 0), ("t", 1)]
    for bad in ('{"t":0}', '{"t":[-1]}', '{"t":["0"]}', "[]"):
        with pytest.raises(OffsetJsonError):
            parse_partitions(bad)
    assert parse_partition_timestamps('{"t":{"0":1700000000000}}') == {("t", 0): 1700000000000}


def test_resolve_offsets():
    parts = [("t", 0), ("t", 1)]
    earliest = {("t", 0): 5, ("t", 1): 0}
    latest = {("t", 0): 50, ("t", 1): 9}
    assert resolve_offsets("earliest", parts, earliest, latest) == earliest
    assert resolve_offsets("latest", parts, earliest, latest) == latest
    assert resolve_offsets('{"t":{"0":-2,"1":-1}}', parts, earliest, latest) == {("t", 0): 5, ("t", 1): 9}
    assert resolve_offsets({("t", 0): 7, ("t", 1): 3}, parts, earliest, latest) == {("t", 0): 7, ("t", 1): 3}
    with pytest.raises(ValueError, match="you must specify all TopicPartitions"):
        resolve_offsets({("t", 0): 7}, parts, earliest, latest)


def test_find_data_loss():
    assert find_data_loss({("t", 0): 5}, {("t", 0): 5}) is None
    message = find_data_loss({("t", 0): 3, ("t", 1): 0, ("u", 0): 1}, {("t", 0): 5, ("t", 1): 0})
    assert "[u-0] are gone" in message
    assert "Cannot fetch offset 3 of t-0: the earliest available offset is 5" in message
    assert "offset was changed from 9 to 4" in find_data_loss({("t", 0): 9}, {("t", 0): 0}, {("t", 0): 4})
    assert '"failOnDataLoss" to "false"' in data_loss_message("x", True)
    assert '"failOnDataLoss" to "true"' in data_loss_message("x", False)


def test_rate_limit_proportional_to_lag():
    start = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 300, ("t", 1): 200}
    assert rate_limit(100, start, end) == {("t", 0): 75, ("t", 1): 125}
    assert rate_limit(10_000, start, end) == end  # never past the end
    # small partitions are not starved: at least one offset each
    limited = rate_limit(10, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 10_000, ("t", 1): 1})
    assert limited == {("t", 0): 9, ("t", 1): 1}
    # no lag anywhere: the end as is
    assert rate_limit(5, end, end) == end


def test_rate_limit_new_partitions():
    start = {("t", 0): 0}
    end = {("t", 0): 100, ("t", 1): 100, ("t", 2): 7}
    limited = rate_limit(20, start, end, {("t", 1): 0})
    assert limited == {("t", 0): 10, ("t", 1): 10, ("t", 2): 7}  # t-2 has no known start: left as is


def test_rate_limit_large_offsets_are_exact():
    big = 2**62
    limited = rate_limit(3, {("t", 0): big}, {("t", 0): big + 10})
    assert limited == {("t", 0): big + 3}


def test_min_offsets_and_trigger_delay():
    start, latest = {("t", 0): 0}, {("t", 0): 5, ("t", 1): 2}
    assert available_offsets(start, latest) == 7
    assert delay_batch(10, 1000, start, latest, last_trigger_ms=0, now_ms=500) is True
    assert delay_batch(10, 1000, start, latest, last_trigger_ms=0, now_ms=1000) is False
    assert delay_batch(7, 1000, start, latest, last_trigger_ms=0, now_ms=1) is False
    assert delay_batch(None, 1000, start, latest, last_trigger_ms=0, now_ms=1) is False


def test_offset_ranges():
    ranges = offset_ranges({("t", 0): 5, ("t", 1): 9}, {("t", 1): 9, ("t", 0): 8, ("t", 2): 4}, {("t", 2): 1})
    assert ranges == [("t", 0, 5, 8), ("t", 2, 1, 4)]
