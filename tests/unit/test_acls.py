"""The ACL decisions as a table (samsa/server/acls.py, pure): Kafka's AclAuthorizer rules."""

from __future__ import annotations

import pytest

from samsa.server.acls import (
    AclIndex,
    BindingFilter,
    Entry,
    Op,
    Pattern,
    PatternType,
    Permission,
    ResourceType,
    parse_op,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def index(*acls: tuple[ResourceType, str, PatternType, str, str, Op, Permission], **kw: object) -> AclIndex:
    ix = AclIndex(**kw)  # type: ignore[arg-type]
    by: dict[Pattern, set[Entry]] = {}
    for rtype, name, pattern, principal, host, op, perm in acls:
        by.setdefault(Pattern(rtype, name, pattern), set()).add(Entry(principal, host, op, perm))
    for p, entries in by.items():
        ix.set(p, entries)
    return ix


A = "User:alice"
CASES = [
    # (acls, principal, host, op, type, name, allowed?)
    ((), A, "1.1.1.1", Op.READ, T, "t", False),  # no ACL: denied by default
    (((T, "t", LIT, A, "*", Op.READ, ALLOW),), A, "1.1.1.1", Op.READ, T, "t", True),
    (((T, "t", LIT, A, "*", Op.READ, ALLOW),), A, "1.1.1.1", Op.WRITE, T, "t", False),
    (((T, "t", LIT, A, "*", Op.READ, ALLOW),), A, "1.1.1.1", Op.DESCRIBE, T, "t", True),  # implied
    (((T, "t", LIT, A, "*", Op.ALTER, ALLOW),), A, "h", Op.DESCRIBE, T, "t", True),
    (((T, "t", LIT, A, "*", Op.ALTER_CONFIGS, ALLOW),), A, "h", Op.DESCRIBE_CONFIGS, T, "t", True),
    (((T, "t", LIT, A, "*", Op.DESCRIBE, ALLOW),), A, "h", Op.READ, T, "t", False),  # not the other way round
    (((T, "t", LIT, A, "*", Op.ALL, ALLOW),), A, "h", Op.DELETE, T, "t", True),
    (((T, "t", LIT, "User:*", "*", Op.READ, ALLOW),), A, "h", Op.READ, T, "t", True),
    (((T, "*", LIT, A, "*", Op.READ, ALLOW),), A, "h", Op.READ, T, "anything", True),
    (((T, "t", LIT, A, "10.0.0.1", Op.READ, ALLOW),), A, "10.0.0.2", Op.READ, T, "t", False),
    (((T, "t", LIT, A, "10.0.0.1", Op.READ, ALLOW),), A, "10.0.0.1", Op.READ, T, "t", True),
    (((T, "pay", PRE, A, "*", Op.READ, ALLOW),), A, "h", Op.READ, T, "payments", True),
    (((T, "pay", PRE, A, "*", Op.READ, ALLOW),), A, "h", Op.READ, T, "pa", False),
    (((T, "pay", PRE, A, "*", Op.READ, ALLOW),), A, "h", Op.READ, G, "payments", False),  # another type
    (((T, "pay", PRE, A, "*", Op.READ, ALLOW), (T, "payments", LIT, A, "*", Op.READ, DENY)), A, "h", Op.READ, T,
     "payments", False),  # DENY wins
    (((T, "*", LIT, A, "*", Op.ALL, ALLOW), (T, "p", PRE, "User:*", "*", Op.ALL, DENY)), A, "h", Op.WRITE, T, "pq",
     False),
    (((T, "t", LIT, A, "*", Op.READ, ALLOW), (T, "t", LIT, A, "*", Op.READ, DENY)), A, "h", Op.DESCRIBE, T, "t",
     True),  # a DENY of READ does not deny DESCRIBE
    (((T, "t", LIT, "User:bob", "*", Op.READ, ALLOW),), A, "h", Op.READ, T, "t", False),
    (((C, "kafka-cluster", LIT, A, "*", Op.CLUSTER_ACTION, ALLOW),), A, "h", Op.CLUSTER_ACTION, C, "kafka-cluster",
     True),
]


@pytest.mark.parametrize("acls, principal, host, op, rtype, name, allowed", CASES)
def test_decisions(acls: tuple, principal: str, host: str, op: Op, rtype: ResourceType, name: str,  # type: ignore[type-arg]
                   allowed: bool) -> None:
    assert index(*acls).authorize(principal, host, op, rtype, name) is allowed


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    ix = index((T, "t", LIT, "User:bob", "*", Op.READ, ALLOW), super_users=["User:admin"], allow_if_no_acl=True)
    assert ix.authorize("User:admin", "h", Op.DELETE, T, "t")
    assert ix.authorize(A, "h", Op.READ, T, "no-acl-here")  # no ACL at all on the resource
    assert not ix.authorize(A, "h", Op.READ, T, "t")  # ACLs exist, none for alice


def test_changes_invalidate_cached_decisions() -> None:
    ix = index((T, "t", LIT, A, "*", Op.READ, ALLOW))
    assert ix.authorize(A, "h", Op.READ, T, "t")
    ix.set(Pattern(T, "t", LIT), [])
    assert not ix.authorize(A, "h", Op.READ, T, "t")
    ix.set(Pattern(T, "t", PRE), [Entry(A, "*", Op.READ, ALLOW)])
    assert ix.authorize(A, "h", Op.READ, T, "topic")


@pytest.mark.parametrize("acls, allowed", [
    ((), False),
    (((T, "x", LIT, A, "*", Op.WRITE, ALLOW),), True),
    (((T, "x", LIT, A, "*", Op.WRITE, ALLOW), (T, "x", LIT, A, "*", Op.WRITE, DENY)), False),
    (((T, "x", LIT, A, "*", Op.WRITE, ALLOW), (T, "*", LIT, A, "*", Op.WRITE, DENY)), False),
    (((T, "ab", PRE, A, "*", Op.WRITE, ALLOW), (T, "a", PRE, A, "*", Op.WRITE, DENY)), False),
    (((T, "ab", PRE, A, "*", Op.WRITE, ALLOW), (T, "abc", PRE, A, "*", Op.WRITE, DENY)), True),
    (((T, "x", LIT, A, "*", Op.READ, ALLOW),), False),
])
def test_authorize_by_resource_type(acls: tuple, allowed: bool) -> None:  # type: ignore[type-arg]
    assert index(*acls).authorize_any(A, "h", Op.WRITE, T) is allowed


def test_filters() -> None:
    ix = index((T, "t", LIT, A, "*", Op.READ, ALLOW), (T, "t", PRE, A, "*", Op.WRITE, ALLOW),
               (T, "*", LIT, A, "*", Op.DESCRIBE, ALLOW), (G, "t", LIT, A, "*", Op.READ, ALLOW))

    def names(f: BindingFilter) -> list[tuple[str, str]]:
        return sorted((p.name, p.pattern_type.name) for p, _ in ix.matching(f))

    assert names(BindingFilter(T, "t", PatternType.ANY)) == [("t", "LITERAL"), ("t", "PREFIXED")]
    assert names(BindingFilter(T, "top", PatternType.MATCH)) == [("*", "LITERAL"), ("t", "PREFIXED")]
    assert names(BindingFilter(ResourceType.ANY, "t", LIT)) == [("t", "LITERAL"), ("t", "LITERAL")]
    assert names(BindingFilter(T, None, PatternType.ANY, operation=Op.WRITE)) == [("t", "PREFIXED")]


def test_operation_names() -> None:
    assert parse_op("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert parse_op("describe_configs") is Op.DESCRIBE_CONFIGS
    assert parse_op("All") is Op.ALL
    with pytest.raises(ValueError):
        parse_op("Raed")
