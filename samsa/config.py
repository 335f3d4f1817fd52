"""Configuration model: Java .properties parsing, typed and validated broker settings with dynamic
layers, topic-level overrides, and Kafka-style DescribeConfigs entries (sources and synonyms).

Pure Python; the only I/O is `load_properties` reading a file. Definitions live in
`samsa.config_defs`.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from samsa.config_defs import (
    BROKER_DEF_LIST,
    BROKER_DEFS,
    KAFKA_CONFIG_TYPE,
    KAFKA_DYNAMIC_BROKER_CONFIGS,
    TOPIC_DEF_LIST,
    TOPIC_DEFS,
    UNUSED_MARK,
    ConfigDef,
    broker_synonyms,
    precedence_group,
    split_host_port,
)

__all__ = [
    "BROKER_DEFS", "TOPIC_DEFS", "ConfigDef", "ConfigError", "ConfigEntry", "Listener", "BrokerConfig",
    "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_LOGGER_CONFIG", "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG",
    "parse_properties", "load_properties", "load_broker_config", "unknown_keys", "parse_value",
    "format_value", "validate_topic_configs", "effective_topic_config", "effective_topic_values",
    "describe_topic_config",
]

# Kafka's DescribeConfigs ConfigSource ids.
UNKNOWN_CONFIG = 0
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigError(ValueError):
    """A configuration problem, described in one line fit for a user (or an INVALID_CONFIG reply)."""


# --------------------------------------------------------------------------- .properties files

_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _odd_trailing_backslashes(s: str) -> bool:
    return (len(s) - len(s.rstrip("\\"))) % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Java's rule: the key ends at the first unescaped '=', ':' or whitespace; then whitespace,
    at most one '=' or ':', and more whitespace are skipped; the rest is the value."""
    n, i, escaped, has_sep = len(line), 0, False, False
    value_start = n
    while i < n:
        c = line[i]
        if c in "=:" and not escaped:
            value_start, has_sep = i + 1, True
            break
        if c in _WS and not escaped:
            value_start = i + 1
            break
        escaped = (not escaped) if c == "\\" else False
        i += 1
    key_end = i
    while value_start < n:
        c = line[value_start]
        if c not in _WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
        elif i >= n:
            break  # a lone trailing backslash is dropped
        elif s[i] == "u":
            digits = s[i + 1:i + 5]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("malformed \\uXXXX escape")
            out.append(chr(int(digits, 16)))
            i += 5
        else:
            out.append(_ESCAPES.get(s[i], s[i]))
            i += 1
    text = "".join(out)
    try:  # \uD83D\uDE00-style surrogate pairs become one character, as in Java
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        return text


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java .properties text. Later duplicates win; values keep trailing whitespace, as in
    Java (BrokerConfig trims them, as Kafka does)."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: dict[str, str] = {}
    i, n = 0, len(lines)
    while i < n:
        lineno = i + 1
        logical = lines[i].lstrip(_WS)
        i += 1
        if not logical or logical[0] in "#!":
            continue
        while _odd_trailing_backslashes(logical):  # line continuation
            logical = logical[:-1]
            if i >= n:
                break
            logical += lines[i].lstrip(_WS)
            i += 1
        if not logical:
            continue
        key, value = _split_key_value(logical)
        try:
            out[_unescape(key)] = _unescape(value)
        except ValueError as e:
            raise ConfigError(f"{source}, line {lineno}: {e}") from None
    return out


def load_properties(path: str | Path) -> dict[str, str]:
    """Read and parse a .properties file (UTF-8, falling back to ISO-8859-1 like Java)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, str(path))


LISTENER_PREFIX = "listener.name."
# Keys a listener may override as listener.name.<name>.<key> (Kafka's per-listener configs).
PER_LISTENER = re.compile(r"ssl\..+|sasl\.enabled\.mechanisms")
# Key and trust stores may change at runtime, per listener and per broker only (Kafka's
# SslConfigs.RECONFIGURABLE_CONFIGS): a certificate rotation without a restart.
DYNAMIC_PER_LISTENER = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates"})
# A mechanism's JAAS config exists only per listener: listener.name.<name>.<mechanism>.sasl.jaas.config
JAAS_KEY = re.compile(r"([a-z0-9-]+)\.sasl\.jaas\.config")


def listener_key(key: str) -> tuple[str, str] | None:
    """`listener.name.<listener>.<key>` -> (LISTENER, key) for a key that may be set per listener."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    name, dot, rest = key[len(LISTENER_PREFIX):].partition(".")
    if not dot or not name:
        return None
    if JAAS_KEY.fullmatch(rest):
        return name.upper(), rest
    if rest not in BROKER_DEFS or not PER_LISTENER.fullmatch(rest):
        return None
    return name.upper(), rest


def unknown_keys(props: Iterable[str]) -> list[str]:
    """Keys that are not broker settings Samsa knows (the caller logs them; they are not errors)."""
    return sorted(k for k in props if k not in BROKER_DEFS and listener_key(k) is None)


# --------------------------------------------------------------------------- typed values

_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT_BITS = {"short": 16, "int": 32, "long": 64}


def _invalid(name: str, raw: str, expected: str) -> ConfigError:
    return ConfigError(f"invalid value {raw!r} for {name}: {expected}")


def parse_value(d: ConfigDef, raw: str) -> Any:
    """Convert a string to `d`'s type and validate it; raises ConfigError naming the key."""
    s = raw.strip()
    value: Any
    if d.type in _INT_BITS:
        bits = _INT_BITS[d.type]
        if not _INT_RE.fullmatch(s):
            raise _invalid(d.name, raw, "expected an integer")
        value = int(s)
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise _invalid(d.name, raw, f"expected a {bits}-bit integer")
    elif d.type == "double":
        try:
            value = float(s)
        except ValueError:
            value = math.nan
        if "_" in s or not math.isfinite(value):
            raise _invalid(d.name, raw, "expected a number")
    elif d.type == "boolean":
        if s.lower() not in ("true", "false"):
            raise _invalid(d.name, raw, "expected true or false")
        value = s.lower() == "true"
    elif d.type == "list":
        value = [item.strip() for item in s.split(",") if item.strip()]
    elif d.type == "class" and not s:
        raise _invalid(d.name, raw, "expected a class name")
    else:
        value = s
    problem = d.validator.problem(value) if d.validator else None
    if problem:
        raise _invalid(d.name, raw, problem)
    return value


def format_value(d: ConfigDef, value: Any) -> str | None:
    """A typed value as Kafka would print it (lists comma-joined, booleans lower case)."""
    if value is None:
        return None
    if d.type == "boolean":
        return "true" if value else "false"
    if d.type == "list":
        return ",".join(value)
    return str(value)


@dataclass
class ConfigEntry:
    """One DescribeConfigs result row. `synonyms` are (name, value, source), highest precedence first."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
    type: int = 0
    doc: str | None = None


# --------------------------------------------------------------------------- listeners

class Listener(NamedTuple):
    name: str
    host: str  # "" means all interfaces
    port: int


_LISTENER_RE = re.compile(r"([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.%a-zA-Z]*\]|[^:\[\]/]*):(-?[0-9]+)")
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _parse_listeners(key: str, raw: str) -> list[Listener]:
    out: list[Listener] = []
    for item in (p.strip() for p in raw.split(",")):
        if not item:
            continue
        m = _LISTENER_RE.fullmatch(item)
        if not m:
            raise _invalid(key, item, "expected NAME://host:port, e.g. PLAINTEXT://:9092")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise _invalid(key, item, "port must be between 0 and 65535")
        host = m.group(2)
        if host.startswith("["):
            host = host[1:-1]
        name = m.group(1).upper()
        if any(lst.name == name for lst in out):
            raise _invalid(key, raw, f"listener name {name} is used more than once")
        out.append(Listener(name, host, port))
    return out


# --------------------------------------------------------------------------- broker config

def _clean(props: Mapping[str, str | None] | None) -> dict[str, str]:
    return {str(k).strip(): str(v).strip() for k, v in (props or {}).items() if v is not None}


_UNSET = object()


class BrokerConfig:
    """Broker settings: static (file + overrides), then dynamic cluster defaults, then dynamic
    per-broker values, each layer beating the one before. Immutable: `with_dynamic` returns a copy.

    `hostname` is what an empty or wildcard listener host is advertised as (default: FQDN)."""

    def __init__(self, props: Mapping[str, str] | None = None, *,
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None,
                 hostname: str | None = None) -> None:
        self._static = _clean(props)
        self._dyn_default = _clean(dynamic_default)
        self._dyn_broker = _clean(dynamic_broker)
        self._hostname = hostname
        _check_dynamic(self._dyn_default.keys())
        _check_dynamic(self._dyn_broker.keys())
        merged = {k: v for k, v in self._static.items() if k in BROKER_DEFS}
        for layer in (self._dyn_default, self._dyn_broker):
            for k in layer:  # a dynamic ms value hides static minutes/hours, as in Kafka
                for syn in precedence_group(k):
                    merged.pop(syn, None)
            merged.update(layer)
        for layer in (self._static, self._dyn_default, self._dyn_broker):
            for k, v in layer.items():
                if k in BROKER_DEFS:
                    parse_value(BROKER_DEFS[k], v)  # every layer must be valid, even if hidden
        self._per_listener: dict[tuple[str, str], Any] = {}
        for layer in (self._static, self._dyn_default, self._dyn_broker):  # (a dynamic value wins)
            for k, v in layer.items():
                lk = listener_key(k)
                if lk is not None:
                    self._per_listener[lk] = v if JAAS_KEY.fullmatch(lk[1]) else parse_value(BROKER_DEFS[lk[1]], v)
        self._merged = merged
        self._values: dict[str, Any] = {
            d.name: parse_value(d, merged[d.name]) if d.name in merged else _copy(d.default) for d in BROKER_DEF_LIST
        }
        self._validate()

    # -- construction helpers

    @classmethod
    def from_file(cls, path: str | Path, overrides: Mapping[str, str] | None = None, **kw: Any) -> BrokerConfig:
        """Load a server.properties file, then apply `--override key=value` pairs."""
        props = load_properties(path)
        props.update(overrides or {})
        return cls(props, **kw)

    def with_dynamic(self, broker: Mapping[str, str | None] | None = None, *,
                     default: Mapping[str, str | None] | None = None) -> BrokerConfig:
        """A copy with dynamic per-broker (`broker`) and/or cluster-default (`default`) changes applied;
        a None value removes that dynamic setting. Raises ConfigError for read-only or unknown keys."""
        for k in default or {}:
            lk = listener_key(k)
            if lk is not None and lk[1] in DYNAMIC_PER_LISTENER:
                raise ConfigError(f"{k} cannot be set for all brokers at once: give a broker id (each broker has "
                                  "its own key store)")

        def apply(base: dict[str, str], changes: Mapping[str, str | None] | None) -> dict[str, str]:
            out = dict(base)
            for k, v in (changes or {}).items():
                _check_dynamic([k])
                if v is None:
                    out.pop(k, None)
                else:
                    out[k] = v
            return out

        return BrokerConfig(self._static, dynamic_default=apply(self._dyn_default, default),
                            dynamic_broker=apply(self._dyn_broker, broker), hostname=self._hostname)

    def static_props(self) -> dict[str, str]:
        return dict(self._static)

    def dynamic_broker_configs(self) -> dict[str, str]:
        return dict(self._dyn_broker)

    def dynamic_default_configs(self) -> dict[str, str]:
        return dict(self._dyn_default)

    def unknown_keys(self) -> list[str]:
        return unknown_keys(self._static)

    def without_effect(self) -> list[str]:
        """Kafka keys set here that Samsa accepts but that change nothing (documented so in
        their description): said once at start-up, never silently ignored."""
        return sorted(k for k in self._static if k in BROKER_DEFS and BROKER_DEFS[k].doc.endswith(UNUSED_MARK))

    # -- typed access

    def get(self, name: str) -> Any:
        """The typed value in force (None when unset without default); KeyError for unknown names."""
        if name not in self._values:
            raise KeyError(f"unknown broker config {name!r}")
        return self._values[name]

    def for_listener(self, listener: str, name: str) -> Any:
        """`name` as listener `listener` sees it: its listener.name.<listener>.<name> if set,
        else the broker-wide value."""
        got = self._per_listener.get((listener.upper(), name), _UNSET)
        return self.get(name) if got is _UNSET else got

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """listener.name.<listener>.<mechanism>.sasl.jaas.config (None if unset)."""
        got = self._per_listener.get((listener.upper(), f"{mechanism.lower()}.sasl.jaas.config"))
        return None if got is None else str(got)

    def protocol_of(self, listener: str) -> str:
        """The security protocol of a listener (listener.security.protocol.map)."""
        return self.security_protocol_map()[listener.upper()]

    def is_set(self, name: str) -> bool:
        """Whether `name` was given explicitly (statically or dynamically) rather than defaulted."""
        return name in self._merged

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} is not an integer setting or is unset")
        return value

    get_long = get_int

    def get_double(self, name: str) -> float:
        return float(self.get(name))

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        if not isinstance(value, bool):
            raise TypeError(f"{name} is not a boolean setting")
        return value

    def get_str(self, name: str) -> str | None:
        value = self.get(name)
        return format_value(BROKER_DEFS[name], value)

    def get_list(self, name: str) -> list[str]:
        value = self.get(name)
        return list(value) if isinstance(value, list) else [v.strip() for v in (value or "").split(",") if v.strip()]

    # -- derived settings

    def broker_id(self) -> int:
        if "broker.id" not in self._merged and self.get_int("node.id") >= 0:
            return self.get_int("node.id")
        return self.get_int("broker.id")

    def cluster_id(self) -> str | None:
        return self.get("cluster.id") or None

    @property
    def hostname(self) -> str:
        if self._hostname is None:
            self._hostname = socket.getfqdn() or "localhost"
        return self._hostname

    def listeners(self) -> list[Listener]:
        return _parse_listeners("listeners", self.get("listeners") or "")

    def prometheus_listener(self) -> tuple[str, int] | None:
        """(host, port) of the metrics endpoint (`prometheus.listener`), None when unset."""
        raw = self.get("prometheus.listener")
        return split_host_port(raw) if raw else None

    def advertised_listeners(self) -> list[Listener]:
        """Advertised listeners, falling back to `listeners`; a wildcard host becomes `hostname`."""
        raw = self.get("advertised.listeners")
        listeners = _parse_listeners("advertised.listeners", raw) if raw else self.listeners()
        return [Listener(n, self.hostname if h in ("", "0.0.0.0", "::") else h, p) for n, h, p in listeners]

    def security_protocol_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in (p.strip() for p in (self.get("listener.security.protocol.map") or "").split(",")):
            if not item:
                continue
            name, sep, proto = item.partition(":")
            if not sep or not name.strip() or proto.strip().upper() not in _PROTOCOLS:
                raise _invalid("listener.security.protocol.map", item,
                               "expected NAME:PROTOCOL with PROTOCOL one of " + ", ".join(_PROTOCOLS))
            out[name.strip().upper()] = proto.strip().upper()
        return out

    def log_dirs(self) -> list[str]:
        raw = self.get("log.dirs")
        if raw is None:
            raw = self.get("log.dir")
        return [d.strip() for d in raw.split(",") if d.strip()]

    def retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours; any negative result means -1 (forever)."""
        ms = self.get("log.retention.ms")
        if ms is None:
            minutes = self.get("log.retention.minutes")
            ms = minutes * 60_000 if minutes is not None else self.get_int("log.retention.hours") * 3_600_000
        return -1 if ms < 0 else ms

    def roll_ms(self) -> int:
        ms = self.get("log.roll.ms")
        return ms if ms is not None else self.get_int("log.roll.hours") * 3_600_000

    def roll_jitter_ms(self) -> int:
        ms = self.get("log.roll.jitter.ms")
        return ms if ms is not None else self.get_int("log.roll.jitter.hours") * 3_600_000

    def flush_ms(self) -> int:
        ms = self.get("log.flush.interval.ms")
        return ms if ms is not None else self.get_int("log.flush.scheduler.interval.ms")

    def _validate(self) -> None:
        listeners = self.listeners()
        if not listeners:
            raise ConfigError("listeners: at least one listener (NAME://host:port) is required")
        ports = [lst.port for lst in listeners if lst.port != 0]
        if len(ports) != len(set(ports)):
            raise _invalid("listeners", self.get("listeners"), "each listener must use a different port")
        protocols = self.security_protocol_map()
        advertised_raw = self.get("advertised.listeners")
        advertised = _parse_listeners("advertised.listeners", advertised_raw) if advertised_raw else []
        names = {lst.name for lst in listeners}
        for lst in listeners + advertised:
            if lst.name not in protocols:
                raise ConfigError(f"listener.security.protocol.map: no security protocol for listener {lst.name}")
        for lst in advertised:
            if lst.name not in names:
                raise _invalid("advertised.listeners", advertised_raw, f"listener {lst.name} is not in listeners")
            if lst.host in ("0.0.0.0", "::"):
                raise _invalid("advertised.listeners", advertised_raw, "cannot advertise a wildcard address")
        if not self.log_dirs():
            raise ConfigError("log.dirs: at least one log directory is required (log.dirs or log.dir)")
        if self.retention_ms() == 0:
            raise ConfigError("log.retention.ms: retention must be -1 (forever) or at least 1 ms")
        if self.get_int("group.min.session.timeout.ms") > self.get_int("group.max.session.timeout.ms"):
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")

    # -- DescribeConfigs

    def _layers(self) -> list[tuple[Mapping[str, str], int]]:
        return [(self._dyn_broker, DYNAMIC_BROKER_CONFIG), (self._dyn_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self._static, STATIC_BROKER_CONFIG), (_DEFAULT_STRINGS, DEFAULT_CONFIG)]

    def synonym_entries(self, names: Iterable[str], sensitive: bool = False) -> list[tuple[str, str | None, int]]:
        """(name, value, source) for each of `names` set in each layer, ordered by layer precedence
        (dynamic broker, dynamic default, static, default), then by the order of `names`."""
        names = list(names)
        return [(n, None if sensitive else layer[n], source)
                for layer, source in self._layers() for n in names if n in layer]

    def describe(self, names: Iterable[str] | None = None, *, include_synonyms: bool = True,
                 include_docs: bool = False, default_resource: bool = False) -> list[ConfigEntry]:
        """DescribeConfigs rows for this broker, or with `default_resource` for the cluster-wide
        default resource (broker name ""), which shows only dynamic cluster defaults."""
        if default_resource:
            candidates = [n for n in self._dyn_default if n in BROKER_DEFS]
        else:
            candidates = [d.name for d in BROKER_DEF_LIST]
        if names is not None:
            wanted = set(names)
            candidates = [n for n in candidates if n in wanted]
        entries = []
        for name in sorted(candidates):
            d = BROKER_DEFS[name]
            synonyms = self.synonym_entries(broker_synonyms(name), d.sensitive)
            while synonyms and synonyms[0][0] != name:  # Kafka drops higher-precedence synonyms
                synonyms.pop(0)
            if default_resource:
                synonyms = [s for s in synonyms if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
                value: str | None = self._dyn_default[name]
            else:  # the key's own value in its highest layer (a dynamic synonym may hide it in get())
                own = next((layer[name] for layer, _ in self._layers() if name in layer), None)
                value = format_value(d, parse_value(d, own)) if own is not None else None
            entries.append(ConfigEntry(
                name=name, value=None if d.sensitive else value,
                source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                read_only=not (d.dynamic or name in KAFKA_DYNAMIC_BROKER_CONFIGS), sensitive=d.sensitive,
                synonyms=synonyms if include_synonyms else [],
                type=KAFKA_CONFIG_TYPE[d.type], doc=d.doc if include_docs else None))
        if not default_resource:  # a listener's own dynamic TLS stores (listener.name.<l>.ssl.*)
            for name in sorted(k for k in self._dyn_broker if listener_key(k) is not None):
                if names is not None and name not in wanted:
                    continue
                d = BROKER_DEFS[listener_key(name)[1]]  # type: ignore[index]
                value = None if d.sensitive else self._dyn_broker[name]
                entries.append(ConfigEntry(  # (read-only to Kafka: the prefixed name is none of its dynamic keys)
                    name=name, value=value, source=DYNAMIC_BROKER_CONFIG, read_only=True, sensitive=d.sensitive,
                    synonyms=[(name, value, DYNAMIC_BROKER_CONFIG)] if include_synonyms else [],
                    type=KAFKA_CONFIG_TYPE[d.type], doc=d.doc if include_docs else None))
        return entries


_DEFAULT_STRINGS: dict[str, str] = {
    d.name: s for d in BROKER_DEF_LIST if (s := format_value(d, d.default)) is not None
}


def _check_dynamic(keys: Iterable[str]) -> None:
    for k in keys:
        lk = listener_key(k)
        if lk is not None and lk[1] in DYNAMIC_PER_LISTENER:
            continue
        if k in DYNAMIC_PER_LISTENER:
            raise ConfigError(f"{k} can be changed at runtime only per listener: listener.name.<listener>.{k}")
        d = BROKER_DEFS.get(k)
        if d is None:
            raise ConfigError(f"unknown broker config {k!r}")
        if not d.dynamic and k in KAFKA_DYNAMIC_BROKER_CONFIGS:
            raise ConfigError(f"{k} cannot be changed at runtime in Samsa (Kafka can); set it in the config file "
                              "and restart")
        if not d.dynamic:
            raise ConfigError(f"{k} cannot be changed at runtime; set it in the config file and restart")


def load_broker_config(path: str | Path, overrides: Mapping[str, str] | None = None, **kw: Any) -> BrokerConfig:
    return BrokerConfig.from_file(path, overrides, **kw)


# --------------------------------------------------------------------------- topic configs

def validate_topic_configs(configs: Mapping[str, str | None], broker: BrokerConfig | None = None) -> dict[str, str]:
    """Check topic overrides (unknown keys are errors, as in Kafka) and return them normalized.
    With `broker`, cross-setting checks also see the broker defaults."""
    out: dict[str, str] = {}
    typed: dict[str, Any] = {}
    for key, raw in configs.items():
        d = TOPIC_DEFS.get(key)
        if d is None:
            raise ConfigError(f"unknown topic config {key!r}")
        if raw is None:
            raise ConfigError(f"missing value for topic config {key}")
        typed[key] = parse_value(d, raw)
        out[key] = format_value(d, typed[key]) or ""
    if broker is not None:
        typed = {**effective_topic_values(broker, {}), **typed}
    lo, hi = typed.get("min.compaction.lag.ms"), typed.get("max.compaction.lag.ms")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"min.compaction.lag.ms ({lo}) must not exceed max.compaction.lag.ms ({hi})")
    return out


def _topic_default(broker: BrokerConfig, d: ConfigDef) -> Any:
    derived = {"retention.ms": broker.retention_ms, "segment.ms": broker.roll_ms,
               "segment.jitter.ms": broker.roll_jitter_ms, "flush.ms": broker.flush_ms}
    if d.name in derived:
        return derived[d.name]()
    return _copy(broker.get(d.synonyms[0]) if d.synonyms else d.default)


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


def effective_topic_values(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every topic setting's typed value in force (unknown override keys are ignored)."""
    out: dict[str, Any] = {}
    for d in TOPIC_DEF_LIST:
        raw = overrides.get(d.name)
        out[d.name] = parse_value(d, raw) if raw is not None else _topic_default(broker, d)
    return out


def effective_topic_config(broker: BrokerConfig, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic setting with the value in force, as strings."""
    values = effective_topic_values(broker, overrides)
    return {name: format_value(TOPIC_DEFS[name], v) or "" for name, v in values.items()}


def describe_topic_config(broker: BrokerConfig, overrides: Mapping[str, str], include_synonyms: bool = False,
                          names: Iterable[str] | None = None, include_docs: bool = False) -> list[ConfigEntry]:
    """DescribeConfigs rows for a topic: source is the topic override (1) if any, else the broker
    layer the value comes from (3/4/5), else 6. Synonyms: topic, then broker dynamic, default-dynamic,
    static, default. Unlike Kafka we keep lower-precedence broker synonyms (e.g. log.retention.hours
    for retention.ms), so the source is right even when only hours are configured."""
    values = effective_topic_values(broker, overrides)
    wanted = set(names) if names is not None else None
    entries = []
    for d in sorted(TOPIC_DEF_LIST, key=lambda x: x.name):
        if wanted is not None and d.name not in wanted:
            continue
        value = format_value(d, values[d.name])
        synonyms: list[tuple[str, str | None, int]] = []
        if overrides.get(d.name) is not None:
            synonyms.append((d.name, value, DYNAMIC_TOPIC_CONFIG))
        synonyms += broker.synonym_entries(d.synonyms)
        entries.append(ConfigEntry(
            name=d.name, value=value, source=synonyms[0][2] if synonyms else DEFAULT_CONFIG,
            read_only=False, sensitive=False, synonyms=synonyms if include_synonyms else [],
            type=KAFKA_CONFIG_TYPE[d.type], doc=d.doc if include_docs else None))
    return entries
