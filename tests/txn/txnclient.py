"""Raw-protocol helpers for the transaction tests: the coordinator's APIs as a client sends them."""

from __future__ import annotations

import time
from typing import Any

from samsa.protocol.records import build_batch
from tests.rawclient import RawClient


def find_txn_coordinator(c: RawClient, tid: str) -> Any:
    resp = c.request(10, 4, {"key_type": 1, "coordinator_keys": [tid]})
    return resp.coordinators[0]


def init_txn(c: RawClient, tid: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1,
             version: int = 4) -> Any:
    body: dict[str, Any] = {"transactional_id": tid, "transaction_timeout": timeout_ms}
    if version >= 3:
        body.update(producer_id=pid, producer_epoch=epoch)
    return c.request(22, version, body)


def init_txn_retrying(c: RawClient, tid: str, timeout_ms: int = 60000, deadline_s: float = 20.0) -> Any:
    """InitProducerId, retried on CONCURRENT_TRANSACTIONS (a fenced transaction being aborted)."""
    end = time.monotonic() + deadline_s
    while True:
        resp = init_txn(c, tid, timeout_ms)
        if resp.error_code != 51 or time.monotonic() > end:
            return resp
        time.sleep(0.05)


def add_partitions(c: RawClient, tid: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3) -> Any:
    resp = c.request(24, version, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                                   "v3_and_below_producer_epoch": epoch,
                                   "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in parts.items()]})
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(c: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
    return c.request(26, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                   "committed": commit})


def describe_txn(c: RawClient, tid: str) -> Any:
    return c.request(65, 0, {"transactional_id": [tid]} if False else {"transactional_ids": [tid]}
                     ).transaction_states[0]


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, v, [], now) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def wait_state(c: RawClient, tid: str, state: str, timeout_s: float = 20.0) -> Any:
    end = time.monotonic() + timeout_s
    while True:
        d = describe_txn(c, tid)
        if d.transaction_state == state or time.monotonic() > end:
            return d
        time.sleep(0.02)
