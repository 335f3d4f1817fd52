"""Micro-benchmark of the delayed-request paths, in process: request frames through the real
Dispatcher and handlers, a real Partition over a real Log in a temporary directory; only the
broker around them is a stand-in and no socket is involved.

    .venv/bin/python bench/bench_delayed.py                         # this checkout
    .venv/bin/python bench/bench_delayed.py --compare /tmp/old-tree  # old and new, alternating

Cases, each timed per round trip (CPU time of the process: the machine is shared):

  tail       a consumer's fetch waits at the log end (min_bytes 1); an acks=1 produce of one
             small batch answers it from inside the append (the consumer-keeping-up path)
  tail16     the same with Fetch v16, the topic named by id (what librdkafka 2.5+ sends)
  general    a fetch of two partitions waits; a produce to one of them answers it through the
             general read path
  general16  the same with Fetch v16 (topics by id)
  acks_all   an acks=all produce to a partition with two in-sync replicas waits; the
             follower's fetch position moves the high watermark and answers it

With --compare, each case runs in child processes, old tree and this one alternating
(PYTHONPATH), and the best round of each is shown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

CASES = ("tail", "tail16", "general", "general16", "acks_all")


def _setup(tmp: Path, topics: dict[str, list[int]]) -> Any:
    from samsa.handlers import HANDLER_MODULES
    from samsa.metadata.zkdata import PartitionState
    from samsa.server.dispatch import Dispatcher
    from samsa.server.replica_manager import Partition, ReplicaManager
    from samsa.server.topics import Topic
    from samsa.storage.config import LogConfig
    from samsa.storage.log import Log

    loop: asyncio.AbstractEventLoop
    try:
        import uvloop
        loop = uvloop.new_event_loop()  # as the broker runs
    except ImportError:
        loop = asyncio.new_event_loop()
    replicas = ReplicaManager()
    from samsa.config import BrokerConfig
    from samsa.server.quotas import ClientQuotas

    config = BrokerConfig({"broker.id": "0"})
    broker = SimpleNamespace(replicas=replicas, topics={}, cluster=SimpleNamespace(brokers={0: None, 1: None}),
                             loop=loop, node_id=0, quotas=ClientQuotas(), authorizer=None,
                             current_config=lambda: config, fetch_sessions=None)
    try:
        from samsa.server.purgatory import Purgatory
    except ImportError:  # the tree before the purgatory
        pass
    else:
        broker.purgatory = replicas.purgatory = Purgatory(loop)
    for name, reps in topics.items():
        broker.topics[name] = Topic(name, uuid.uuid4(), {0: reps})
        lg = Log.open(tmp / f"{name}-0", LogConfig(segment_bytes=256 << 20, retention_ms=-1))
        p = Partition(name, 0, broker.topics[name].topic_id, lg, node_id=0)
        replicas.add(p)
        p.apply_state(PartitionState(leader=0, leader_epoch=1, isr=list(reps)), reps)
    dispatcher = Dispatcher(broker, HANDLER_MODULES)  # type: ignore[arg-type]
    conn = SimpleNamespace(peer_str="bench", client_id=None, peer=("127.0.0.1", 1), principal="User:ANONYMOUS",
                           listener="PLAINTEXT", sasl=None, session_expiry=0)
    return broker, dispatcher, conn


def _fetch_frame(version: int, parts: list[tuple[str, int]], cid: int, topics: dict[str, Any] | None = None) -> bytearray:
    """A Fetch of partition 0 of each topic at its offset; from v13 the topics go by id (their
    ids from `topics`, name -> Topic)."""
    from samsa.protocol.messages import encode_request

    def key(t: str) -> dict[str, Any]:
        return {"topic_id": topics[t].topic_id.bytes} if version >= 13 and topics else {"topic": t}

    body = {"replica_id": -1, "max_wait": 5000, "min_bytes": 1, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1,
            "topics": [{**key(t), "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": o,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                                                     "last_fetched_epoch": -1}]} for t, o in parts],
            "forgotten_topics_data": [], "rack_id": ""}
    return bytearray(bytes(encode_request(1, version, cid, "bench", body))[4:])


def _produce_frame(topic: str, acks: int, cid: int) -> bytearray:
    from samsa.protocol.messages import encode_request
    from samsa.protocol.records import build_batch

    batch = build_batch([(b"k", b"v" * 100, [], 1_700_000_000_000)])
    body = {"transactional_id": None, "acks": acks, "timeout": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    return bytearray(bytes(encode_request(0, 9, cid, "bench", body))[4:])


def _answered(result: Any, got: list[Any]) -> asyncio.Future[Any] | None:
    if hasattr(result, "on_done"):
        result.on_done(lambda value, error: got.append(error or value))
        return None
    # the tree before the purgatory: an acks=all produce was a coroutine, run as a task
    task = asyncio.ensure_future(result)
    task.add_done_callback(lambda t: got.append(t.result()))
    return task


def run_case(case: str, n: int) -> float:
    """CPU seconds per round trip of `case`, over `n` round trips."""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        version = 16 if case.endswith("16") else 12
        if case.startswith("tail"):
            broker, dispatch, conn = _setup(tmp, {"t": [0]})
            fetches = [_fetch_frame(version, [("t", i)], i, broker.topics) for i in range(n)]
            produces = [_produce_frame("t", 1, i) for i in range(n)]
        elif case.startswith("general"):
            broker, dispatch, conn = _setup(tmp, {"a": [0], "b": [0]})
            fetches = [_fetch_frame(version, [("a", i), ("b", 0)], i, broker.topics) for i in range(n)]
            produces = [_produce_frame("a", 1, i) for i in range(n)]
        else:
            broker, dispatch, conn = _setup(tmp, {"t": [0, 1]})
            produces = [_produce_frame("t", -1, i) for i in range(n)]
            fetches = []
        got: list[Any] = []
        part = broker.replicas.get("a" if case.startswith("general") else "t", 0)
        live = {0, 1}.__contains__

        async def acks_all() -> None:
            for i in range(n):
                task = _answered(dispatch(conn, produces[i]), got)
                if task is not None:
                    await asyncio.sleep(0)  # the task starts waiting, as on the broker's loop
                part.update_follower(1, part.log.log_end_offset, live)
                if task is not None:
                    await task

        async def fetches_answered() -> None:
            for i in range(n):
                _answered(dispatch(conn, fetches[i]), got)
                dispatch(conn, produces[i])

        t0 = time.process_time()
        broker.loop.run_until_complete(acks_all() if case == "acks_all" else fetches_answered())
        elapsed = time.process_time() - t0
        assert len(got) == n and all(not isinstance(g, BaseException) for g in got), got[:3]
        broker.loop.close()
        return elapsed / n


def child(case: str, n: int, rounds: int) -> None:
    best = min(run_case(case, n) for _ in range(rounds))
    print(best)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="round trips per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--procs", type=int, default=3, help="child processes per tree and case (with --compare)")
    ap.add_argument("--compare", help="an older source tree (its directory holds samsa/) to run alternately")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n, args.rounds)
        return
    if not args.compare:
        for case in args.cases.split(","):
            print(f"{case:9} {min(run_case(case, args.n) for _ in range(args.rounds)) * 1e6:8.1f} us")
        return
    here = str(Path(__file__).resolve().parents[1])
    trees = {"old": args.compare, "new": here}
    for case in args.cases.split(","):
        best: dict[str, float] = {}
        for _ in range(args.procs):
            for label, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, __file__, "--child", case, "--n", str(args.n), "--rounds",
                                      str(args.rounds)], env=env, capture_output=True, text=True, check=True)
                best[label] = min(best.get(label, 1e9), float(out.stdout.split()[-1]))
        print(f"{case:9} old {best['old'] * 1e6:8.1f} us   new {best['new'] * 1e6:8.1f} us   "
              f"new/old {best['new'] / best['old']:.2f}", flush=True)


if __name__ == "__main__":
    main()
