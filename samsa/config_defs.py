"""The tables behind `samsa.config`: every broker and topic setting Samsa knows, with its type,
Kafka's default, a validator, whether it may change at runtime and whether it is secret.

Names and defaults follow Apache Kafka 3.x; the one-line docs are our own. Settings marked
"(accepted; unused)" are parsed and validated so stock Kafka config files load, but Samsa
does not act on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

ConfigType = Literal["int", "short", "long", "double", "string", "boolean", "list", "password", "class"]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# Kafka's DescribeConfigs ConfigType enum.
KAFKA_CONFIG_TYPE: dict[str, int] = {
    "boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9,
}


class Validator:
    """Checks an already-typed value; `problem` returns what is expected, or None when fine."""

    def problem(self, value: Any) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Validator):
    lo: float | None = None
    hi: float | None = None

    def problem(self, value: Any) -> str | None:
        if value is None:
            return None
        if self.lo is not None and self.hi is not None and not self.lo <= value <= self.hi:
            return f"must be between {self.lo} and {self.hi}"
        if self.lo is not None and value < self.lo:
            return f"must be at least {self.lo}"
        if self.hi is not None and value > self.hi:
            return f"must be at most {self.hi}"
        return None


@dataclass(frozen=True)
class OneOf(Validator):
    choices: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if value is None or value in self.choices:
            return None
        return "must be one of: " + ", ".join(self.choices)


@dataclass(frozen=True)
class ListOf(Validator):
    choices: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        bad = [v for v in value or [] if v not in self.choices]
        return "each item must be one of: " + ", ".join(self.choices) if bad else None


@dataclass(frozen=True)
class ThrottledReplicas(Validator):
    """Kafka's throttled-replica list: `*` alone, or `partition:broker` pairs."""

    def problem(self, value: Any) -> str | None:
        items = list(value or [])
        if items == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", v) for v in items):
            return None
        return "must be * or a list of partition:broker pairs"


@dataclass(frozen=True)
class HostCounts(Validator):
    """`max.connections.per.ip.overrides`: host:count pairs, comma-separated."""

    def problem(self, value: Any) -> str | None:
        for item in str(value or "").split(","):
            item = item.strip()
            if item and not re.fullmatch(r".+:[0-9]+", item):
                return f"must be host:count pairs separated by commas ({item!r} is not)"
        return None


def split_host_port(value: str) -> tuple[str, int] | None:
    """`HOST:PORT` as (host, port); HOST may be empty (every interface) or an IPv6 address in
    brackets. None when the value is not of that form."""
    m = re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[^:\[\]\s]*):([0-9]{1,5})", value.strip())
    if not m or int(m.group(2)) > 65535:
        return None
    return m.group(1).strip("[]"), int(m.group(2))


@dataclass(frozen=True)
class HostPort(Validator):
    """A `HOST:PORT` socket address (empty: unset)."""

    def problem(self, value: Any) -> str | None:
        if not value or split_host_port(str(value)) is not None:
            return None
        return "expected HOST:PORT, e.g. 127.0.0.1:9404 (an empty HOST listens on every interface)"


def at_least(lo: float) -> Range:
    return Range(lo, None)


def between(lo: float, hi: float) -> Range:
    return Range(lo, hi)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True)
class ConfigDef:
    """One setting. `default` is typed (int, float, bool, str, list[str]) or None for "unset"."""

    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    dynamic: bool = False  # Samsa changes it at runtime (a dynamic broker config)
    sensitive: bool = False
    synonyms: tuple[str, ...] = ()  # topic defs: broker keys supplying the default, highest precedence first


# The broker keys Kafka can change at runtime: Kafka 3.9's DynamicBrokerConfig.AllDynamicConfigs
# (ZooKeeper mode, the Kafka Samsa follows), per-broker and cluster-wide alike. Kafka's
# DescribeConfigs says read_only false for exactly these names (not for their listener-prefixed
# forms) and true for every other key, and so does Samsa's. Samsa changes most of them at runtime
# too (`dynamic=True` below); a few it reports as Kafka does but refuses to change while running
# (the listeners, SASL and TLS settings other than a listener's own key and trust stores:
# `samsa.config._check_dynamic` says so). A key Samsa changes at runtime that Kafka 3.9 does
# not (the replication throttles, dynamic in Kafka 4) is reported with read_only false too.
# tests/compat/test_vs_kafka_configs.py keeps this list equal to Kafka 3.9's own.
KAFKA_DYNAMIC_BROKER_CONFIGS = frozenset({
    "advertised.listeners", "background.threads", "compression.gzip.level", "compression.lz4.level",
    "compression.type", "compression.zstd.level", "listener.security.protocol.map", "listeners",
    "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads", "log.cleanup.policy", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.index.interval.bytes", "log.index.size.max.bytes", "log.local.retention.bytes", "log.local.retention.ms",
    "log.message.downconversion.enable", "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.type", "log.preallocate",
    "log.retention.bytes", "log.retention.ms", "log.roll.jitter.ms", "log.roll.ms", "log.segment.bytes",
    "log.segment.delete.delay.ms", "max.connection.creation.rate", "max.connections", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "message.max.bytes", "metric.reporters", "min.insync.replicas",
    "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir", "num.replica.fetchers",
    "principal.builder.class", "producer.id.expiration.ms", "remote.fetch.max.wait.ms",
    "remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second", "sasl.enabled.mechanisms", "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class",
    "ssl.key.password", "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm", "ssl.truststore.certificates",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
    "transaction.partition.verification.enable", "unclean.leader.election.enable",
})


def _b(name: str, type: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       dynamic: bool = False) -> ConfigDef:
    return ConfigDef(name, type, default, doc, validator, dynamic, sensitive=type == "password")


UNUSED_MARK = _UNUSED = " (accepted; unused)"  # ends the description of a key that has no effect

BROKER_DEF_LIST: list[ConfigDef] = [
    # identity and networking
    _b("broker.id", "int", 0, "Numeric id of this broker; unique in a cluster.", at_least(-1)),
    _b("node.id", "int", -1, "KRaft-style node id; used as broker.id when broker.id is not set.", at_least(-1)),
    _b("cluster.id", "string", None, "Samsa extension: fixed cluster id instead of a generated one."),
    _b("broker.rack", "string", None, "Rack of this broker, reported in metadata."),
    _b("listeners", "string", "PLAINTEXT://:9092",
       "Comma-separated NAME://host:port sockets to listen on; empty host means all interfaces."),
    _b("advertised.listeners", "string", None, "Listeners handed to clients in metadata; defaults to listeners."),
    _b("prometheus.listener", "string", None,
       "Samsa extension: HOST:PORT where the broker serves its metrics in Prometheus' text format at GET /metrics "
       "(docs/metrics.md); unset, no metrics endpoint.", HostPort()),
    _b("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       "Security protocol of each listener name, as NAME:PROTOCOL pairs."),
    _b("inter.broker.listener.name", "string", None, "Listener used between brokers (replication, probes)."),
    _b("security.inter.broker.protocol", "string", "PLAINTEXT",
       "Listener (named as its protocol) used between brokers when inter.broker.listener.name is unset.",
       OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))),
    _b("socket.request.max.bytes", "int", 104857600, "Largest request the broker will read.", at_least(1)),
    # Kafka's default for both is 102400. Samsa's is -1: Linux's autotuned buffers took 1 KiB
    # acks=all produce from 572k to 700k records/s on loopback (bench/produce_cpu.py, medians).
    _b("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF for client sockets (Kafka's default); -1 keeps the "
       "OS's, autotuned (a librdkafka consumer of 100 B records read 10-40% slower with it, bench/RESULTS.md).",
       at_least(-1)),
    _b("socket.receive.buffer.bytes", "int", -1, "SO_RCVBUF for client sockets; -1 keeps the OS's, autotuned "
       "(Kafka's default is 102400, with which 1 KiB acks=all produce was 20% slower, bench/RESULTS.md).",
       at_least(-1)),
    _b("socket.listen.backlog.size", "int", 50, "Pending-connection backlog of each listening socket.", at_least(1)),
    _b("num.network.threads", "int", 3, "Network threads." + _UNUSED, at_least(1), dynamic=True),
    _b("num.io.threads", "int", 8, "Request handler threads." + _UNUSED, at_least(1), dynamic=True),
    _b("background.threads", "int", 10, "Background task threads." + _UNUSED, at_least(1), dynamic=True),
    _b("queued.max.requests", "int", 500, "Requests in flight on one connection before reading from it pauses.",
       at_least(1)),
    _b("queued.max.request.bytes", "long", -1, "Bytes of queued requests before reading pauses; -1 is no limit."),
    _b("connections.max.idle.ms", "long", 600000, "Close connections idle for longer than this."),
    _b("max.connections", "int", INT_MAX, "Most client connections at once.", at_least(0), dynamic=True),
    _b("max.connections.per.ip", "int", INT_MAX, "Most connections from one address.", at_least(0), dynamic=True),
    _b("max.connections.per.ip.overrides", "string", "", "Per-address limits as host:count pairs.", HostCounts(),
       dynamic=True),
    # client quotas (samsa/server/quotas.py); the quotas themselves are users' and client-ids' configs
    _b("quota.window.num", "int", 11, "Samples a client quota's rate is measured over.", at_least(1)),
    _b("quota.window.size.seconds", "int", 1, "Length of each sample of a client quota's rate.", at_least(1)),
    _b("fetch.max.bytes", "int", 57671680, "Most bytes one fetch response may carry.", at_least(1024)),
    _b("max.incremental.fetch.session.cache.slots", "int", 1000,
       "Fetch sessions (KIP-227) kept: followers and consumers that fetch incrementally.", at_least(0)),
    # TLS (samsa/server/tls.py); each may be set per listener as listener.name.<name>.<key>
    # (sensitive values are never described)
    _b("ssl.keystore.type", "string", "JKS", "Key store format: PEM or PKCS12 (JKS is refused: convert it to "
       "PKCS12 with keytool -importkeystore).", OneOf(("JKS", "PEM", "PKCS12"))),
    _b("ssl.keystore.location", "string", None, "Key store file: PEM (private key and certificate chain) or PKCS12."),
    _b("ssl.keystore.password", "password", None, "Key store password (PKCS12)."),
    _b("ssl.key.password", "password", None, "Private key password (an encrypted PEM key)."),
    _b("ssl.keystore.key", "password", None, "PEM private key, inline (with ssl.keystore.certificate.chain)."),
    _b("ssl.keystore.certificate.chain", "password", None, "PEM certificate chain, inline."),
    _b("ssl.truststore.type", "string", "JKS", "Trust store format: PEM or PKCS12.",
       OneOf(("JKS", "PEM", "PKCS12"))),
    _b("ssl.truststore.location", "string", None, "Trust store file: PEM certificates or PKCS12."),
    _b("ssl.truststore.password", "password", None, "Trust store password (PKCS12)."),
    _b("ssl.truststore.certificates", "password", None, "Trusted PEM certificates, inline."),
    _b("ssl.client.auth", "string", "none", "Client certificates: none, requested or required (mutual TLS).",
       OneOf(("none", "requested", "required"))),
    _b("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted."),
    _b("ssl.protocol", "string", "TLSv1.3", "TLS version of the context; ssl.enabled.protocols decides." + _UNUSED),
    _b("ssl.cipher.suites", "list", [], "TLS 1.2 cipher suites, by OpenSSL name (empty: OpenSSL's defaults)."),
    _b("ssl.endpoint.identification.algorithm", "string", "https",
       "Between brokers: https checks the other broker's certificate against its host name; empty does not."),
    # SASL (samsa/server/sasl.py, scram.py); sasl.enabled.mechanisms may be set per listener, PLAIN's
    # users as listener.name.<name>.plain.sasl.jaas.config; SCRAM's users are in /config/users
    _b("sasl.enabled.mechanisms", "list", ["GSSAPI"],
       "SASL mechanisms a SASL listener offers: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI, Kafka's default, "
       "is refused). SCRAM users are credentials in ZooKeeper (samsa configs --entity-type users)."),
    _b("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
       "SASL mechanism brokers authenticate to each other with on a SASL inter-broker listener (PLAIN, "
       "SCRAM-SHA-256, SCRAM-SHA-512), as the username/password of that listener's JAAS config for it."),
    _b("connection.failed.authentication.delay.ms", "int", 100,
       "A failed SASL login is answered this much later (slowing password guessing); 0: at once.", at_least(0)),
    _b("sasl.server.max.receive.size", "int", 524288,
       "Largest request a client may send on a SASL listener before it has authenticated (a larger one "
       "closes the connection).", at_least(1)),
    _b("connections.max.reauth.ms", "long", 0,
       "Longest SASL session before the client must authenticate again on its connection (KIP-368; 0: no "
       "limit); a connection that has not is closed at its next request.", at_least(0)),
    _b("ssl.principal.mapping.rules", "string", "DEFAULT",
       "Rules mapping a client certificate's distinguished name to a principal name (Kafka's RULE:...)."),
    _b("principal.builder.class", "class",
       "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
       "Class that maps connections to principals." + _UNUSED),
    # Kerberos (GSSAPI) and token-refreshing logins (OAUTHBEARER): Samsa offers neither, and
    # keeps Kafka's keys (dynamic, as Kafka's listener configs) so that files and scripts carry over.
    _b("sasl.kerberos.service.name", "string", None, "Kerberos name the broker runs as (GSSAPI)." + _UNUSED,
       dynamic=True),
    _b("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "Kerberos kinit command (GSSAPI)." + _UNUSED,
       dynamic=True),
    _b("sasl.kerberos.ticket.renew.window.factor", "double", 0.8,
       "Share of a Kerberos ticket's life after which it is renewed (GSSAPI)." + _UNUSED, between(0, 1), dynamic=True),
    _b("sasl.kerberos.ticket.renew.jitter", "double", 0.05,
       "Random jitter added to the Kerberos renewal time (GSSAPI)." + _UNUSED, between(0, 1), dynamic=True),
    _b("sasl.kerberos.min.time.before.relogin", "long", 60000,
       "Least time between Kerberos relogins, ms (GSSAPI)." + _UNUSED, at_least(0), dynamic=True),
    _b("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"],
       "Rules mapping Kerberos principals to short names (GSSAPI)." + _UNUSED, dynamic=True),
    _b("sasl.login.refresh.window.factor", "double", 0.8,
       "Share of a login credential's life after which it is refreshed (OAUTHBEARER)." + _UNUSED, between(0.5, 1),
       dynamic=True),
    _b("sasl.login.refresh.window.jitter", "double", 0.05,
       "Random jitter added to the credential refresh time (OAUTHBEARER)." + _UNUSED, between(0, 0.25), dynamic=True),
    _b("sasl.login.refresh.min.period.seconds", "short", 60,
       "Least time between credential refreshes (OAUTHBEARER)." + _UNUSED, between(0, 900), dynamic=True),
    _b("sasl.login.refresh.buffer.seconds", "short", 300,
       "Time before expiry at which a credential is refreshed (OAUTHBEARER)." + _UNUSED, between(0, 3600),
       dynamic=True),
    # JSSE notions (the Java TLS stack's): Samsa's TLS is OpenSSL's.
    _b("ssl.keymanager.algorithm", "string", "SunX509", "JSSE key manager algorithm." + _UNUSED, dynamic=True),
    _b("ssl.trustmanager.algorithm", "string", "PKIX", "JSSE trust manager algorithm." + _UNUSED, dynamic=True),
    _b("ssl.secure.random.implementation", "string", None, "JSSE SecureRandom implementation." + _UNUSED,
       dynamic=True),
    _b("ssl.provider", "string", None, "JSSE security provider." + _UNUSED, dynamic=True),
    # ACLs (samsa/server/authorizer.py)
    _b("authorizer.class.name", "string", "",
       "ACL authorizer: kafka.security.authorizer.AclAuthorizer or samsa.server.authorizer.AclAuthorizer (empty: "
       "none, everything is allowed); any other class is refused."),
    _b("super.users", "string", "", "Principals allowed everything whatever the ACLs, separated by ;."),
    _b("allow.everyone.if.no.acl.found", "boolean", False,
       "With an authorizer, allow a resource that has no ACL at all to everyone."),
    # ZooKeeper (accepted so Kafka files load)
    _b("zookeeper.connect", "string", None,
       "ZooKeeper connection string (host:port,...[/chroot]); unset runs one broker with an embedded store."),
    _b("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout."),
    _b("zookeeper.connection.timeout.ms", "int", None, "ZooKeeper connect timeout (default: the session timeout)."),
    # topics and logs
    _b("log.dir", "string", "/tmp/kafka-logs", "Data directory, used when log.dirs is not set."),
    _b("log.dirs", "string", None, "Comma-separated data directories; overrides log.dir."),
    _b("num.partitions", "int", 1, "Partitions of an auto-created topic.", at_least(1)),
    _b("default.replication.factor", "int", 1, "Replication factor of an auto-created topic.", at_least(1)),
    _b("min.insync.replicas", "int", 1, "Replicas that must ack an acks=all write.", at_least(1), dynamic=True),
    _b("auto.create.topics.enable", "boolean", True, "Create unknown topics on metadata or produce requests."),
    _b("delete.topic.enable", "boolean", True, "Allow topics to be deleted."),
    _b("log.retention.hours", "int", 168, "Hours to keep a segment; lowest precedence of the three."),
    _b("log.retention.minutes", "int", None, "Minutes to keep a segment; beats log.retention.hours."),
    _b("log.retention.ms", "long", None, "Milliseconds to keep a segment; beats minutes and hours; -1 is forever.",
       dynamic=True),
    _b("log.retention.bytes", "long", -1, "Most bytes kept per partition; -1 is no limit.", dynamic=True),
    _b("log.retention.check.interval.ms", "long", 300000, "How often retention is enforced.", at_least(1)),
    _b("log.segment.bytes", "int", 1073741824, "Roll a new segment at this size.", at_least(14), dynamic=True),
    _b("log.roll.hours", "int", 168, "Roll a new segment after this many hours.", at_least(1)),
    _b("log.roll.ms", "long", None, "Roll a new segment after this many ms; beats log.roll.hours.", at_least(1),
       dynamic=True),
    _b("log.roll.jitter.hours", "int", 0, "Random jitter subtracted from the roll time, in hours.", at_least(0)),
    _b("log.roll.jitter.ms", "long", None, "Roll jitter in ms; beats log.roll.jitter.hours.", at_least(0),
       dynamic=True),
    _b("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", at_least(0), dynamic=True),
    _b("log.index.size.max.bytes", "int", 10485760, "Largest offset index file; a full index rolls the segment.",
       at_least(4), dynamic=True),
    _b("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many appended messages.", at_least(1),
       dynamic=True),
    _b("log.flush.interval.ms", "long", None,
       "fsync when data is older than this; unset uses log.flush.scheduler.interval.ms.", at_least(0), dynamic=True),
    _b("log.flush.scheduler.interval.ms", "long", LONG_MAX,
       "How often the flusher checks logs; also the flush.ms fallback."),
    _b("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed.",
       at_least(0)),
    _b("log.flush.start.offset.checkpoint.interval.ms", "int", 60000,
       "How often log start offsets are checkpointed (with the recovery points here)." + _UNUSED, at_least(0)),
    _b("log.segment.delete.delay.ms", "long", 60000, "Wait before deleting a segment file from disk.", at_least(0),
       dynamic=True),
    _b("log.cleanup.policy", "list", ["delete"], "Default cleanup policy: delete, compact or both.",
       ListOf(CLEANUP_POLICIES), dynamic=True),
    _b("log.cleaner.enable", "boolean", True, "Run the log cleaner for compacted topics."),
    _b("log.cleaner.threads", "int", 1, "Logs cleaned at once, each in a worker thread.", at_least(0), dynamic=True),
    _b("log.cleaner.delete.retention.ms", "long", 86400000,
       "How long a tombstone (and a transaction marker) stays after its batch was first cleaned.", at_least(0),
       dynamic=True),
    _b("log.cleaner.min.compaction.lag.ms", "long", 0, "Youngest record age eligible for compaction.", at_least(0),
       dynamic=True),
    _b("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX,
       "Oldest age a record may reach uncompacted: such a log is cleaned whatever its dirty ratio.", at_least(1),
       dynamic=True),
    _b("log.cleaner.backoff.ms", "long", 15000, "How often the cleaner looks for logs to compact.", at_least(0),
       dynamic=True),
    _b("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty fraction of a log that triggers compaction.",
       between(0, 1), dynamic=True),
    _b("log.cleaner.dedupe.buffer.size", "long", 134217728,
       "Memory for the cleaners' offset maps (key hash -> latest offset), shared by the threads.",
       at_least(1 << 20), dynamic=True),
    _b("log.cleaner.io.buffer.load.factor", "double", 0.9, "How full an offset map may get before a clean stops "
       "at the segment it reached (the rest is cleaned next time).", between(0.1, 0.95), dynamic=True),
    _b("log.cleaner.io.buffer.size", "int", 524288,
       "Memory for the cleaners' read and write buffers, shared by the threads.", at_least(1024), dynamic=True),
    _b("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308,
       "Bytes read plus written per second by all cleaner threads together.", at_least(1), dynamic=True),
    _b("log.preallocate", "boolean", False, "Preallocate segment files." + _UNUSED, dynamic=True),
    _b("num.recovery.threads.per.data.dir", "int", 1,
       "Threads per data dir that open the logs at startup (recovering them after an unclean stop) and flush them at "
       "shutdown.", at_least(1), dynamic=True),
    _b("message.max.bytes", "int", 1048588, "Largest record batch accepted.", at_least(0), dynamic=True),
    _b("log.message.timestamp.type", "string", "CreateTime",
       "Timestamp stored on records: CreateTime or LogAppendTime.", OneOf(TIMESTAMP_TYPES), dynamic=True),
    _b("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "Deprecated: largest allowed CreateTime skew.",
       at_least(0), dynamic=True),
    _b("log.message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a CreateTime may be.",
       at_least(0), dynamic=True),
    _b("log.message.timestamp.after.max.ms", "long", 3600000, "How far in the future a CreateTime may be.",
       at_least(0), dynamic=True),
    _b("log.message.downconversion.enable", "boolean", True, "Down-convert batches for old fetchers." + _UNUSED,
       dynamic=True),
    _b("log.message.format.version", "string", "3.0-IV1", "Deprecated record format version." + _UNUSED),
    _b("compression.type", "string", "producer", "Compression of stored batches; producer keeps the producer's codec.",
       OneOf(COMPRESSION_TYPES), dynamic=True),
    # groups and offsets
    _b("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", at_least(1)),
    _b("offsets.topic.replication.factor", "short", 3, "Replication factor of __consumer_offsets.", at_least(1)),
    _b("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", at_least(1)),
    _b("offsets.topic.compression.codec", "int", 0, "Codec id for offset commits." + _UNUSED),
    _b("offsets.load.buffer.size", "int", 5242880, "Read buffer when loading offsets." + _UNUSED, at_least(1)),
    _b("offsets.retention.minutes", "int", 10080, "Keep committed offsets of empty groups this long.", at_least(1)),
    _b("offsets.retention.check.interval.ms", "long", 600000, "How often stale offsets are expired.", at_least(1)),
    _b("offsets.commit.timeout.ms", "int", 5000, "Offset commit timeout.", at_least(1)),
    _b("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members before the first rebalance of a group."),
    _b("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    _b("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    _b("offset.metadata.max.bytes", "int", 4096, "Largest metadata string a committed offset may carry.", at_least(0)),
    _b("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval of KIP-848 consumer group members.",
       at_least(1)),
    _b("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of KIP-848 consumer group members.",
       at_least(1)),
    _b("group.consumer.max.size", "int", INT_MAX, "Most members in one KIP-848 consumer group.", at_least(1)),
    _b("group.max.size", "int", INT_MAX, "Most members in one group.", at_least(1)),
    # replication and leadership
    _b("replica.lag.time.max.ms", "long", 30000, "Follower lag before it leaves the ISR."),
    _b("replica.fetch.max.bytes", "int", 1048576, "Bytes per partition in replica fetches.", at_least(0)),
    _b("follower.replication.throttled.rate", "long", LONG_MAX,
       "Bytes/s this broker's throttled follower replicas may fetch.", at_least(0), dynamic=True),
    _b("leader.replication.throttled.rate", "long", LONG_MAX,
       "Bytes/s throttled replicas may fetch from this broker's leaders." + _UNUSED, at_least(0), dynamic=True),
    _b("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
       "Bytes/s that replicas moving between this broker's log dirs (AlterReplicaLogDirs) copy, all together.",
       at_least(0), dynamic=True),
    _b("replica.fetch.response.max.bytes", "int", 10485760, "Bytes per replica fetch response.", at_least(0)),
    _b("replica.fetch.wait.max.ms", "int", 500, "Longest a replica fetch waits for data.", at_least(0)),
    _b("replica.fetch.backoff.ms", "int", 1000, "Pause after a failed replica fetch." + _UNUSED, at_least(0)),
    _b("replica.socket.timeout.ms", "int", 30000, "Socket timeout of replica fetches.", at_least(1)),
    _b("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "How often high watermarks are saved.",
       at_least(1)),
    _b("num.replica.fetchers", "int", 1, "Replica fetcher threads." + _UNUSED, dynamic=True),
    _b("unclean.leader.election.enable", "boolean", False, "Allow out-of-sync replicas to become leader.",
       dynamic=True),
    _b("auto.leader.rebalance.enable", "boolean", True, "Move leadership back to preferred replicas."),
    _b("leader.imbalance.check.interval.seconds", "long", 300, "How often leader balance is checked.", at_least(1)),
    _b("leader.imbalance.per.broker.percentage", "int", 10, "Leader imbalance that triggers a rebalance."),
    _b("controlled.shutdown.enable", "boolean", True, "Hand off leadership before shutting down."),
    _b("controlled.shutdown.max.retries", "int", 3, "Controlled shutdown attempts: each waits up to "
       "controlled.shutdown.retry.backoff.ms for leadership to move."),
    _b("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait for leadership to move, per attempt."),
    # transactions and idempotence
    _b("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", at_least(1)),
    _b("transaction.state.log.replication.factor", "short", 3, "Replication factor of __transaction_state.",
       at_least(1)),
    _b("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", at_least(1)),
    _b("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.",
       at_least(1)),
    _b("transaction.state.log.load.buffer.size", "int", 5242880, "Read buffer when loading transactions." + _UNUSED,
       at_least(1)),
    _b("transaction.max.timeout.ms", "int", 900000, "Largest transaction timeout a producer may ask for.",
       at_least(1)),
    _b("transactional.id.expiration.ms", "int", 604800000, "Forget idle transactional ids after this long.",
       at_least(1)),
    _b("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
       "How often timed-out transactions are aborted.", at_least(1)),
    _b("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
       "How often expired transactional ids are removed.", at_least(1)),
    _b("request.timeout.ms", "int", 30000, "How long the transaction coordinator waits for its own writes to "
       "replicate and for another broker to answer it.", at_least(0)),
    _b("transaction.version", "short", 2, "Samsa extension: the level at which ApiVersions finalizes the feature "
       "transaction.version (KIP-890; Kafka sets it for the cluster with kafka-storage format --feature or "
       "kafka-features). 2: a client that knows it (Kafka's Java client 4.x) uses transaction version 2; 1 or 0: "
       "it uses version 1. Both versions are served whatever the level; give every broker the same.",
       between(0, 2)),
    _b("transaction.partition.verification.enable", "boolean", True, "A partition leader asks the transaction "
       "coordinator before a producer's first transactional write to it (KIP-890).", dynamic=True),
    _b("producer.id.expiration.ms", "int", 86400000, "Forget idle producer ids after this long." + _UNUSED, at_least(1),
       dynamic=True),
]


def _t(name: str, type: ConfigType, doc: str, synonyms: tuple[str, ...] = (), validator: Validator | None = None,
       default: Any = None) -> ConfigDef:
    return ConfigDef(name, type, default, doc, validator, dynamic=True, synonyms=synonyms)


TOPIC_DEF_LIST: list[ConfigDef] = [
    _t("cleanup.policy", "list", "delete, compact, or both.", ("log.cleanup.policy",), ListOf(CLEANUP_POLICIES)),
    _t("compression.type", "string", "Compression of stored batches.", ("compression.type",), OneOf(COMPRESSION_TYPES)),
    _t("delete.retention.ms", "long", "How long compaction keeps tombstones.", ("log.cleaner.delete.retention.ms",),
       at_least(0)),
    _t("file.delete.delay.ms", "long", "Wait before deleting a segment file.", ("log.segment.delete.delay.ms",),
       at_least(0)),
    _t("flush.messages", "long", "fsync after this many messages.", ("log.flush.interval.messages",), at_least(1)),
    _t("flush.ms", "long", "fsync when data is older than this.",
       ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), at_least(0)),
    _t("follower.replication.throttled.replicas", "list", "Replicas whose fetching is throttled (reassignments).",
       validator=ThrottledReplicas(), default=[]),
    _t("index.interval.bytes", "int", "Bytes between offset index entries.", ("log.index.interval.bytes",),
       at_least(0)),
    _t("leader.replication.throttled.replicas", "list", "Throttled leader replicas." + _UNUSED,
       validator=ThrottledReplicas(), default=[]),
    _t("max.compaction.lag.ms", "long", "Oldest uncompacted message age allowed.",
       ("log.cleaner.max.compaction.lag.ms",), at_least(1)),
    _t("max.message.bytes", "int", "Largest record batch accepted.", ("message.max.bytes",), at_least(0)),
    _t("message.downconversion.enable", "boolean", "Down-convert for old fetchers.",
       ("log.message.downconversion.enable",)),
    _t("message.format.version", "string", "Deprecated record format version." + _UNUSED,
       ("log.message.format.version",)),
    _t("message.timestamp.after.max.ms", "long", "How far in the future a CreateTime may be.",
       ("log.message.timestamp.after.max.ms",), at_least(0)),
    _t("message.timestamp.before.max.ms", "long", "How far in the past a CreateTime may be.",
       ("log.message.timestamp.before.max.ms",), at_least(0)),
    _t("message.timestamp.difference.max.ms", "long", "Deprecated: largest CreateTime skew.",
       ("log.message.timestamp.difference.max.ms",), at_least(0)),
    _t("message.timestamp.type", "string", "CreateTime or LogAppendTime.", ("log.message.timestamp.type",),
       OneOf(TIMESTAMP_TYPES)),
    _t("min.cleanable.dirty.ratio", "double", "Dirty fraction that triggers compaction.",
       ("log.cleaner.min.cleanable.ratio",), between(0, 1)),
    _t("min.compaction.lag.ms", "long", "Youngest message age eligible for compaction.",
       ("log.cleaner.min.compaction.lag.ms",), at_least(0)),
    _t("min.insync.replicas", "int", "Replicas that must ack an acks=all write.", ("min.insync.replicas",),
       at_least(1)),
    _t("preallocate", "boolean", "Preallocate segment files.", ("log.preallocate",)),
    _t("retention.bytes", "long", "Most bytes kept per partition; -1 is no limit.", ("log.retention.bytes",)),
    _t("retention.ms", "long", "How long segments are kept; -1 is forever.",
       ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), at_least(-1)),
    _t("segment.bytes", "int", "Roll a new segment at this size.", ("log.segment.bytes",), at_least(14)),
    _t("segment.index.bytes", "int", "Largest offset index file.", ("log.index.size.max.bytes",), at_least(4)),
    _t("segment.jitter.ms", "long", "Random jitter subtracted from segment.ms.",
       ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0)),
    _t("segment.ms", "long", "Roll a new segment after this long.", ("log.roll.ms", "log.roll.hours"), at_least(1)),
    _t("unclean.leader.election.enable", "boolean", "Allow out-of-sync replicas to become leader.",
       ("unclean.leader.election.enable",)),
]

BROKER_DEFS: dict[str, ConfigDef] = {d.name: d for d in BROKER_DEF_LIST}
TOPIC_DEFS: dict[str, ConfigDef] = {d.name: d for d in TOPIC_DEF_LIST}

# Broker keys that stand for one another, highest precedence first (Kafka's brokerConfigSynonyms).
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """Broker keys that are synonyms of `name` (including it), highest precedence first."""
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def precedence_group(name: str) -> tuple[str, ...]:
    """Keys that a dynamic value of `name` hides in lower layers (so precedence stays Kafka's)."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


# Users' and client-ids' quota keys (Kafka's QuotaConfig user/client-id configs), with their
# types: integral ("long") or not ("double"). Set through AlterClientQuotas and `samsa configs
# --entity-type users|clients`; applied by samsa/server/quotas.py.
CLIENT_QUOTA_TYPES: dict[str, Literal["long", "double"]] = {
    "producer_byte_rate": "long",
    "consumer_byte_rate": "long",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}
# Quota keys Kafka has and Samsa refuses to set, with why (they would be accepted and ignored).
CLIENT_QUOTA_REFUSED: dict[str, str] = {
    "controller_mutation_rate": "controller mutation quotas (KIP-599) are not implemented by Samsa",
}
