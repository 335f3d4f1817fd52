"""The counters behind /metrics, alone: error codes found by the schema-generated walker, the
request-time histograms' buckets, and topic totals that never go back when a topic goes."""

from __future__ import annotations

import pytest

from samsa.protocol.messages import response_codec
from samsa.protocol.schema import Msg
from samsa.server.metrics import BUCKETS_MS, TIMES, BrokerTopicStats, RequestMetrics, RequestStats, error_name
from samsa.server.prometheus import escape


def test_error_paths_follow_the_schema() -> None:
    assert response_codec(0, 9).error_paths() == [("responses", "partition_responses", "error_code")]
    assert response_codec(1, 12).error_paths() == [("error_code",), ("responses", "partitions", "error_code")]
    assert response_codec(18, 3).error_paths() == [("error_code",)]
    assert response_codec(3, 12).error_paths() == [("topics", "error_code"), ("topics", "partitions", "error_code")]


@pytest.mark.parametrize("body,expected", [
    ({"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0}]}]}, None),
    ({"responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 3},
                                                          {"index": 1, "error_code": 3},
                                                          {"index": 2, "error_code": 19}]},
                    {"name": "u", "partition_responses": [{"index": 0}]}]}, {3: 2, 19: 1}),
    ({"responses": []}, None),
    ({}, None),
    (Msg(responses=[Msg(name="t", partition_responses=[Msg(index=0, error_code=6)])]), {6: 1}),
])
def test_a_produce_response_s_errors_are_counted(body: object, expected: dict[int, int] | None) -> None:
    assert response_codec(0, 9).count_errors(body) == expected


def test_top_level_and_nested_errors_are_both_counted() -> None:
    body = {"error_code": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 1, "records": b"not walked"},
        {"partition_index": 1, "error_code": 0}]}]}
    assert response_codec(1, 12).count_errors(body) == {1: 1}
    assert response_codec(1, 12).count_errors({"error_code": 71, "responses": None}) == {71: 1}
    assert response_codec(18, 3).count_errors({"error_code": 35, "api_keys": []}) == {35: 1}


def test_a_histogram_bucket_holds_the_values_up_to_its_bound() -> None:
    stats = RequestStats("Produce", 9)
    ms = 1e-3
    stats.record(0.0, 0.0, 1 * ms, 1 * ms, 1 * ms, 1 * ms + 0.05 * ms)  # local exactly 1 ms: the "le 1.0" bucket
    local = stats.histogram(TIMES.index("local"))
    assert local.counts[BUCKETS_MS.index(1.0)] == 1 and sum(local.counts) == 1
    assert local.sum == pytest.approx(1.0)
    total = stats.histogram(TIMES.index("total"))
    assert total.counts[BUCKETS_MS.index(2.5)] == 1  # 1.05 ms
    stats.record(0.0, 0.0, 0.0, 100.0, 100.0, 100.0)  # 100 s waiting: above every bound
    assert stats.histogram(TIMES.index("remote")).counts[-1] == 1
    stats.record_no_response(0.0, 0.0, 3 * ms)
    assert sum(stats.histogram(TIMES.index("total")).counts) == 3
    assert sum(stats.histogram(TIMES.index("send")).counts) == 2


def test_fetch_is_the_sum_of_consumer_and_follower_fetches() -> None:
    m = RequestMetrics([(0, 3, 12), (1, 4, 12)], {0: "Produce", 1: "Fetch"})
    m.fetch_consumer.count(12)
    m.fetch_consumer.add_errors({1: 2})
    m.fetch_follower.count(11)
    m.fetch_follower.record(0.0, 0.0, 0.001, 0.5, 0.5, 0.5)
    by_name = {s.name: s for s in m.all()}
    fetch = by_name["Fetch"]
    assert fetch.versions[11] == fetch.versions[12] == 1 and fetch.errors == {1: 2}
    assert sum(fetch.histogram(TIMES.index("remote")).counts) == 1
    assert by_name["FetchConsumer"].errors == {1: 2} and by_name["Produce"].versions == [0] * 13


def test_a_deleted_topic_s_counts_stay_in_the_total() -> None:
    stats = BrokerTopicStats()
    a, b = stats.topic("a"), stats.topic("b")
    a.messages_in, a.bytes_in, b.messages_in = 10, 700, 5
    assert stats.topic("a") is a
    stats.remove("a")
    assert "a" not in stats.topics
    total = stats.totals()
    assert (total.messages_in, total.bytes_in) == (15, 700)
    assert stats.topic("a").messages_in == 0  # created again: a new series from 0
    stats.unexpected_failure(0, [("b", 3), ("gone", 2)])
    assert b.failed_produce == 3 and stats.totals().failed_produce == 3


def test_names_and_escaping() -> None:
    assert error_name(3) == "UNKNOWN_TOPIC_OR_PARTITION"
    assert error_name(31999) == "UNKNOWN_ERROR_CODE_31999"
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
