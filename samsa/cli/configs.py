"""`samsa configs`: kafka-configs.sh for topics and brokers — describe, and alter incrementally;
users' SCRAM credentials are in user_configs.py.

Output is Kafka's ConfigCommand's: `Dynamic configs for topic t are:` (or `All configs ...` with
`--all`, `Default configs for brokers in the cluster are:` for `--entity-default`) followed by
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` lines sorted by name. `--alter`
sends one IncrementalAlterConfigs request (deletes, then sets) and prints
`Completed updating config for topic t.`.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, NamedTuple

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from samsa.cli import client as cl
from samsa.cli import quota_configs, user_configs
from samsa.cli.common import ArgumentParser, CliError
from samsa.protocol.errors import ErrorCode

_TYPES = ("topics", "brokers")
_QUOTA_TYPES = ("users", "clients")  # client quotas (quota_configs.py); users' SCRAM credentials (user_configs.py)
_BROKER = 4  # ConfigResource type id
_DYNAMIC_SOURCE = {
    "topics": ConfigSource.DYNAMIC_TOPIC_CONFIG,
    "brokers": ConfigSource.DYNAMIC_BROKER_CONFIG,
}
# Split on commas/equals signs that are not inside [...] (Kafka's ConfigCommand pattern).
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa configs",
        description="Describe and alter topic and broker configs (like kafka-configs.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="Change users' SCRAM credentials straight in ZooKeeper (e.g. before any broker runs).")
    p.add_argument(
        "--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client."
    )
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument(
        "--all", action="store_true", help="List all configs for the given entity, including static configs."
    )
    p.add_argument("--entity-type", metavar="TYPE", action="append",
                   help="Type of entity (topics/brokers/users/clients); users and clients may be combined.")
    p.add_argument("--entity-name", metavar="NAME", action=_EntityName,
                   help="Name of entity (topic name/broker id/user principal name/client id).")
    p.add_argument("--entity-default", nargs=0, action=_EntityName,
                   help="Default entity name for brokers (cluster-wide defaults), users or clients.")
    p.add_argument(
        "--topic", metavar="TOPIC", help="The topic's name (same as --entity-type topics --entity-name TOPIC)."
    )
    p.add_argument("--broker", metavar="ID", help="The broker's ID (same as --entity-type brokers --entity-name ID).")
    p.add_argument("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    p.add_argument(
        "--add-config",
        metavar="K=V,...",
        help="Key Value pairs of configs to add. Square brackets group values which contain commas: "
        "'k1=v1,k2=[v1,v2,v2],k3=v3'.",
    )
    p.add_argument("--add-config-file", metavar="FILE", help="Path to a properties file with configs to add.")
    p.add_argument("--delete-config", action="append", metavar="K1,K2", help="config keys to remove 'k1,k2'")
    return p


class _EntityName(argparse.Action):
    """--entity-name NAME / --entity-default: also kept in order in `entity_names` ("" for a
    default), to pair with the --entity-type options as Kafka's tool does."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        default = option_string == "--entity-default"
        ns.entity_names = [*(getattr(ns, "entity_names", None) or []), "" if default else values]
        setattr(ns, self.dest, True if default else values)


def parse_add_config(text: str) -> dict[str, str]:
    """`k1=v1,k2=[v2,v3]` → {"k1": "v1", "k2": "v2,v3"} exactly as Kafka parses --add-config."""
    out: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise CliError(
                'Invalid entity config: all configs to be added must be in the format "key=val" or  '
                '"key=[val1,val2]" to group values which contain commas.'
            )
        out[pair[0].strip()] = re.sub(r"[\[\]]", "", pair[1]).strip()
    return out


def parse_delete_config(values: list[str] | None) -> list[str]:
    return [k.strip() for v in values or [] for k in v.split(",")]


def _validate_keys(keys: Any) -> None:
    for key in keys:
        if not re.fullmatch(r"[$a-zA-Z0-9._-]*", key):
            raise CliError(f"Invalid character found for config key: {key}")


def _entity(p: ArgumentParser, a: Any) -> tuple[str, str | None]:
    """(entity type, entity name); name "" is the broker default, None means every entity."""
    shorthand = [
        t for t, given in (("topics", a.topic), ("brokers", a.broker), ("brokers", a.broker_defaults)) if given
    ]
    if shorthand and (a.entity_type or a.entity_name or a.entity_default):
        p.error("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    if len(shorthand) > 1:
        p.error("Only one entity may be given")
    if shorthand:
        etype = shorthand[0]
        name = a.topic if a.topic else ("" if a.broker_defaults else a.broker)
    else:
        if not a.entity_type:
            p.error("At least one entity type must be specified")
        etype = a.entity_type
        if etype not in _TYPES:
            p.error(f"Invalid entity type {etype}, the entity type must be one of {', '.join(_TYPES + _QUOTA_TYPES)}")
        if a.entity_name is not None and a.entity_default:
            p.error("--entity-name and --entity-default cannot be used together")
        name = "" if a.entity_default else a.entity_name
    if etype == "brokers" and name:
        try:
            int(name)
        except ValueError:
            p.error(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if etype == "topics" and name == "":
        p.error(f"--entity-default must not be specified with --{'describe' if a.describe else 'alter'} of topics")
    return etype, name


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if a.describe == a.alter:
        p.error("Command must include exactly one action: --describe, --alter")
    if a.describe and (a.add_config or a.add_config_file or a.delete_config):
        p.error(
            'Option "[describe]" can\'t be used with options "[add-config]", "[add-config-file]" or "[delete-config]"'
        )
    if not a.bootstrap_server and not a.zookeeper:
        p.error("--bootstrap-server must be specified")
    if a.bootstrap_server and a.zookeeper:
        p.error("Only one of --bootstrap-server or --zookeeper must be specified")
    types = a.entity_type or []
    if a.zookeeper and types != ["users"]:
        p.error("--zookeeper changes only users' SCRAM credentials (--entity-type users); use --bootstrap-server")
    if types == ["users"] and (a.zookeeper or _scram_alter(a)):
        return _user_scram(a)
    if any(t in _QUOTA_TYPES for t in types):
        _client_quotas(a, types)
        if types == ["users"] and a.describe:  # then the SCRAM credentials, as Kafka's tool does
            _user_scram(a)
        return 0
    if len(types) > 1:
        p.error("Only one entity type may be given for topics and brokers")
    a.entity_type = types[0] if types else None
    etype, name = _entity(p, a)
    if a.alter:
        if name is None:
            p.error(
                "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips"
                if etype == "brokers"
                else f"An entity name must be specified with --alter of {etype}"
            )
        if a.add_config and a.add_config_file:
            p.error("Only one of --add-config or --add-config-file must be specified")
        if not (a.add_config or a.add_config_file or a.delete_config):
            p.error(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
            )

    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    cfg = _Configs(admin, md, props, errors.timeout)
    if a.alter:
        assert name is not None
        _alter(cfg, a, etype, name)
    else:
        _describe(cfg, etype, name, a.all)
    return 0


def _scram_alter(a: Any) -> bool:
    """Whether an --alter of users changes SCRAM credentials (Kafka's tool does not mix them with
    quotas in one command)."""
    if not a.alter:
        return False
    keys = [*_to_set(a), *parse_delete_config(a.delete_config)]
    scram = [k for k in keys if k in user_configs.MECHANISMS]
    if scram and len(scram) != len(keys):
        raise CliError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using "
                       "--bootstrap-server.")
    return bool(scram)


def _to_set(a: Any) -> dict[str, str]:
    if a.add_config and a.add_config_file:
        raise CliError("Only one of --add-config or --add-config-file must be specified")
    to_set = cl.load_properties(a.add_config_file) if a.add_config_file else {}
    if a.add_config:
        to_set.update(parse_add_config(a.add_config))
    return to_set


def _user_scram(a: Any) -> int:
    """--entity-type users: SCRAM credentials (user_configs.py)."""
    names = getattr(a, "entity_names", None) or []
    if len(names) > 1:
        raise CliError("More entity names specified than entity types")
    name = names[0] if names else None
    if a.alter and name is None:
        raise CliError("An entity name must be specified with --alter of users")
    if a.alter and not (a.add_config or a.add_config_file or a.delete_config):
        raise CliError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                       "with --alter")
    if name == "" and a.describe:
        return 0  # (no SCRAM credentials for the default user: Kafka's tool shows only its quotas)
    return user_configs.run(a, name, _to_set(a), parse_delete_config(a.delete_config))


def _client_quotas(a: Any, types: list[str]) -> int:
    """--entity-type users|clients (quota_configs.py)."""
    if a.alter and a.add_config and a.add_config_file:
        raise CliError("Only one of --add-config or --add-config-file must be specified")
    if a.alter and not (a.add_config or a.add_config_file or a.delete_config):
        raise CliError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                       "with --alter")
    to_set = cl.load_properties(a.add_config_file) if a.add_config_file else {}
    if a.add_config:
        to_set.update(parse_add_config(a.add_config))
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    quota_configs.run(md, props, errors.timeout, a.describe, types, getattr(a, "entity_names", None) or [],
                      to_set, parse_delete_config(a.delete_config))
    return 0


class Entry(NamedTuple):
    name: str
    value: str | None
    source: int
    sensitive: bool
    synonyms: list[tuple[int, str, str | None]]  # (source, name, value), in precedence order


class _Configs:
    """DescribeConfigs / IncrementalAlterConfigs for one entity.

    confluent-kafka serves topics and brokers by id, but librdkafka refuses the empty resource name
    that addresses cluster-wide broker defaults (`--entity-default`); those two requests are sent
    over a plain socket with Samsa's own codec instead (TLS and SASL from --command-config).
    """

    def __init__(self, admin: AdminClient, md: Any, props: dict[str, str], timeout: float) -> None:
        self.admin, self.md, self.props, self.timeout = admin, md, props, timeout

    def entries(self, etype: str, name: str, describe_all: bool) -> list[Entry]:
        if etype == "brokers" and name == "":
            found = self._raw_describe()
        else:
            res = _resource(etype, name)
            fut = self.admin.describe_configs([res], request_timeout=self.timeout)[res]
            configs: dict[str, ConfigEntry] = cl.result(fut, self.timeout, what="config description")
            found = [
                Entry(e.name, e.value, cl.source_id(e.source), bool(e.is_sensitive), synonyms_of(e))
                for e in configs.values()
            ]
        wanted = None if describe_all else _source_filter(etype, name).value
        return sorted((e for e in found if wanted is None or e.source == wanted), key=lambda e: e.name)

    def alter(self, etype: str, name: str, to_delete: list[str], to_set: dict[str, str]) -> None:
        if etype == "brokers" and name == "":
            self._raw_alter(to_delete, to_set)
            return
        ops = [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
        ops += [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
        res = _resource(etype, name)
        res.incremental_configs = ops
        fut = self.admin.incremental_alter_configs([res], request_timeout=self.timeout)
        cl.result(next(iter(fut.values())), self.timeout, what="config update")

    def _raw_describe(self) -> list[Entry]:
        body = {
            "resources": [{"resource_type": _BROKER, "resource_name": "", "configuration_keys": None}],
            "include_synonyms": True,
        }
        (result,) = self._raw(32, 1, body).results
        _raise_for(result.error_code, result.error_message)
        return [
            Entry(c.name, c.value, c.config_source, c.is_sensitive, [(x.source, x.name, x.value) for x in c.synonyms])
            for c in result.configs
        ]

    def _raw_alter(self, to_delete: list[str], to_set: dict[str, str]) -> None:
        configs = [{"name": k, "config_operation": 1, "value": None} for k in to_delete]
        configs += [{"name": k, "config_operation": 0, "value": v} for k, v in to_set.items()]
        body = {
            "resources": [{"resource_type": _BROKER, "resource_name": "", "configs": configs}],
            "validate_only": False,
        }
        (result,) = self._raw(44, 0, body).responses
        _raise_for(result.error_code, result.error_message)

    def _raw(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        broker = next(iter(self.md.brokers.values()))
        return cl.raw_request(broker.host, broker.port, api_key, version, body, self.timeout, self.props)


def _raise_for(code: int, message: str | None) -> None:
    if code:
        raise CliError(message or ErrorCode(code).name)


def _resource(etype: str, name: str) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.TOPIC if etype == "topics" else ConfigResource.Type.BROKER, name)


def _source_filter(etype: str, name: str) -> ConfigSource:
    if etype == "brokers" and name == "":
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return _DYNAMIC_SOURCE[etype]


def _value(v: str | None) -> str:
    return "null" if v is None else v


def _describe(cfg: _Configs, etype: str, name: str | None, describe_all: bool) -> None:
    md = cfg.md
    singular = etype[:-1]
    if name is not None:
        if not describe_all and name != "":
            exists = name in md.topics if etype == "topics" else int(name) in md.brokers
            if not exists:
                print(f"The {singular} '{name}' doesn't exist and doesn't have dynamic config.")
                return
        entities = [name]
    elif etype == "topics":
        entities = sorted(md.topics)
    else:
        entities = [str(b) for b in sorted(md.brokers)] + [""]
    lines: list[str] = []
    for entity in entities:
        if entity == "":
            lines.append(f"Default configs for {etype} in the cluster are:")
        else:
            lines.append(f"{'All' if describe_all else 'Dynamic'} configs for {singular} {entity} are:")
        for e in cfg.entries(etype, entity, describe_all):
            synonyms = ", ".join(f"{source_name(src)}:{n}={_value(v)}" for src, n, v in e.synonyms)
            lines.append(f"  {e.name}={_value(e.value)} sensitive={str(e.sensitive).lower()} synonyms={{{synonyms}}}")
    print("\n".join(lines))


# Kafka's ConfigEntry.ConfigSource names by wire id (confluent-kafka hands unknown ids over as ints).
_SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}


def source_name(source: ConfigSource | int) -> str:
    """The name Kafka's tool prints for a config source."""
    value = cl.source_id(source)
    return _SOURCE_NAMES.get(value, f"UNKNOWN({value})")


def synonyms_of(e: Any) -> list[tuple[int, str, str | None]]:
    """(source, name, value) synonyms in precedence order.

    confluent-kafka returns synonyms as a dict keyed by name, so synonyms sharing a name (a broker
    config set dynamically *and* defaulted: both `log.cleaner.threads`) collapse into the last one.
    Kafka always lists the entry's own source first, so that head is restored from the entry itself;
    a middle synonym with the same name as a later one (e.g. STATIC between DYNAMIC and DEFAULT)
    is still lost.
    """
    raw = e.synonyms
    found = [(cl.source_id(x.source), x.name, x.value) for x in (raw.values() if isinstance(raw, dict) else raw or [])]
    own = cl.source_id(e.source)
    if found and own not in (0, ConfigSource.DEFAULT_CONFIG.value) and all(src != own for src, _, _ in found):
        found.insert(0, (own, e.name, e.value))
    return found


def _alter(cfg: _Configs, a: Any, etype: str, name: str) -> None:
    to_set = cl.load_properties(a.add_config_file) if a.add_config_file else {}
    if a.add_config:
        to_set.update(parse_add_config(a.add_config))
    _validate_keys(to_set)
    to_delete = parse_delete_config(a.delete_config)
    if to_delete:
        current = {e.name for e in cfg.entries(etype, name, describe_all=False)}
        missing = [k for k in to_delete if k not in current]
        if missing:
            raise CliError("Invalid config(s): " + ",".join(missing))
    cfg.alter(etype, name, to_delete, to_set)
    if name:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {etype} in the cluster.")
