"""ACLs as Kafka defines them, and the index that decides a request in a few dict lookups.

Pure: no I/O, no clock, no logging (`authorizer.py` stores, follows and logs). The names and
wire codes are Kafka's (`org.apache.kafka.common.acl`, `...common.resource`):

    resource types   TOPIC 2, GROUP 3, CLUSTER 4 (named kafka-cluster), TRANSACTIONAL_ID 5
    pattern types    LITERAL 3 (the name `*` is the wildcard resource), PREFIXED 4;
                     filters also ANY 1, MATCH 2
    operations       ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
                     CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
    permissions      DENY 2, ALLOW 3; filters also ANY 1
    principals       "User:alice"; "User:*" is every principal.  Hosts: an address, or "*".

A decision (`AclIndex.authorize`) is Kafka's AclAuthorizer's: a super user may do anything; a
resource with no ACL at all (literal, wildcard or prefix) is allowed only under
`allow.everyone.if.no.acl.found`; otherwise one matching DENY refuses, and one matching ALLOW
is needed, where ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, ALLOW of
ALTER_CONFIGS allows DESCRIBE_CONFIGS, and ALL allows everything.

The ACLs that can apply to a resource are found without scanning: literal entries by
(type, name), the wildcard by (type, "*"), and prefixed ones by looking up the resource name's
prefixes of each length some prefixed ACL of that type has (a handful of lookups, whatever the
number of ACLs). Decisions are cached per (principal, host, operation, type, name) until the
next change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Op(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
# The resource types Samsa authorizes (delegation tokens and users have no API here).
RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID)
CONCRETE_OPS = tuple(o for o in Op if o not in (Op.UNKNOWN, Op.ANY, Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS))

# Which ALLOWed operations grant an operation (Kafka's implied operations).
_GRANTED_BY: dict[Op, frozenset[Op]] = {op: frozenset({op, Op.ALL}) for op in Op}
_GRANTED_BY[Op.DESCRIBE] = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.ALL})
_GRANTED_BY[Op.DESCRIBE_CONFIGS] = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL})

# The operations each resource type supports (Kafka's AclEntry.supportedOperations): what an
# "authorized operations" bit field is made of.
SUPPORTED_OPS: dict[ResourceType, tuple[Op, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
}


def pascal(name: str) -> str:
    """Kafka's display and storage spelling of an enum name: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in name.split("_"))


def _by_name(enum: type[IntEnum]) -> dict[str, int]:
    out: dict[str, int] = {}
    for member in enum:
        out[member.name] = member.value
        out[pascal(member.name).upper()] = member.value  # TransactionalId -> TRANSACTIONALID
    return out


_OPS, _PERMS, _TYPES, _PATTERNS = _by_name(Op), _by_name(Permission), _by_name(ResourceType), _by_name(PatternType)


def parse_op(text: str) -> Op:
    """Kafka's names, in any case, with or without underscores (Read, IdempotentWrite, ALL);
    ValueError otherwise."""
    code = _OPS.get(text.strip().upper())
    if code is None or code in (Op.UNKNOWN,):
        raise ValueError(f"unknown operation {text!r}")
    return Op(code)


def parse_permission(text: str) -> Permission:
    code = _PERMS.get(text.strip().upper())
    if code is None or code == Permission.UNKNOWN:
        raise ValueError(f"unknown permission type {text!r}")
    return Permission(code)


def parse_resource_type(text: str) -> ResourceType:
    code = _TYPES.get(text.strip().upper())
    if code is None or code == ResourceType.UNKNOWN:
        raise ValueError(f"unknown resource type {text!r}")
    return ResourceType(code)


def parse_pattern_type(text: str) -> PatternType:
    code = _PATTERNS.get(text.strip().upper())
    if code is None or code == PatternType.UNKNOWN:
        raise ValueError(f"unknown pattern type {text!r}")
    return PatternType(code)


def check_principal(principal: str) -> str:
    """Kafka's principal syntax, "Type:name"; ValueError otherwise."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"principal {principal!r} is not of the form Type:name (e.g. User:alice)")
    return principal


@dataclass(frozen=True, slots=True)
class Pattern:
    """A resource pattern: (resource type, name, LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


@dataclass(frozen=True, slots=True)
class Entry:
    """An access control entry: who, from where, what, and allowed or denied."""

    principal: str
    host: str
    operation: Op
    permission: Permission

    def __str__(self) -> str:
        return f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, " \
               f"permissionType={self.permission.name})"


Binding = tuple[Pattern, Entry]


@dataclass(frozen=True, slots=True)
class BindingFilter:
    """Kafka's AclBindingFilter: None fields and the ANY codes match everything; MATCH patterns
    match every pattern that applies to the named resource (literal, wildcard and prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Op = Op.ANY
    permission: Permission = Permission.ANY

    def matches_pattern(self, p: Pattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        # MATCH
        if p.pattern_type == PatternType.LITERAL:
            return self.name == p.name or p.name == WILDCARD
        return self.name.startswith(p.name)

    def matches_entry(self, e: Entry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == Op.ANY or self.operation == e.operation)
                and (self.permission == Permission.ANY or self.permission == e.permission))

    def problem(self) -> str | None:
        """Why Kafka would refuse this filter (INVALID_REQUEST), or None."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN \
                or self.operation == Op.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "the filter contains unknown elements"
        return None


def binding_problem(p: Pattern, e: Entry) -> str | None:
    """Why an ACL binding cannot be created (Kafka answers INVALID_REQUEST), or None."""
    if p.resource_type not in RESOURCE_TYPES:
        return f"resource type {p.resource_type.name} is not supported"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {p.pattern_type.name} cannot be stored (LITERAL or PREFIXED)"
    if e.operation in (Op.UNKNOWN, Op.ANY) or e.operation not in CONCRETE_OPS:
        return f"operation {e.operation.name} cannot be stored"
    if e.permission not in (Permission.ALLOW, Permission.DENY):
        return f"permission type {e.permission.name} cannot be stored (ALLOW or DENY)"
    if not p.name:
        return "Invalid empty resource name"
    if "/" in p.name:
        return f"ACL binding contains invalid resource name: {p.name}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not e.host:
        return "the host must be an address or *"
    try:
        check_principal(e.principal)
    except ValueError as err:
        return str(err)
    return None


class AclIndex:
    """Every ACL of the cluster, indexed for decisions (see the module doc). One writer: the
    authorizer, on the event loop."""

    DECISION_CACHE_MAX = 100_000

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: dict[Pattern, frozenset[Entry]] = {}
        self._literal: dict[tuple[ResourceType, str], frozenset[Entry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], frozenset[Entry]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        self._decisions: dict[tuple[str, str, Op, ResourceType, str], bool] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self.acls.values())

    def set(self, pattern: Pattern, entries: Iterable[Entry]) -> bool:
        """Replace a pattern's ACLs (none: the pattern is gone); True if they changed."""
        new = frozenset(entries)
        if self.acls.get(pattern, frozenset()) == new:
            return False
        key = (pattern.resource_type, pattern.name)
        table = self._literal if pattern.pattern_type == PatternType.LITERAL else self._prefixed
        if new:
            self.acls[pattern] = new
            table[key] = new
        else:
            self.acls.pop(pattern, None)
            table.pop(key, None)
        if pattern.pattern_type == PatternType.PREFIXED:
            rtype = pattern.resource_type
            self._prefix_lengths[rtype] = sorted({len(n) for t, n in self._prefixed if t == rtype})
        self._decisions.clear()
        return True

    def bindings(self) -> Iterator[Binding]:
        for pattern, entries in self.acls.items():
            for e in entries:
                yield pattern, e

    def matching(self, f: BindingFilter) -> list[Binding]:
        return [(p, e) for p, entries in self.acls.items() if f.matches_pattern(p)
                for e in entries if f.matches_entry(e)]

    def applicable(self, rtype: ResourceType, name: str) -> list[frozenset[Entry]]:
        """The ACL sets that apply to a resource: its literal ones, the type's wildcard ones and
        those of every prefix of its name."""
        out = []
        found = self._literal.get((rtype, name))
        if found:
            out.append(found)
        if name != WILDCARD:
            found = self._literal.get((rtype, WILDCARD))
            if found:
                out.append(found)
        prefixed = self._prefixed
        for n in self._prefix_lengths.get(rtype, ()):
            if n > len(name):
                break
            found = prefixed.get((rtype, name[:n]))
            if found:
                out.append(found)
        return out

    def authorize(self, principal: str, host: str, op: Op, rtype: ResourceType, name: str) -> bool:
        key = (principal, host, op, rtype, name)
        decided = self._decisions.get(key)
        if decided is None:
            decided = self._decide(principal, host, op, rtype, name)
            if len(self._decisions) >= self.DECISION_CACHE_MAX:
                self._decisions.clear()
            self._decisions[key] = decided
        return decided

    def _decide(self, principal: str, host: str, op: Op, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        sets = self.applicable(rtype, name)
        if not sets:
            return self.allow_if_no_acl
        granting = _GRANTED_BY[op]
        allowed = False
        for entries in sets:
            for e in entries:
                if (e.principal != principal and e.principal != WILDCARD_PRINCIPAL) or \
                        (e.host != host and e.host != WILDCARD):
                    continue
                if e.permission == Permission.DENY:
                    if e.operation == op or e.operation == Op.ALL:
                        return False
                elif e.operation in granting:
                    allowed = True
        return allowed

    def authorize_any(self, principal: str, host: str, op: Op, rtype: ResourceType) -> bool:
        """Whether some resource of the type could be allowed (Kafka's authorizeByResourceType,
        used by InitProducerId: WRITE on any topic): an ALLOW that no DENY of the same
        principal, host and operation covers -- a literal one not denied by name or by a
        prefix of it, or a prefixed one no shorter-or-equal DENY prefix dominates; a DENY
        of the wildcard refuses all."""
        if principal in self.super_users:
            return True
        deny_lit: set[str] = set()
        deny_pre: set[str] = set()
        allow_lit: set[str] = set()
        allow_pre: set[str] = set()
        for pattern, entries in self.acls.items():
            if pattern.resource_type != rtype:
                continue
            for e in entries:
                if (e.principal != principal and e.principal != WILDCARD_PRINCIPAL) or \
                        (e.host != host and e.host != WILDCARD) or (e.operation != op and e.operation != Op.ALL):
                    continue
                literal = pattern.pattern_type == PatternType.LITERAL
                if e.permission == Permission.DENY:
                    (deny_lit if literal else deny_pre).add(pattern.name)
                else:
                    (allow_lit if literal else allow_pre).add(pattern.name)
        if WILDCARD in deny_lit:
            return False
        if self.allow_if_no_acl:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_pre for i in range(1, len(name) + 1))

        if any(not dominated(p) for p in allow_pre):
            return True
        return any(n == WILDCARD or (n not in deny_lit and not dominated(n)) for n in allow_lit)

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bit field: bit `op` set for each allowed operation."""
        bits = 0
        for op in SUPPORTED_OPS.get(rtype, ()):
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << int(op)
        return bits
