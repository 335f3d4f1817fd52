"""Micro-benchmark of the sans-io protocol layer on the hot paths: decoding Produce requests and
encoding Fetch responses (with a file slice spliced in, as the broker does).

Usage: .venv/bin/python bench/bench_protocol.py [SECONDS_PER_CASE]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from samsa.protocol.messages import decode_request_body, decode_request_header, encode_request, encode_response
from samsa.protocol.records import build_batch, scan_batches


class Slice(NamedTuple):
    fd: int
    position: int
    size: int


def rate(name: str, fn: Callable[[], Any], seconds: float) -> None:
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            fn()
        n += 100
    dt = time.perf_counter() - t0
    print(f"{name:<58} {n / dt:>12,.0f} /s  ({dt / n * 1e6:.1f} us each)")


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    for n_records, size in ((1, 100), (10_000, 100), (1_000, 1024)):
        batch = build_batch([(None, b"x" * size, [], 0)] * n_records)
        frame = bytes(encode_request(0, 9, 1, "bench", {"acks": 1, "timeout": 1000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}))[4:]

        def decode(frame: bytes = frame) -> None:
            _, start = decode_request_header(frame, True)
            req = decode_request_body(0, 9, frame, start)
            scan_batches(req.topic_data[0].partition_data[0].records, producer_batch=True)

        rate(f"produce v9 decode + CRC check, {n_records} x {size} B ({len(batch):,} B)", decode, seconds)

    body = {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": Slice(3, 0, 1 << 20)}]}]}
    rate("fetch v12 response encode, 1 partition (file slice)", lambda: encode_response(1, 12, 7, body), seconds)
    many = dict(body, responses=[{"topic": "t", "partitions": [dict(body["responses"][0]["partitions"][0],
                                                                     partition_index=i) for i in range(50)]}])
    rate("fetch v12 response encode, 50 partitions", lambda: encode_response(1, 12, 7, many), seconds)


if __name__ == "__main__":
    main()
