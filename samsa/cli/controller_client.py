"""Requests that only the active controller serves, for APIs librdkafka does not offer
(ListPartitionReassignments, AlterPartitionReassignments).

The controller is found as Kafka's admin client finds it: Metadata's ``controller_id``, that
broker's advertised endpoint, then the request over a plain socket with Samsa's own codec
(`samsa.cli.client.raw_request`, with the tool's security settings). A NOT_CONTROLLER answer (the
controller moved) or an unknown controller (an election is under way) is retried with fresh
metadata until the tool's timeout.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaException

from samsa.cli import client as cl
from samsa.cli.common import CliError
from samsa.protocol.errors import ErrorCode

LIST_REASSIGNMENTS = 46
ALTER_REASSIGNMENTS = 45

TopicPartition = tuple[str, int]
Ongoing = dict[TopicPartition, tuple[list[int], list[int], list[int]]]

_RETRY_BACKOFF_S = 0.2


class ControllerClient:
    def __init__(self, admin: Any, props: dict[str, str], timeout: float) -> None:
        self.admin = admin
        self.props = props
        self.timeout = timeout

    def _controller(self, remaining: float) -> tuple[str, int] | None:
        try:
            md = self.admin.list_topics(timeout=max(0.1, remaining))
        except KafkaException as e:
            raise CliError(f"cannot read cluster metadata: {cl.error_message(e.args[0]) if e.args else e}") from None
        broker = md.brokers.get(md.controller_id)
        return (broker.host, broker.port) if broker is not None else None

    def request(self, api_key: int, version: int, body: dict[str, Any], *, retry: bool = True) -> Any:
        """Send to the controller; the response Msg (its top-level error is the caller's to read,
        except NOT_CONTROLLER, which is retried while ``retry`` and time allow)."""
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            endpoint = self._controller(remaining)
            if endpoint is not None:
                wait = float(body.get("timeout", 0)) / 1000 + self.timeout
                resp = cl.raw_request(endpoint[0], endpoint[1], api_key, version, body, wait, self.props)
                if resp.error_code != ErrorCode.NOT_CONTROLLER:
                    return resp
            if not retry or time.monotonic() + _RETRY_BACKOFF_S >= deadline:
                if endpoint is None:
                    raise CliError(f"no active controller found within {self.timeout:g} s")
                return resp
            time.sleep(_RETRY_BACKOFF_S)  # the controller is moving: look it up again shortly

    def list_reassignments(self, partitions: list[TopicPartition] | None = None, *, retry: bool = True) -> Ongoing:
        """Ongoing reassignments (all, or of the given partitions): replicas, adding, removing."""
        topics = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for t, p in partitions:
                grouped.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
        resp = self.request(LIST_REASSIGNMENTS, 0, {"timeout": int(self.timeout * 1000), "topics": topics},
                            retry=retry)
        _raise_top_level(resp, "listing partition reassignments")
        return {
            (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics
            for p in t.partitions
        }

    def alter_reassignments(self, changes: dict[TopicPartition, list[int] | None],
                            allow_replication_factor_change: bool = True) -> dict[TopicPartition, tuple[int, str]]:
        """Submit targets (None cancels); per-partition (error code, message) of the failures."""
        grouped: dict[str, list[dict[str, Any]]] = {}
        for (t, p), replicas in changes.items():
            grouped.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        body = {
            "timeout": int(self.timeout * 1000),
            "allow_replication_factor_change": allow_replication_factor_change,
            "topics": [{"name": t, "partitions": ps} for t, ps in grouped.items()],
        }
        version = 0 if allow_replication_factor_change else 1
        resp = self.request(ALTER_REASSIGNMENTS, version, body)
        _raise_top_level(resp, "the partition reassignment request")
        failed: dict[TopicPartition, tuple[int, str]] = {}
        for t in resp.responses:
            for p in t.partitions:
                if p.error_code:
                    failed[(t.name, p.partition_index)] = (p.error_code, describe_error(p.error_code, p.error_message))
        return failed


def describe_error(code: int, message: str | None) -> str:
    """``NAME: message`` (or just the name) for an error code from a response."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


def _raise_top_level(resp: Any, what: str) -> None:
    if resp.error_code:
        raise CliError(f"{what} failed: {describe_error(resp.error_code, resp.error_message)}")
