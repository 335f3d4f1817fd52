"""Micro-benchmark of the request path's fixed cost, in process: what creating a request's context
costs, and whole requests through the real Dispatcher and handlers (a real Partition over a real
Log in a temporary directory; the broker's services around them are stand-ins, no socket).

    .venv/bin/python bench/bench_dispatch.py                          # this checkout
    .venv/bin/python bench/bench_dispatch.py --compare /tmp/old-tree  # old and new, alternating

Cases, CPU time of the process per request (the machine is shared):

  context   creating the per-request context alone (`RequestContext(...)` as the dispatcher does)
  produce   an acks=1 Produce v9 of one 100-byte record, decoded, appended, answered
  fetch     a Fetch v12 of one partition with data at its offset, answered at once (file slice)
  fetch16   the same with Fetch v16, the topic named by id (KIP-516: what librdkafka 2.5+ sends)

The old tree is one whose dispatcher took the broker itself (`RequestContext(broker, conn,
header)`, a dataclass): the broker is a plain object there; this tree gets the broker's
services (`BrokerServices`, built once).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_delayed import _fetch_frame, _produce_frame  # noqa: E402

CASES = ("context", "produce", "fetch", "fetch16")


def _setup(tmp: Path) -> tuple[Any, Any, Any]:
    """(services or broker, dispatcher, connection) around one partition `t-0` led here."""
    from samsa.handlers import HANDLER_MODULES
    from samsa.metadata.zkdata import PartitionState
    from samsa.server.dispatch import Dispatcher
    from samsa.server.purgatory import Purgatory
    from samsa.server.replica_manager import Partition, ReplicaManager
    from samsa.server.topics import Topic
    from samsa.storage.config import LogConfig
    from samsa.storage.log import Log

    class Loop:  # the purgatory's scheduler; nothing here waits
        def time(self) -> float:
            return time.monotonic()

        def call_at(self, when: float, fn: Any, *args: Any) -> Any:
            raise AssertionError("nothing should wait")

        call_soon = call_at

    purgatory = Purgatory(Loop())  # type: ignore[arg-type]
    replicas = ReplicaManager(purgatory)
    topic = Topic("t", uuid.uuid4(), {0: [0]})
    lg = Log.open(tmp / "t-0", LogConfig(segment_bytes=1 << 30, retention_ms=-1))
    part = Partition("t", 0, topic.topic_id, lg, node_id=0)
    replicas.add(part)
    part.apply_state(PartitionState(leader=0, leader_epoch=1, isr=[0]), [0])
    cluster = SimpleNamespace(brokers={0: None}, controller_id=0)
    from samsa.config import BrokerConfig
    from samsa.server.quotas import ClientQuotas

    config = BrokerConfig({"broker.id": "0"})
    try:
        from samsa.server.context import BrokerServices
    except ImportError:  # the tree before the RequestContext: handlers got the broker itself
        target: Any = SimpleNamespace(replicas=replicas, topics={"t": topic}, cluster=cluster, node_id=0,
                                      purgatory=purgatory)
    else:
        from samsa.config import BrokerConfig

        none: Any = None
        config = BrokerConfig({})
        target = BrokerServices(
            node_id=0, cluster_id="bench", current_config=lambda: config, topics={"t": topic}, replicas=replicas,
            cluster=cluster, admin=none, groups=none, controller=none, producer_ids=none,  # type: ignore[arg-type]
            purgatory=purgatory, fetch_sessions=none, api_versions=[], endpoints=none, topic_ready=none,
            auto_create_topic=none, entity_configs=none, quotas=ClientQuotas(), persist_log_start_offsets=none,
            transactions=none)
    dispatcher = Dispatcher(target, HANDLER_MODULES)
    conn = SimpleNamespace(peer_str="bench", client_id=None, peer=("127.0.0.1", 1), principal="User:ANONYMOUS",
                           listener="PLAINTEXT", sasl=None, session_expiry=0)
    return target, dispatcher, conn


def run_case(case: str, n: int) -> float:
    """CPU seconds per request of `case`, over `n` requests."""
    with tempfile.TemporaryDirectory() as d:
        target, dispatch, conn = _setup(Path(d))
        if case == "context":
            try:
                from samsa.server.context import RequestContext
            except ImportError:
                from samsa.server.dispatch import RequestContext  # type: ignore[attr-defined,no-redef]
            from samsa.protocol.messages import decode_request_header, request_codec

            header = decode_request_header(_produce_frame("t", 1, 1), request_codec(0, 9).flexible)[0]
            t0 = time.process_time()
            for _ in range(n):
                RequestContext(target, conn, header)
            return (time.process_time() - t0) / n
        if case == "produce":
            frames = [_produce_frame("t", 1, i) for i in range(n)]
        else:
            dispatch(conn, _produce_frame("t", 1, 0))  # one batch to read
            version = 16 if case == "fetch16" else 12
            frames = [_fetch_frame(version, [("t", 0)], i, target.topics) for i in range(n)]
        t0 = time.process_time()
        for frame in frames:
            out = dispatch(conn, frame)
        elapsed = time.process_time() - t0
        assert out is not None and not hasattr(out, "on_done"), out
        return elapsed / n


def child(case: str, n: int, rounds: int) -> None:
    print(min(run_case(case, n) for _ in range(rounds)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="requests per round")
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
            n = args.n * 10 if case == "context" else args.n
            print(f"{case:8} {min(run_case(case, n) for _ in range(args.rounds)) * 1e6:8.3f} us")
        return
    here = str(Path(__file__).resolve().parents[1])
    trees = {"old": args.compare, "new": here}
    for case in args.cases.split(","):
        n = args.n * 10 if case == "context" else args.n
        best: dict[str, float] = {}
        for _ in range(args.procs):
            for label, tree in trees.items():
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, __file__, "--child", case, "--n", str(n), "--rounds",
                                      str(args.rounds)], env=env, capture_output=True, text=True, check=True)
                best[label] = min(best.get(label, 1e9), float(out.stdout.split()[-1]))
        print(f"{case:8} old {best['old'] * 1e6:8.3f} us   new {best['new'] * 1e6:8.3f} us   "
              f"new/old {best['new'] / best['old']:.2f}", flush=True)


if __name__ == "__main__":
    main()
