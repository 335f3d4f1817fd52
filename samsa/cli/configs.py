"""`samsa configs`: kafka-configs.sh for topics and brokers — describe, and alter incrementally.

Output is Kafka's ConfigCommand's: `Dynamic configs for topic t are:` (or `All configs ...` with
`--all`, `Default configs for brokers in the cluster are:` for `--entity-default`) followed by
`  name=value sensitive=false synonyms={SOURCE:name=value, ...}` lines sorted by name. `--alter`
sends one IncrementalAlterConfigs request (deletes, then sets) and prints
`Completed updating config for topic t.`.
"""

from __future__ import annotations

import re
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError

_TYPES = ("topics", "brokers")
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
    p.add_argument(
        "--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client."
    )
    p.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    p.add_argument(
        "--all", action="store_true", help="List all configs for the given entity, including static configs."
    )
    p.add_argument("--entity-type", metavar="TYPE", help="Type of entity (topics/brokers).")
    p.add_argument("--entity-name", metavar="NAME", help="Name of entity (topic name/broker id).")
    p.add_argument(
        "--entity-default", action="store_true", help="Default entity name for brokers (cluster-wide defaults)."
    )
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
            p.error(f"Invalid entity type {etype}, the entity type must be one of {', '.join(_TYPES)}")
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


def run(argv: list[str]) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if a.describe == a.alter:
        p.error("Command must include exactly one action: --describe, --alter")
    if a.describe and (a.add_config or a.add_config_file or a.delete_config):
        p.error(
            'Option "[describe]" can\'t be used with options "[add-config]", "[add-config-file]" or "[delete-config]"'
        )
    if not a.bootstrap_server:
        p.error("--bootstrap-server must be specified")
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
    if a.alter:
        assert name is not None
        _alter(admin, a, etype, name, errors.timeout)
    else:
        _describe(admin, md, etype, name, a.all, errors.timeout)
    return 0


def _resource(etype: str, name: str) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.TOPIC if etype == "topics" else ConfigResource.Type.BROKER, name)


def _source_filter(etype: str, name: str) -> ConfigSource:
    if etype == "brokers" and name == "":
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return _DYNAMIC_SOURCE[etype]


def _entries(admin: AdminClient, etype: str, name: str, describe_all: bool, timeout: float) -> list[ConfigEntry]:
    res = _resource(etype, name)
    fut = admin.describe_configs([res], request_timeout=timeout)[res]
    configs: dict[str, ConfigEntry] = cl.result(fut, timeout, what="config description")
    wanted = None if describe_all else _source_filter(etype, name)
    return sorted((e for e in configs.values() if wanted is None or e.source == wanted), key=lambda e: e.name)


def _value(v: str | None) -> str:
    return "null" if v is None else v


def _describe(admin: AdminClient, md: Any, etype: str, name: str | None, describe_all: bool, timeout: float) -> None:
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
        for e in _entries(admin, etype, entity, describe_all, timeout):
            synonyms = ", ".join(f"{s.source.name}:{s.name}={_value(s.value)}" for s in _synonyms(e))
            lines.append(
                f"  {e.name}={_value(e.value)} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}"
            )
    print("\n".join(lines))


def _synonyms(e: ConfigEntry) -> list[ConfigEntry]:
    syn = e.synonyms
    if isinstance(syn, dict):
        return list(syn.values())
    return list(syn or [])


def _alter(admin: AdminClient, a: Any, etype: str, name: str, timeout: float) -> None:
    to_set = cl.load_properties(a.add_config_file) if a.add_config_file else {}
    if a.add_config:
        to_set.update(parse_add_config(a.add_config))
    _validate_keys(to_set)
    to_delete = parse_delete_config(a.delete_config)
    if to_delete:
        current = {e.name for e in _entries(admin, etype, name, False, timeout)}
        missing = [k for k in to_delete if k not in current]
        if missing:
            raise CliError("Invalid config(s): " + ",".join(missing))
    ops = [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
    ops += [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()]
    res = _resource(etype, name)
    res.incremental_configs = ops
    fut = admin.incremental_alter_configs([res], request_timeout=timeout)
    cl.result(next(iter(fut.values())), timeout, what="config update")
    if name:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {etype} in the cluster.")
