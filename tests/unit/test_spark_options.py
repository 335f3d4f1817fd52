"""samsa.spark.options: Spark's Kafka-source options, lower-cased keys, messages that say what to do."""

from __future__ import annotations

import pickle

import pytest

from samsa.spark.options import (
    Earliest,
    GlobalTimestamp,
    Latest,
    OptionError,
    SpecificOffsets,
    SpecificTimestamps,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}


def _lower(options):
    return {k.lower(): v for k, v in options.items()}


def test_defaults_streaming_and_batch():
    o = parse_source_options(BASE)
    assert o.bootstrap_servers == "127.0.0.1:9092" and o.subscribe == ("a",)
    assert isinstance(o.starting_offsets, Latest) and isinstance(o.ending_offsets, Latest)
    assert o.fail_on_data_loss is True and o.include_headers is False
    assert o.max_offsets_per_trigger is None and o.max_trigger_delay_ms == 15 * 60 * 1000
    assert isinstance(parse_source_options(BASE, streaming=False).starting_offsets, Earliest)
    assert pickle.loads(pickle.dumps(o)) == o and hash(o) == hash(o)


def test_lower_cased_keys_and_kafka_passthrough():
    options = _lower({
        **BASE, "kafka.client.id": "me", "startingOffsets": '{"a":{"0":23,"1":-2}}', "maxOffsetsPerTrigger": "100",
        "minOffsetsPerTrigger": "10", "maxTriggerDelay": "10s", "failOnDataLoss": "False", "includeHeaders": "TRUE",
        "topic": " out ",
    })  # fmt: skip
    o = parse_source_options(options)
    assert o.kafka_config == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "me"}
    assert o.starting_offsets == SpecificOffsets(((("a", 0), 23), (("a", 1), -2)))
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 10_000)
    assert o.fail_on_data_loss is False and o.include_headers is True and o.topic == "out"


def test_strategies():
    assert parse_source_options({**BASE, "subscribe": " a, b ,,"}).subscribe == ("a", "b")
    o = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribepattern": "t-.*"})
    assert o.subscribe_pattern == "t-.*" and o.subscribe is None
    o = parse_source_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[1,0],"s":[2]}'})
    assert o.assign == (("s", 2), ("t", 0), ("t", 1))


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"subscribe": "a"}, "Option 'kafka.bootstrap.servers' must be specified (host:port[,host:port])"),
        ({"kafka.bootstrap.servers": "h:1"}, "One of the following options must be specified"),
        ({**BASE, "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
        ({**BASE, "subscribe": " , "}, "No topics to subscribe to"),
        ({"kafka.bootstrap.servers": "h:1", "subscribepattern": " "}, "Pattern to subscribe is empty"),
        ({"kafka.bootstrap.servers": "h:1", "subscribepattern": "("}, "'subscribePattern' is not a valid regular"),
        ({"kafka.bootstrap.servers": "h:1", "assign": "t"}, "No topicpartitions to assign"),
        ({"kafka.bootstrap.servers": "h:1", "assign": '{"t":["x"]}'}, "Option 'assign': Expected e.g."),
        ({**BASE, "startingoffsets": "{bad"}, "Option 'startingOffsets' must be 'earliest', 'latest'"),
        ({**BASE, "startingoffsets": '{"a":{"0":-3}}'}, "use an offset >= 0, -1 for latest or -2 for earliest"),
        ({**BASE, "startingtimestamp": "soon"}, "Option 'startingTimestamp' expects a single long value"),
        ({**BASE, "startingoffsetsbytimestamp": "[]"}, "Option 'startingOffsetsByTimestamp': Expected e.g."),
        ({**BASE, "endingoffsets": "latest"}, "ending offset not valid in streaming queries"),
        ({**BASE, "endingoffsetsbytimestamp": "{}"}, "ending timestamp not valid in streaming queries"),
        ({**BASE, "maxoffsetspertrigger": "0"}, "Option 'maxOffsetsPerTrigger' must be a positive integer"),
        ({**BASE, "minoffsetspertrigger": "x"}, "Option 'minOffsetsPerTrigger' must be a positive integer"),
        ({**BASE, "minoffsetspertrigger": "11", "maxoffsetspertrigger": "10"}, "minOffsetsPerTrigger(11) is higher"),
        ({**BASE, "maxtriggerdelay": "soon"}, "Option 'maxTriggerDelay' must be a duration"),
        ({**BASE, "failondataloss": "yes"}, "Option 'failOnDataLoss' must be 'true' or 'false'"),
        ({**BASE, "includeheaders": "1"}, "Option 'includeHeaders' must be 'true' or 'false'"),
        ({**BASE, "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
        ({**BASE, "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported"),
        ({**BASE, "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
        ({**BASE, "startingoffsetsbytimestampstrategy": "maybe"}, "'startingOffsetsByTimestampStrategy' must be"),
    ],
)
def test_bad_options(options, fragment):
    with pytest.raises(OptionError) as info:
        parse_source_options(options)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"startingoffsets": "latest"}, "starting offset can't be latest for batch queries"),
        ({"startingoffsets": '{"a":{"0":-1}}'}, "startingOffsets for a-0 can't be latest"),
        ({"endingoffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
        ({"endingoffsets": '{"a":{"0":-2}}'}, "ending offset for a-0 can't be earliest"),
        ({"startingoffsets": '{"a":{"0":5}}', "endingoffsets": '{"a":{"0":4}}'}, "starting offset 5 of a-0 is after"),
        ({"startingoffsets": '{"a":{"0":5}}', "endingoffsets": '{"a":{"1":9}}'}, "name different partitions"),
    ],
)
def test_bad_batch_options(options, fragment):
    with pytest.raises(OptionError, match=None) as info:
        parse_source_options({**BASE, **options}, streaming=False)
    assert fragment in str(info.value)


def test_batch_offsets_and_timestamps():
    o = parse_source_options({**BASE, "startingoffsets": '{"a":{"0":-2}}', "endingoffsets": '{"a":{"0":-1}}'}, streaming=False)
    assert o.starting_offsets.as_dict() == {("a", 0): -2} and o.ending_offsets.as_dict() == {("a", 0): -1}
    o = parse_source_options({**BASE, "startingtimestamp": "1000", "startingoffsets": "latest"})
    assert o.starting_offsets == GlobalTimestamp(1000)  # a timestamp wins over startingOffsets, as in Spark
    o = parse_source_options({**BASE, "startingoffsetsbytimestamp": '{"a":{"0":5}}'})
    assert o.starting_offsets == SpecificTimestamps(((("a", 0), 5),))
    o = parse_source_options({**BASE, "endingtimestamp": "2000"}, streaming=False)
    assert o.ending_offsets == GlobalTimestamp(2000)


@pytest.mark.parametrize(("text", "ms"), [("15m", 900_000), ("10s", 10_000), ("500ms", 500), ("250", 250), ("2h", 7_200_000), ("1d", 86_400_000)])
def test_max_trigger_delay(text, ms):
    assert parse_source_options({**BASE, "maxtriggerdelay": text}).max_trigger_delay_ms == ms


def test_sink_options():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out"})
    assert (o.bootstrap_servers, o.topic) == ("h:1", "out")
    assert parse_sink_options({"kafka.bootstrap.servers": "h:1"}).topic is None
    with pytest.raises(OptionError, match="must be specified"):
        parse_sink_options({"topic": "x"})
    with pytest.raises(OptionError, match="'key.serializer' is not supported"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.key.serializer": "x"})


def test_sink_producer_settings():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1"})
    assert (o.acks, o.compression, o.batch_size, o.request_timeout_ms, o.retries) == (-1, 0, 1 << 20, 30_000, 10)
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1", "kafka.compression.type": "ZSTD",
                            "kafka.batch.size": "16384", "kafka.retries": "0", "kafka.request.timeout.ms": "5000"})
    assert (o.acks, o.compression, o.batch_size, o.request_timeout_ms, o.retries) == (1, 4, 16384, 5000, 0)
    for key, value, message in [("kafka.acks", "2", "'kafka.acks' must be all, -1, 1 or 0"),
                                ("kafka.compression.type", "brotli", "'kafka.compression.type' must be one of"),
                                ("kafka.batch.size", "-1", "'kafka.batch.size' must be a non-negative integer"),
                                ("kafka.request.timeout.ms", "0", "'kafka.request.timeout.ms' must be a positive"),
                                ("kafka.retries", "many", "'kafka.retries' must be a non-negative integer")]:
        with pytest.raises(OptionError, match=message):
            parse_sink_options({"kafka.bootstrap.servers": "h:1", key: value})
