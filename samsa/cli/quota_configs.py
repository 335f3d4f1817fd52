"""`samsa configs --entity-type users|clients`: client quotas, as kafka-configs.sh --bootstrap-server
handles them, through DescribeClientQuotas (48) and AlterClientQuotas (49).

Entities are given as Kafka's tool takes them: one `--entity-type` per part and, in the same
order, an `--entity-name NAME` or `--entity-default` for each (`--entity-type users
--entity-name alice --entity-type clients --entity-name app` is alice's quota for client-id
app). `--describe` without a name lists every entity of the type(s). Output is Kafka's:

    Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=1048576.0
    Completed updating config for user alice.

confluent-kafka has no binding for these APIs: the requests go with Samsa's own codec over one
connection (`client.raw_request`, with the tool's security properties).
"""

from __future__ import annotations

from typing import Any

from samsa.cli import client as cl
from samsa.cli.common import CliError
from samsa.config_defs import CLIENT_QUOTA_TYPES
from samsa.protocol.errors import ErrorCode

_WIRE_TYPE = {"users": "user", "clients": "client-id"}
_SHOWN_TYPE = {"user": "user-principal", "client-id": "client-id"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
Parts = list[tuple[str, str | None]]  # (wire entity type, name: "" the default, None any)


def entities(types: list[str], names: list[str], alter: bool) -> Parts:
    """(wire entity type, name; "" for the default, None for any) pairs, or a CliError as
    Kafka's tool words it."""
    if len(types) > 2 or len(set(types)) != len(types) or (len(types) == 2 and types != ["users", "clients"]):
        raise CliError("Only '--entity-type users' followed by '--entity-type clients' may be combined")
    if len(names) > len(types):
        raise CliError("More entity names specified than entity types")
    if alter and len(names) != len(types):
        raise CliError(f"An entity name must be specified with --alter of {' and '.join(types)}")
    return [(_WIRE_TYPE[t], names[i] if i < len(names) else None) for i, t in enumerate(types)]


class QuotaConfigs:
    def __init__(self, host: str, port: int, props: dict[str, str], timeout: float) -> None:
        self.host, self.port, self.props, self.timeout = host, port, props, timeout

    def _request(self, api_key: int, body: dict[str, Any]) -> Any:
        return cl.raw_request(self.host, self.port, api_key, 1, body, self.timeout, self.props)

    def describe(self, parts: Parts) -> list[tuple[Parts, dict[str, float]]]:
        components = [{"entity_type": t, "match_type": SPECIFIED if n is None else DEFAULT if n == "" else EXACT,
                       "match": n or None} for t, n in parts]
        resp = self._request(48, {"components": components, "strict": True})  # Kafka's containsOnly
        if resp.error_code:
            raise CliError(resp.error_message or ErrorCode(resp.error_code).name)
        out = []
        for entry in resp.entries or []:
            entity = sorted(((e.entity_type, e.entity_name) for e in entry.entity), key=lambda e: e[0] != "user")
            out.append((entity, {v.key: v.value for v in entry.values}))
        return sorted(out, key=lambda e: [(t, n or "") for t, n in e[0]])

    def alter(self, parts: Parts, to_set: dict[str, str], to_delete: list[str]) -> None:
        ops = []
        for key, value in to_set.items():
            try:
                number = float(value)
            except ValueError:
                raise CliError(f"Cannot parse quota configuration value for {key}: {value}") from None
            ops.append({"key": key, "value": number, "remove": False})
        ops += [{"key": key, "value": 0.0, "remove": True} for key in to_delete]
        entity = [{"entity_type": t, "entity_name": n or None} for t, n in parts]
        resp = self._request(49, {"entries": [{"entity": entity, "ops": ops}], "validate_only": False})
        for entry in resp.entries:
            if entry.error_code:
                raise CliError(entry.error_message or ErrorCode(entry.error_code).name)


def check_keys(etype: str, keys: list[str], what: str) -> None:
    unknown = [k for k in keys if k not in CLIENT_QUOTA_TYPES]
    if unknown:
        raise CliError(f"Only quota configs can be {what} for '{etype}' using --bootstrap-server. "
                       f"Unexpected config names: {', '.join(unknown)}")


def run(md: Any, props: dict[str, str], timeout: float, describe: bool, types: list[str], names: list[str],
        to_set: dict[str, str], to_delete: list[str]) -> None:
    parts = entities(types, names, alter=not describe)
    broker = next(iter(md.brokers.values()))
    quotas = QuotaConfigs(broker.host, broker.port, props, timeout)
    if describe:
        for entity, values in quotas.describe(parts):
            who = ", ".join(f"{_SHOWN_TYPE[t]} '{n}'" if n is not None else f"the default {_SHOWN_TYPE[t]}"
                            for t, n in entity)
            shown = ", ".join(f"{k}={java_double(v)}" for k, v in sorted(values.items()))
            print(f"Quota configs for {who} are {shown}")
        return
    check_keys(types[-1], list(to_set), "added")
    check_keys(types[-1], to_delete, "deleted")
    if to_delete:
        current = next((values for _, values in quotas.describe(parts)), {})
        missing = [k for k in to_delete if k not in current]
        if missing:
            raise CliError("Invalid config(s): " + ",".join(missing))
    quotas.alter(parts, to_set, to_delete)
    name = names[0]
    if name:
        print(f"Completed updating config for {types[0][:-1]} {name}.")
    else:
        print(f"Completed updating default config for {types[0]} in the cluster.")


def java_double(v: float) -> str:
    """A double as Java prints it (Kafka's tool prints the quota values so): 1048576.0, 1.0E7."""
    if v != v or v in (float("inf"), float("-inf")):
        return {True: "NaN"}.get(v != v, "Infinity" if v > 0 else "-Infinity")
    if v == 0 or 1e-3 <= abs(v) < 1e7:
        return repr(float(v))
    mantissa, exponent = f"{v:.16e}".split("e")
    return f"{float(mantissa)!r}E{int(exponent)}"
