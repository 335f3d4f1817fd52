"""Shared pieces of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs."""

from __future__ import annotations

from typing import Any

from samsa.config import ConfigEntry

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def entry_dict(e: ConfigEntry, version: int, include_docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "config_source": e.source,
        "is_sensitive": e.sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms],
        "config_type": e.type,
        "documentation": e.doc if include_docs else None,
    }
