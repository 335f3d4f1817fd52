"""Shared pieces of DescribeAcls, CreateAcls and DeleteAcls: wire codes to ACL values and back.

A code Kafka does not know (a byte out of its enums) reads as UNKNOWN, which every check then
refuses with INVALID_REQUEST, as Kafka's request validation does.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from samsa.server.context import Binding, BindingFilter, Entry, Op, Pattern, PatternType, Permission, ResourceType

E = TypeVar("E", bound=IntEnum)


def enum_of(kind: type[E], code: int) -> E:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN


def binding_of(c: Any) -> Binding:
    """A CreateAcls creation (v0 has no pattern type: LITERAL)."""
    pattern = Pattern(enum_of(ResourceType, c.resource_type), c.resource_name,
                      enum_of(PatternType, getattr(c, "resource_pattern_type", PatternType.LITERAL)))
    return pattern, Entry(c.principal, c.host, enum_of(Op, c.operation), enum_of(Permission, c.permission_type))


def filter_of(f: Any) -> BindingFilter:
    """A DescribeAcls request or DeleteAcls filter (v0: LITERAL patterns only)."""
    return BindingFilter(enum_of(ResourceType, f.resource_type_filter), f.resource_name_filter,
                         enum_of(PatternType, getattr(f, "pattern_type_filter", PatternType.LITERAL)),
                         f.principal_filter, f.host_filter, enum_of(Op, f.operation),
                         enum_of(Permission, f.permission_type))


def entry_dict(e: Entry) -> dict[str, Any]:
    return {"principal": e.principal, "host": e.host, "operation": int(e.operation),
            "permission_type": int(e.permission)}


def pattern_dict(p: Pattern) -> dict[str, Any]:
    return {"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type)}
