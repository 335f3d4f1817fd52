"""Random faults under an acks=all idempotent producer, many of them (issue 15): the long form of
`tests/cluster/test_faults.py`, on the same harness (`tests/cluster/faults.py`).

Three `samsa broker` processes on a real ZooKeeper (each in a network namespace of its own when
run as root, so a leader can be cut off from ZooKeeper only; else on loopback without that
fault), one topic with RF 3 and min.insync.replicas 2. A confluent_kafka producer (acks=all,
enable.idempotence) writes numbered records to every partition throughout. Faults, drawn at
random with the partition they aim at: kill -9 of a leader, a follower, the controller, or
ZooKeeper (down 0.5 to 2 sessions, then started again); SIGSTOP of a leader past its session
(then SIGCONT); a leader cut off from ZooKeeper only. Each is held until writes are
acknowledged again (or past the bound), healed, and followed by a random pause.

One line per fault as it goes; at the end one summary line:

    faults=100 acked=N lost=0 dup=0 reordered=0 identical=yes bound=9.0s over_bound=0 problems=0
    max_gap kill9_leader=2.1s kill9_follower=... (the longest gap between acknowledgements of a
    partition after one fault, per fault type)

and the full description of every fault that broke the bound or had a problem in
`<workdir>/report.txt` (its path is printed). Exit status 0 when everything held.

Usage (from the checkout, as root for the isolation fault):
    PYTHONPATH=. .venv/bin/python bench/faults.py --faults 100 --seed 1
    options: --partitions 3  --session-ms 3000  --rate 100 (records/s per partition)
             --pause 1,5 (seconds between faults)  --kinds kill9_leader,sigstop_leader,...
             --workdir DIR (kept afterwards for the logs; default a new temporary directory)
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.cluster import Cluster
from tests.cluster.fabric import ZooKeeperProcess, make_fabric
from tests.cluster.faults import (
    KINDS,
    FaultResult,
    FaultRun,
    max_gaps,
    stop_signals_raise,
)


def say(line: str) -> None:
    print(line, flush=True)


def summary(results: list[FaultResult], run: FaultRun, verdict_line: str) -> str:
    over = sum(r.over_bound for r in results)
    problems = sum(bool(r.problems) for r in results)
    gaps = " ".join(f"{k}={r.gap_s:.2f}s" for k, r in sorted(max_gaps(results).items()))
    return (f"faults={len(results)} {verdict_line} bound={run.bound:.1f}s over_bound={over} "
            f"problems={problems} max_gap {gaps}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=100.0, help="records/s per partition")
    ap.add_argument("--pause", default="1,5", help="min,max seconds between faults")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    pause = tuple(float(x) for x in args.pause.split(","))
    session_s = args.session_ms / 1000
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="samsa-faults-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stop_signals_raise()
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # the test's own client, during ZooKeeper outages

    fabric = make_fabric(3)
    if fabric.isolation_unavailable and "isolate_leader" in kinds:
        kinds.remove("isolate_leader")
        say(f"# isolate_leader left out: {fabric.isolation_unavailable}")
    say(f"# seed {seed}; {args.faults} faults of {','.join(kinds)}; workdir {workdir}; {fabric.describe()}")
    zk: ZooKeeperProcess | None = None
    c: Cluster | None = None
    run: FaultRun | None = None
    try:
        zk = ZooKeeperProcess(workdir / "zookeeper", fabric.zk_host, fabric.zk_wrap).start()
        c = Cluster(workdir, zk.hosts, 3, {"min.insync.replicas": "2", "zookeeper.session.timeout.ms": args.session_ms},
                    place=fabric.place)
        c.start_all()
        topic = f"faults-{uuid.uuid4().hex[:8]}"
        c.create_topic(topic, configs={"min.insync.replicas": "2"},
                       assignment=[[(p + k) % 3 for k in range(3)] for p in range(args.partitions)])
        run = FaultRun(c, fabric, zk, topic, args.partitions, session_s, interval=1 / args.rate)
        run.warm_up()
        unhealed = 0
        try:
            for k in range(args.faults):
                kind, p = rng.choice(kinds), rng.randrange(args.partitions)
                r = run.inject(kind, p, zk_down_s=rng.uniform(0.5, 2.0) * session_s)
                say(f"[{k + 1:>3}/{args.faults}] +{r.into_run:6.0f}s acked {run.producer.acked_count:>8} {r.line()}")
                unhealed = unhealed + 1 if r.healed_s is None else 0
                if unhealed >= 2:
                    say("# the cluster did not heal after two faults in a row: stopping here")
                    break
                time.sleep(rng.uniform(*pause))  # the interval between faults is itself random
        except KeyboardInterrupt as e:
            say(f"# interrupted ({e}) after {len(run.results)} faults; nothing read back")
            say(summary(run.results, run, "acked=? lost=? dup=? reordered=? identical=?"))
            return 130
        say("# stopping the producer, reading everything back, comparing the replicas")
        results = run.results
        bad = [r for r in results if not r.ok]
        report = workdir / "report.txt"
        try:
            v = run.finish()
        except Exception as e:  # noqa: BLE001 - the cluster is too broken to read back: say so, with the rest
            report.write_text("\n\n".join([*(r.describe() for r in bad), f"reading back failed: {e}"]) + "\n")
            say(f"# reading back failed: {str(e).splitlines()[0]} (details in {report})")
            say(summary(results, run, "acked=? lost=? dup=? reordered=? identical=?"))
            return 1
        report.write_text("\n\n".join([*(r.describe() for r in bad), *v.problems()]) + "\n")
        say(f"# {v.produced} records produced, {v.acked} acknowledged ({v.acked_without_offset} without an offset, "
            f"found by sequence number), {len(v.failed)} failed, {v.unacked_stored} stored without an acknowledgement")
        for line in v.problems():
            say(f"# {line}")
        if bad or v.problems():
            say(f"# {len(bad)} faults broke the bound or had problems: details in {report}")
        verdict = (f"acked={v.acked} lost={len(v.lost)} dup={len(v.dup)} reordered={len(v.reordered)} "
                   f"identical={'yes' if v.identical else 'no'}")
        say(summary(results, run, verdict))
        return 0 if not bad and not v.problems() else 1
    finally:
        if run is not None:
            run.close()
        if c is not None:
            c.close()
        if zk is not None:
            zk.stop()
        fabric.close()


if __name__ == "__main__":
    sys.exit(main())
