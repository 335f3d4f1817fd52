"""Fetch requests over raw frames for the tests of Fetch v12-v17 (tests/broker/test_fetch_topic_ids.py,
tests/cluster/test_fetch_leader_hints.py): topics by name up to v12, by id from v13."""

from __future__ import annotations

from typing import Any

from tests.rawclient import RawClient

ZERO_ID = bytes(16)


def topic_id(c: RawClient, topic: str) -> bytes:
    resp = c.request(3, 12, {"topics": [{"name": topic, "topic_id": ZERO_ID}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": False})
    t = resp.topics[0]
    assert t.error_code == 0
    return bytes(t.topic_id)


def fetch(c: RawClient, version: int, topics: dict[Any, dict[int, int]], *, session_id: int = 0,
          epoch: int = -1, forgotten: dict[Any, list[int]] | None = None, max_wait: int = 0,
          leader_epoch: int = -1, body: dict[str, Any] | None = None) -> Any:
    """A Fetch at `version`; `topics` maps a name (v12-) or an id (v13+) to {partition: offset}."""
    key = "topic_id" if version >= 13 else "topic"
    req = {"replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
           "session_id": session_id, "session_epoch": epoch,
           "topics": [{key: t, "partitions": [
               {"partition": p, "current_leader_epoch": leader_epoch, "fetch_offset": o, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in parts.items()]}
                      for t, parts in topics.items()],
           "forgotten_topics_data": [{key: t, "partitions": ps} for t, ps in (forgotten or {}).items()],
           "rack_id": "", **(body or {})}
    return c.request(1, version, req)
