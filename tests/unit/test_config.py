from __future__ import annotations

from pathlib import Path

import pytest

from samsa.config import (
    BROKER_DEFS,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_DEFS,
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    Listener,
    describe_topic_config,
    effective_topic_config,
    effective_topic_values,
    load_properties,
    parse_properties,
    unknown_keys,
    validate_topic_configs,
)

# ----------------------------------------------------------------------------- .properties


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a=1\nb = 2\n", {"a": "1", "b": "2"}),
        ("a:1\nb : 2", {"a": "1", "b": "2"}),
        ("a 1\nb\t\t2", {"a": "1", "b": "2"}),
        ("a = = b", {"a": "= b"}),  # only one separator is skipped
        ("a  :  =b", {"a": "=b"}),
        ("key", {"key": ""}),
        ("key=", {"key": ""}),
        ("   indented = yes", {"indented": "yes"}),
        ("a=trailing  ", {"a": "trailing  "}),  # Java keeps trailing whitespace
        ("# comment\n! also comment\n  # indented comment\n\nx=1", {"x": "1"}),
        ("x=1 # not a comment", {"x": "1 # not a comment"}),
        ("dup=1\ndup=2", {"dup": "2"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ],
)
def test_parse_basic(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_parse_continuations() -> None:
    text = "listeners=PLAINTEXT://:9092,\\\n    INTERNAL://:9093\nnext=1\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://:9092,INTERNAL://:9093", "next": "1"}
    # a continuation line starting with # is content, not a comment
    assert parse_properties("a=x\\\n  #y") == {"a": "x#y"}
    # an even number of backslashes is an escaped backslash, not a continuation
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    # three backslashes: one escaped backslash plus a continuation
    assert parse_properties("a=x\\\\\\\n y") == {"a": "x\\y"}
    # backslash at end of file, and a continuation followed by a blank line
    assert parse_properties("a=x\\") == {"a": "x"}
    assert parse_properties("a=x\\\n\nb=2") == {"a": "x", "b": "2"}
    # a comment line ending in a backslash does not continue
    assert parse_properties("# c \\\nb=2") == {"b": "2"}


def test_parse_escapes() -> None:
    assert parse_properties(r"a=tab\there\nnl\r\f") == {"a": "tab\there\nnl\r\f"}
    assert parse_properties(r"a=\u0041\u00e9") == {"a": "Aé"}
    assert parse_properties(r"a=\uD83D\uDE00") == {"a": "\U0001F600"}
    assert parse_properties(r"key\=with\:seps\ and\ space = v") == {"key=with:seps and space": "v"}
    assert parse_properties(r"a=\q\\") == {"a": "q\\"}  # unknown escape drops the backslash
    assert parse_properties("\ufeffa=1") == {"a": "1"}


def test_parse_malformed_unicode_names_line() -> None:
    with pytest.raises(ConfigError, match=r"server.properties, line 3: malformed \\uXXXX"):
        parse_properties("a=1\n\nb=\\u12G4\n", "server.properties")


def test_load_properties(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_bytes("broker.id=7\nname=caf\xe9\n".encode("latin-1"))
    assert load_properties(p) == {"broker.id": "7", "name": "café"}
    p.write_text("name=café\n", encoding="utf-8")
    assert load_properties(p) == {"name": "café"}
    with pytest.raises(ConfigError, match="cannot read config file .*missing.properties"):
        load_properties(tmp_path / "missing.properties")


# ----------------------------------------------------------------------------- broker config


def test_defaults() -> None:
    c = BrokerConfig({}, hostname="h")
    assert c.broker_id() == 0
    assert c.listeners() == [Listener("PLAINTEXT", "", 9092)]
    assert c.advertised_listeners() == [("PLAINTEXT", "h", 9092)]
    assert c.log_dirs() == ["/tmp/kafka-logs"]
    assert c.get_int("num.partitions") == 1
    assert c.get_int("message.max.bytes") == 1048588
    assert c.get_long("log.segment.bytes") == 1073741824
    assert c.get_bool("auto.create.topics.enable") is True
    assert c.get_bool("unclean.leader.election.enable") is False
    assert c.get_list("log.cleanup.policy") == ["delete"]
    assert c.get_str("compression.type") == "producer"
    assert c.get("zookeeper.connect") is None
    assert c.get_int("offsets.topic.num.partitions") == 50
    assert c.retention_ms() == 168 * 3600 * 1000
    assert c.roll_ms() == 168 * 3600 * 1000
    assert c.flush_ms() == 2**63 - 1
    assert c.cluster_id() is None
    with pytest.raises(KeyError):
        c.get("no.such.key")


def test_typed_values_are_trimmed_and_parsed() -> None:
    c = BrokerConfig({"num.partitions": " 3 ", "delete.topic.enable": "FALSE", "log.cleanup.policy": "compact, delete",
                      "log.cleaner.min.cleanable.ratio": "0.25", "broker.rack": " r1 "})
    assert c.get_int("num.partitions") == 3
    assert c.get_bool("delete.topic.enable") is False
    assert c.get_list("log.cleanup.policy") == ["compact", "delete"]
    assert c.get_double("log.cleaner.min.cleanable.ratio") == 0.25
    assert c.get_str("broker.rack") == "r1"
    assert c.is_set("num.partitions") and not c.is_set("num.io.threads")


@pytest.mark.parametrize(
    "props, key_and_hint",
    [
        ({"num.partitions": "abc"}, "num.partitions: expected an integer"),
        ({"num.partitions": "0"}, "num.partitions: must be at least 1"),
        ({"num.partitions": "99999999999"}, "num.partitions: expected a 32-bit integer"),
        ({"log.retention.ms": "1.5"}, "log.retention.ms: expected an integer"),
        ({"delete.topic.enable": "yes"}, "delete.topic.enable: expected true or false"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio: must be between 0 and 1"),
        ({"log.cleaner.min.cleanable.ratio": "nan"}, "log.cleaner.min.cleanable.ratio: expected a number"),
        ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy: each item must be one of: compact, delete"),
        ({"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type: must be one of: CreateTime"),
        ({"compression.type": "brotli"}, "compression.type: must be one of: uncompressed"),
        ({"listeners": "localhost:9092"}, "listeners: expected NAME://host:port"),
        ({"listeners": "PLAINTEXT://:99999"}, "listeners: port must be between"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners: listener name PLAINTEXT is used more"),
        ({"listeners": "A://:9092,B://:9093"}, "no security protocol for listener A"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners: each listener must use a different port"),
        ({"listeners": ""}, "listeners: at least one listener"),
        ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners: listener SSL is not in listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners: cannot advertise a wildcard"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map: expected NAME:PROTOCOL"),
        ({"log.dirs": " , "}, "log.dirs: at least one log directory"),
        ({"log.retention.ms": "0"}, "log.retention.ms: retention must be -1"),
        ({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}, "group.min.session.timeout.ms"),
        ({"principal.builder.class": " "}, "principal.builder.class: expected a class name"),
    ],
)
def test_validation_errors(props: dict[str, str], key_and_hint: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    message = str(info.value)
    assert "\n" not in message
    assert key_and_hint in message


def test_validation_error_message_format() -> None:
    with pytest.raises(ConfigError, match=r"^invalid value 'abc' for num\.partitions: expected an integer$"):
        BrokerConfig({"num.partitions": "abc"})


def test_unknown_keys_are_reported_not_rejected() -> None:
    c = BrokerConfig({"num.partitions": "2", "some.plugin.setting": "x", "listener.name.plaintext.foo": "y"})
    assert c.unknown_keys() == ["listener.name.plaintext.foo", "some.plugin.setting"]
    assert unknown_keys({"broker.id": "1", "zzz": "1"}) == ["zzz"]


def test_listeners_and_advertised() -> None:
    c = BrokerConfig({"listeners": "plaintext://0.0.0.0:9092, INTERNAL://[::1]:9093, EXT://myhost:0",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXT:SSL"},
                     hostname="box.example")
    assert c.listeners() == [("PLAINTEXT", "0.0.0.0", 9092), ("INTERNAL", "::1", 9093), ("EXT", "myhost", 0)]
    assert c.advertised_listeners()[0] == ("PLAINTEXT", "box.example", 9092)
    assert c.security_protocol_map()["EXT"] == "SSL"
    c2 = BrokerConfig({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://public:19092"})
    assert c2.advertised_listeners() == [("PLAINTEXT", "public", 19092)]


def test_log_dirs_precedence() -> None:
    assert BrokerConfig({"log.dir": "/a"}).log_dirs() == ["/a"]
    assert BrokerConfig({"log.dir": "/a", "log.dirs": "/b, /c"}).log_dirs() == ["/b", "/c"]


def test_broker_id_from_node_id() -> None:
    assert BrokerConfig({"node.id": "4"}).broker_id() == 4
    assert BrokerConfig({"node.id": "4", "broker.id": "2"}).broker_id() == 2


@pytest.mark.parametrize(
    "props, expected",
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "1234"}, 1234),
        ({"log.retention.ms": "1234"}, 1234),
        ({"log.retention.minutes": "2"}, 120_000),
        ({"log.retention.ms": "-1", "log.retention.hours": "1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_precedence(props: dict[str, str], expected: int) -> None:
    assert BrokerConfig(props).retention_ms() == expected


def test_roll_and_flush_precedence() -> None:
    assert BrokerConfig({"log.roll.hours": "2"}).roll_ms() == 7_200_000
    assert BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "500"}).roll_ms() == 500
    assert BrokerConfig({"log.roll.jitter.hours": "1"}).roll_jitter_ms() == 3_600_000
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "3000"}).flush_ms() == 3000
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "3000", "log.flush.interval.ms": "10"}).flush_ms() == 10


def test_from_file_with_overrides(tmp_path: Path) -> None:
    p = tmp_path / "server.properties"
    p.write_text("num.partitions=3\nlog.dirs=/data\n")
    c = BrokerConfig.from_file(p, {"num.partitions": "5"})
    assert c.get_int("num.partitions") == 5 and c.log_dirs() == ["/data"]


# ----------------------------------------------------------------------------- dynamic broker configs


def test_dynamic_layers_and_precedence() -> None:
    base = BrokerConfig({"log.retention.hours": "24", "message.max.bytes": "2000"})
    c = base.with_dynamic(default={"message.max.bytes": "3000"})
    assert c.get_int("message.max.bytes") == 3000
    c = c.with_dynamic({"message.max.bytes": "4000"})
    assert c.get_int("message.max.bytes") == 4000
    assert c.dynamic_broker_configs() == {"message.max.bytes": "4000"}
    assert c.dynamic_default_configs() == {"message.max.bytes": "3000"}
    # None deletes a dynamic value; the next layer shows through again
    assert c.with_dynamic({"message.max.bytes": None}).get_int("message.max.bytes") == 3000
    assert c.with_dynamic({"message.max.bytes": None}, default={"message.max.bytes": None}).get_int(
        "message.max.bytes") == 2000
    # the original is untouched
    assert base.get_int("message.max.bytes") == 2000
    # dynamic log.retention.ms beats static hours
    assert base.with_dynamic(default={"log.retention.ms": "5000"}).retention_ms() == 5000


def test_dynamic_rejects_read_only_unknown_and_invalid() -> None:
    c = BrokerConfig({})
    with pytest.raises(ConfigError, match="broker.id cannot be changed at runtime"):
        c.with_dynamic({"broker.id": "3"})
    with pytest.raises(ConfigError, match="unknown broker config 'bogus'"):
        c.with_dynamic(default={"bogus": "1"})
    with pytest.raises(ConfigError, match="invalid value '-3' for min.insync.replicas"):
        c.with_dynamic({"min.insync.replicas": "-3"})


def _entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    matches = [e for e in entries if e.name == name]
    assert len(matches) == 1, name
    return matches[0]


def test_broker_describe_sources_and_synonyms() -> None:
    c = BrokerConfig({"log.retention.hours": "24", "num.partitions": "3", "ssl.key.password": "secret"})
    c = c.with_dynamic({"log.segment.bytes": "5000"}, default={"log.segment.bytes": "6000", "log.retention.ms": "100"})
    entries = c.describe()
    assert {e.name for e in entries} == set(BROKER_DEFS)
    e = _entry(entries, "num.partitions")
    assert (e.value, e.source, e.read_only, e.type) == ("3", STATIC_BROKER_CONFIG, True, 3)
    assert e.synonyms == [("num.partitions", "3", STATIC_BROKER_CONFIG), ("num.partitions", "1", DEFAULT_CONFIG)]
    e = _entry(entries, "log.segment.bytes")
    assert (e.value, e.source, e.read_only) == ("5000", DYNAMIC_BROKER_CONFIG, False)
    assert e.synonyms == [("log.segment.bytes", "5000", DYNAMIC_BROKER_CONFIG),
                          ("log.segment.bytes", "6000", DYNAMIC_DEFAULT_BROKER_CONFIG),
                          ("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]
    e = _entry(entries, "log.retention.ms")
    assert (e.value, e.source) == ("100", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert e.synonyms == [("log.retention.ms", "100", DYNAMIC_DEFAULT_BROKER_CONFIG),
                          ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
                          ("log.retention.hours", "168", DEFAULT_CONFIG)]
    e = _entry(entries, "log.retention.hours")  # higher-precedence synonyms are dropped, as in Kafka
    assert (e.value, e.source) == ("24", STATIC_BROKER_CONFIG)
    assert e.synonyms[0] == ("log.retention.hours", "24", STATIC_BROKER_CONFIG)
    assert c.retention_ms() == 100
    e = _entry(entries, "ssl.key.password")
    assert (e.value, e.sensitive, e.source, e.type) == (None, True, STATIC_BROKER_CONFIG, 9)
    assert e.synonyms == [("ssl.key.password", None, STATIC_BROKER_CONFIG)]
    e = _entry(entries, "zookeeper.connect")
    assert (e.value, e.source, e.synonyms) == (None, DEFAULT_CONFIG, [])


def test_broker_describe_filters_and_default_resource() -> None:
    c = BrokerConfig({"log.segment.bytes": "7000"}).with_dynamic(default={"log.segment.bytes": "6000"})
    only = c.describe(["log.segment.bytes", "not.a.config"], include_synonyms=False, include_docs=True)
    assert [(e.name, e.synonyms) for e in only] == [("log.segment.bytes", [])]
    assert only[0].doc
    default = c.describe(default_resource=True)
    assert [(e.name, e.value, e.source) for e in default] == [
        ("log.segment.bytes", "6000", DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert default[0].synonyms == [("log.segment.bytes", "6000", DYNAMIC_DEFAULT_BROKER_CONFIG)]


# ----------------------------------------------------------------------------- topic configs


def test_validate_topic_configs_normalizes() -> None:
    out = validate_topic_configs({"cleanup.policy": " compact , delete", "retention.ms": " 1000",
                                  "preallocate": "TRUE", "min.cleanable.dirty.ratio": "0.1"})
    assert out == {"cleanup.policy": "compact,delete", "retention.ms": "1000", "preallocate": "true",
                   "min.cleanable.dirty.ratio": "0.1"}
    assert validate_topic_configs({}) == {}


@pytest.mark.parametrize(
    "configs, match",
    [
        ({"retention.hours": "1"}, "unknown topic config 'retention.hours'"),
        ({"log.retention.ms": "1"}, "unknown topic config"),  # broker names are not topic names
        ({"retention.ms": "-2"}, "invalid value '-2' for retention.ms: must be at least -1"),
        ({"retention.ms": "soon"}, "retention.ms: expected an integer"),
        ({"cleanup.policy": "delete,archive"}, "cleanup.policy: each item must be one of"),
        ({"message.timestamp.type": "NoTime"}, "message.timestamp.type: must be one of: CreateTime, LogAppendTime"),
        ({"compression.type": "bzip2"}, "compression.type: must be one of"),
        ({"segment.bytes": "10"}, "segment.bytes: must be at least 14"),
        ({"max.message.bytes": "-1"}, "max.message.bytes: must be at least 0"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas: must be at least 1"),
        ({"unclean.leader.election.enable": "maybe"}, "expected true or false"),
        ({"leader.replication.throttled.replicas": "0:1,x"}, r"must be \* or a list of partition:broker pairs"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "must not exceed max.compaction.lag.ms"),
        ({"segment.ms": None}, "missing value for topic config segment.ms"),
    ],
)
def test_validate_topic_config_errors(configs: dict[str, str | None], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        validate_topic_configs(configs)


def test_validate_topic_configs_against_broker_defaults() -> None:
    broker = BrokerConfig({"log.cleaner.max.compaction.lag.ms": "100"})
    validate_topic_configs({"min.compaction.lag.ms": "200"})
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "200"}, broker)
    assert validate_topic_configs({"leader.replication.throttled.replicas": "*"}) == {
        "leader.replication.throttled.replicas": "*"}


def test_effective_topic_config_defaults() -> None:
    eff = effective_topic_config(BrokerConfig({}), {})
    assert set(eff) == set(TOPIC_DEFS)
    assert eff["retention.ms"] == "604800000"
    assert eff["segment.ms"] == "604800000"
    assert eff["segment.bytes"] == "1073741824"
    assert eff["cleanup.policy"] == "delete"
    assert eff["max.message.bytes"] == "1048588"
    assert eff["message.timestamp.type"] == "CreateTime"
    assert eff["flush.messages"] == eff["flush.ms"] == str(2**63 - 1)
    assert eff["min.cleanable.dirty.ratio"] == "0.5"
    assert eff["unclean.leader.election.enable"] == "false"
    assert eff["leader.replication.throttled.replicas"] == ""


def test_effective_topic_config_uses_broker_and_overrides() -> None:
    broker = BrokerConfig({"log.retention.minutes": "10", "log.roll.hours": "1", "log.cleanup.policy": "compact",
                           "log.flush.interval.ms": "250", "message.max.bytes": "5000"})
    eff = effective_topic_config(broker, {"max.message.bytes": "9000"})
    assert eff["retention.ms"] == "600000"
    assert eff["segment.ms"] == "3600000"
    assert eff["cleanup.policy"] == "compact"
    assert eff["flush.ms"] == "250"
    assert eff["max.message.bytes"] == "9000"
    values = effective_topic_values(broker.with_dynamic(default={"log.retention.ms": "42"}), {})
    assert values["retention.ms"] == 42 and values["cleanup.policy"] == ["compact"]
    assert values["preallocate"] is False


def test_describe_topic_sources() -> None:
    broker = BrokerConfig({"log.segment.bytes": "2000000", "log.retention.hours": "24"})
    broker = broker.with_dynamic(default={"log.cleanup.policy": "compact"})
    entries = describe_topic_config(broker, {"max.message.bytes": "9000"}, include_synonyms=True)
    assert [e.name for e in entries] == sorted(TOPIC_DEFS)
    by_name = {e.name: e for e in entries}
    e = by_name["max.message.bytes"]
    assert (e.value, e.source, e.read_only, e.sensitive, e.type) == ("9000", DYNAMIC_TOPIC_CONFIG, False, False, 3)
    assert e.synonyms == [("max.message.bytes", "9000", DYNAMIC_TOPIC_CONFIG),
                          ("message.max.bytes", "1048588", DEFAULT_CONFIG)]
    e = by_name["segment.bytes"]
    assert (e.value, e.source) == ("2000000", STATIC_BROKER_CONFIG)
    assert e.synonyms == [("log.segment.bytes", "2000000", STATIC_BROKER_CONFIG),
                          ("log.segment.bytes", "1073741824", DEFAULT_CONFIG)]
    e = by_name["cleanup.policy"]
    assert (e.value, e.source) == ("compact", DYNAMIC_DEFAULT_BROKER_CONFIG)
    e = by_name["retention.ms"]
    assert (e.value, e.source) == (str(24 * 3_600_000), STATIC_BROKER_CONFIG)
    assert e.synonyms == [("log.retention.hours", "24", STATIC_BROKER_CONFIG),
                          ("log.retention.hours", "168", DEFAULT_CONFIG)]
    e = by_name["compression.type"]
    assert (e.value, e.source, e.type) == ("producer", DEFAULT_CONFIG, 2)
    e = by_name["leader.replication.throttled.replicas"]
    assert (e.value, e.source, e.synonyms, e.type) == ("", DEFAULT_CONFIG, [], 7)


def test_describe_topic_synonym_order_full() -> None:
    broker = BrokerConfig({"log.retention.ms": "500", "log.retention.minutes": "7", "log.retention.hours": "2"})
    broker = broker.with_dynamic({"log.retention.ms": "300"}, default={"log.retention.ms": "400"})
    (e,) = describe_topic_config(broker, {"retention.ms": "100"}, include_synonyms=True, names=["retention.ms"])
    assert e.value == "100" and e.source == DYNAMIC_TOPIC_CONFIG
    assert e.synonyms == [
        ("retention.ms", "100", DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "300", DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "400", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "500", STATIC_BROKER_CONFIG),
        ("log.retention.minutes", "7", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "2", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    (e,) = describe_topic_config(broker, {}, include_synonyms=False, names=["retention.ms"])
    assert (e.value, e.source, e.synonyms, e.doc) == ("300", DYNAMIC_BROKER_CONFIG, [], None)


def test_every_definition_has_valid_default_and_doc() -> None:
    for d in list(BROKER_DEFS.values()) + list(TOPIC_DEFS.values()):
        assert d.doc and "\n" not in d.doc, d.name
        if d.validator is not None and d.default is not None:
            assert d.validator.problem(d.default) is None, d.name
    for d in TOPIC_DEFS.values():
        for syn in d.synonyms:
            assert syn in BROKER_DEFS, (d.name, syn)


def test_keys_that_have_no_effect_are_named_at_start_up(tmp_path: Path) -> None:
    """Accepted for compatibility and said so once, never silently ignored (issue 16)."""
    path = tmp_path / "server.properties"
    path.write_text("broker.id=0\nnum.io.threads=16\nnum.network.threads=4\nlog.retention.ms=1000\n")
    config = BrokerConfig.from_file(path)
    assert config.without_effect() == ["num.io.threads", "num.network.threads"]
    assert "inter.broker.listener.name" not in BrokerConfig.from_file(
        path, {"inter.broker.listener.name": "PLAINTEXT"}).without_effect()  # used: replication's listener


def test_every_broker_key_not_marked_unused_is_read_somewhere() -> None:
    """The audit, kept: a key Samsa accepts either has an effect (its name is read by code
    outside the definitions) or says "(accepted; unused)" and is logged at start-up as having
    none. A new key that is neither fails here."""
    import pathlib

    from samsa.config_defs import BROKER_DEFS, UNUSED_MARK

    root = pathlib.Path(__file__).resolve().parents[2] / "samsa"
    code = "\n".join(p.read_text() for p in root.rglob("*.py") if p.name != "config_defs.py")
    unread = [k for k, d in BROKER_DEFS.items()
              if not d.doc.endswith(UNUSED_MARK) and f'"{k}"' not in code and f"'{k}'" not in code]
    assert unread == []
