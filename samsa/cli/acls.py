"""`samsa acls`: kafka-acls.sh -- add, remove and list ACLs through the Admin API.

Flags, defaults and output follow Kafka's `AclCommand` (its --bootstrap-server mode): one action
of --add, --remove, --list; resources from --topic, --group, --cluster, --transactional-id
(repeatable), as --resource-pattern-type patterns (LITERAL by default; MATCH and ANY only to
list or remove); entries from --allow-principal/--deny-principal x --operation (All by default)
x --allow-host/--deny-host (`*` by default). --producer grants Write, Describe and Create on the
topics (Write, Describe on --transactional-id, IdempotentWrite on the cluster with --idempotent);
--consumer grants Read, Describe on the topics and Read on the groups. --remove without
principals removes every ACL of the resource, after asking (y/n) unless --force.

A mistyped principal, operation or pattern type is one line on stderr and exit 1 (2 for a
usage error), never a traceback.
"""

from __future__ import annotations

import sys
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as CkResourceType

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.server.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPS,
    Op,
    PatternType,
    ResourceType,
    check_principal,
    parse_op,
    parse_pattern_type,
    pascal,
)

OPERATION_NAMES = ("Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
                   "AlterConfigs", "IdempotentWrite", "All")

Resource = tuple[ResourceType, str | None, PatternType]
Ace = tuple[str, str, Op, str]  # principal, host, operation, permission name (ALLOW / DENY)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa acls", description="Add, remove or list ACLs (like kafka-acls.sh).")
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument("--command-config", metavar="FILE",
                   help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    p.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    p.add_argument("--list", action="store_true", help="List ACLs for the specified resource.")
    p.add_argument("--topic", action="append", default=[], help="Topic to which ACLs should be added or removed.")
    p.add_argument("--group", action="append", default=[], help="Consumer group to which ACLs should be added or "
                   "removed.")
    p.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    p.add_argument("--transactional-id", action="append", default=[], help="Transactional id to which ACLs should "
                   "be added or removed.")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal (default), prefixed; to --list or --remove also match or any.")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Operation allowed or denied (repeatable; default All): " + ", ".join(OPERATION_NAMES))
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="Principal (Type:name, e.g. User:alice; User:* for all) to allow.")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="Principal (Type:name) to deny.")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="Host from which the allowed principals have access (default *).")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="Host from which the denied principals are denied (default *).")
    p.add_argument("--principal", action="append", default=[], help="With --list: only this principal's ACLs.")
    p.add_argument("--producer", action="store_true", help="Convenience: the ACLs a producer needs.")
    p.add_argument("--consumer", action="store_true", help="Convenience: the ACLs a consumer needs.")
    p.add_argument("--idempotent", action="store_true", help="With --producer: IdempotentWrite on the cluster.")
    p.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    return p


def _usage(message: str) -> CliError:
    return CliError(message, exit_code=2)


def _check_args(a: Any) -> None:
    if not a.bootstrap_server:
        raise _usage("--bootstrap-server is required")
    if sum((a.add, a.remove, a.list)) != 1:
        raise _usage("Command must include exactly one action: --list, --add, --remove.")
    if a.principal and not a.list:
        raise _usage("The --principal option is only available if --list is set")
    if a.producer and not a.topic:
        raise _usage("With --producer you must specify a --topic")
    if a.idempotent and not a.producer:
        raise _usage("The --idempotent option is only available if --producer is set")
    if a.consumer and (not a.topic or not a.group or a.cluster or a.transactional_id):
        raise _usage("With --consumer you must specify a --topic and a --group and no --cluster or "
                     "--transactional-id option should be specified.")


def _resources(a: Any, pattern: PatternType, required: bool) -> list[Resource]:
    out: list[Resource] = [(ResourceType.TOPIC, t.strip(), pattern) for t in a.topic]
    if pattern == PatternType.LITERAL and (a.cluster or a.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [(ResourceType.GROUP, g.strip(), pattern) for g in a.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in a.transactional_id]
    if not out and required:
        raise _usage("You must provide at least one resource: --topic <topic> or --cluster or --group <group>")
    return out


def _principals(values: list[str]) -> list[str]:
    out = []
    for v in values:
        try:
            out.append(check_principal(v.strip()))
        except ValueError as e:
            raise CliError(str(e)) from None
    return out


def _aces(a: Any, ops: list[Op]) -> list[Ace]:
    allowed, denied = _principals(a.allow_principal), _principals(a.deny_principal)
    allow_hosts = [h.strip() for h in a.allow_host] or (["*"] if allowed else [])
    deny_hosts = [h.strip() for h in a.deny_host] or (["*"] if denied else [])
    out = [(p, h, op, "ALLOW") for p in allowed for op in ops for h in allow_hosts]
    out += [(p, h, op, "DENY") for p in denied for op in ops for h in deny_hosts]
    return list(dict.fromkeys(out))


def _resource_acls(a: Any, pattern: PatternType) -> dict[Resource, list[Ace]]:
    """Kafka's getResourceFilterToAcls: the resources and the entries for each."""
    out: dict[Resource, list[Ace]] = {}
    if not a.producer and not a.consumer:
        try:
            ops = [parse_op(o) for o in (a.operation or ["All"])]
        except ValueError as e:
            raise CliError(f"{e}; valid operations are {', '.join(OPERATION_NAMES)}") from None
        aces = _aces(a, ops)
        for r in _resources(a, pattern, required=True):
            out[r] = aces
    if a.producer:
        for r in _resources(a, pattern, required=True):
            if r[0] == ResourceType.TOPIC:
                out[r] = _aces(a, [Op.WRITE, Op.DESCRIBE, Op.CREATE])
            elif r[0] == ResourceType.TRANSACTIONAL_ID:
                out[r] = _aces(a, [Op.WRITE, Op.DESCRIBE])
            elif r[0] == ResourceType.CLUSTER and a.idempotent:
                out[r] = _aces(a, [Op.IDEMPOTENT_WRITE])
    if a.consumer:
        for r in _resources(a, pattern, required=True):
            if r[0] == ResourceType.TOPIC:
                out[r] = list(dict.fromkeys(out.get(r, []) + _aces(a, [Op.READ, Op.DESCRIBE])))
            elif r[0] == ResourceType.GROUP:
                out[r] = list(dict.fromkeys(out.get(r, []) + _aces(a, [Op.READ])))
    for (rtype, _, _), aces in out.items():
        valid = SUPPORTED_OPS[rtype]
        if any(op not in valid and op != Op.ALL for _, _, op, _ in aces):
            raise _usage(f"ResourceType {rtype.name} only supports operations "
                         f"{', '.join(pascal(o.name) for o in valid)}")
    return out


def pattern_text(r: Resource) -> str:
    rtype, name, pattern = r
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={pattern.name})"


def ace_text(ace: Ace) -> str:
    principal, host, op, permission = ace
    return f"(principal={principal}, host={host}, operation={op.name}, permissionType={permission})"


def _listing(aces: list[Ace]) -> str:
    return "\n".join("\t" + ace_text(x) for x in aces)


def _ck_type(rtype: ResourceType) -> CkResourceType:
    """librdkafka names Kafka's CLUSTER resource type BROKER (the same code, 4)."""
    return CkResourceType(int(rtype))


def _binding(r: Resource, ace: Ace) -> AclBinding:
    return AclBinding(_ck_type(r[0]), r[1] or "", ResourcePatternType[r[2].name], ace[0], ace[1],
                      AclOperation[ace[2].name], AclPermissionType[ace[3]])


def _filter(r: Resource | None, ace: Ace | None = None) -> AclBindingFilter:
    rtype, name, pattern = r if r is not None else (ResourceType.ANY, None, PatternType.ANY)
    make: Any = AclBindingFilter  # (its stubs do not know that None fields match anything)
    if ace is None:
        return make(_ck_type(rtype), name, ResourcePatternType[pattern.name], None, None,
                    AclOperation.ANY, AclPermissionType.ANY)
    return make(_ck_type(rtype), name, ResourcePatternType[pattern.name], ace[0], ace[1],
                AclOperation[ace[2].name], AclPermissionType[ace[3]])


def _from_binding(b: Any) -> tuple[Resource, Ace]:
    r = (ResourceType(int(b.restype.value)), b.name, PatternType[b.resource_pattern_type.name])
    return r, (b.principal, b.host, Op[b.operation.name], b.permission_type.name)


def _confirm(a: Any, message: str) -> bool:
    if a.force:
        return True
    print(message, flush=True)
    return sys.stdin.readline().strip().lower() == "y"


@cl.one_line_errors
def run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    _check_args(a)
    try:
        pattern = parse_pattern_type(a.resource_pattern_type)
    except ValueError as e:
        raise _usage(f"{e}; use literal, prefixed, match or any") from None
    if a.add and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _usage(f"A '--resource-pattern-type' value of '{pattern.name}' is not valid when adding acls.")
    work = _resource_acls(a, pattern) if not a.list else {}
    listed = _principals(a.principal)
    if a.add and any(not aces for aces in work.values()):
        raise _usage("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    if a.add:
        for r, aces in work.items():
            print(f"Adding ACLs for resource `{pattern_text(r)}`: \n {_listing(aces)} \n")
            for fut in admin.create_acls([_binding(r, x) for x in aces]).values():
                cl.result(fut, errors.timeout, "ACL creation")
    elif a.remove:
        for r, aces in work.items():
            if not aces:
                question = f"Are you sure you want to delete all ACLs for resource filter `{pattern_text(r)}`? (y/n)"
                filters = [_filter(r)]
            else:
                question = (f"Are you sure you want to remove ACLs: \n {_listing(aces)} \n from resource filter "
                            f"`{pattern_text(r)}`? (y/n)")
                filters = [_filter(r, x) for x in aces]
            if _confirm(a, question):
                for fut in admin.delete_acls(filters).values():
                    cl.result(fut, errors.timeout, "ACL removal")
    else:
        _list(a, admin, errors, pattern, listed)
    return 0


def _list(a: Any, admin: AdminClient, errors: cl.ClientErrors, pattern: PatternType, principals: list[str]) -> None:
    filters = _resources(a, pattern, required=False)
    found: dict[Resource, list[Ace]] = {}
    for f in ([_filter(r) for r in filters] if filters else [_filter(None)]):
        for b in cl.result(admin.describe_acls(f), errors.timeout, "ACL listing"):
            r, ace = _from_binding(b)
            if ace not in found.setdefault(r, []):
                found[r].append(ace)
    groups = [(p, {r: [x for x in aces if x[0] == p] for r, aces in found.items()}) for p in principals] \
        if principals else [(None, found)]
    for principal, by_resource in groups:
        if principal is not None:
            print(f"ACLs for principal `{principal}`")
        for r, aces in by_resource.items():
            if aces:
                print(f"Current ACLs for resource `{pattern_text(r)}`: \n {_listing(aces)} \n")
