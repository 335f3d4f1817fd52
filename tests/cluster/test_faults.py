"""Each fault once, under an acks=all idempotent producer (issue 15): kill -9 of a leader, of a
follower, of the controller and of ZooKeeper (started again after 1.5 sessions); SIGSTOP of a
leader past its ZooKeeper session (then SIGCONT); a leader cut off from ZooKeeper only (it
still reaches the clients and the other brokers).

For each: no acknowledged record lost, duplicated or reordered, the replicas byte-identical once
healed, no broker exiting by itself, and the longest gap between two acknowledgements of a
partition, from the fault until healed, at most the ZooKeeper session timeout + 6 s. The
harness is `tests/cluster/faults.py` (shared with `bench/faults.py`, many random faults); where
the processes run and how a broker is cut off is `tests/cluster/fabric.py`: network namespaces
when this process may make them (root), else loopback and the isolation test is skipped with
the reason. Run with `-s` to see each fault's figures.

One topic, RF 3, min.insync.replicas 2, two partitions both led by the same broker, which is
not the controller: so each fault hits one role (the leader; a follower that is not the
controller; the controller, a follower of both).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.cluster import DEFAULTS, Cluster
from tests.cluster.fabric import Loopback, NetnsFabric, ZooKeeperProcess, make_fabric
from tests.cluster.faults import KINDS, FaultRun
from tests.zk.conftest import ZK_INSTALLED

pytestmark = pytest.mark.slow

SESSION_S = int(DEFAULTS["zookeeper.session.timeout.ms"]) / 1000
PARTITIONS = 2


@pytest.fixture(scope="module")
def fabric() -> Iterator[NetnsFabric | Loopback]:
    f = make_fabric(3)
    print(f"\nfault tests on {f.describe()}")
    yield f
    f.close()


@pytest.fixture(scope="module")
def zookeeper(fabric: NetnsFabric | Loopback, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    """A ZooKeeper of this module's own, placed by the fabric (one test kills it)."""
    if not ZK_INSTALLED:
        pytest.fail("Debian's zookeeper package is not installed: run scripts/install-deps.sh")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("faults-zk"), fabric.zk_host, fabric.zk_wrap).start()
    yield zk
    zk.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_fault(kind: str, fabric: NetnsFabric | Loopback, zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    if kind == "isolate_leader" and fabric.isolation_unavailable:
        pytest.skip(f"cutting a broker off from ZooKeeper needs network namespaces: {fabric.isolation_unavailable}")
    zookeeper.ensure_running()
    c = Cluster(tmp_path, zookeeper.hosts, 3, {"min.insync.replicas": "2"}, place=fabric.place)
    run: FaultRun | None = None
    try:
        c.start_all()
        ctl = c.controller()
        assert ctl is not None
        a, b = [i for i in range(3) if i != ctl]
        topic = f"faults-{uuid.uuid4().hex[:8]}"
        c.create_topic(topic, configs={"min.insync.replicas": "2"}, assignment=[[a, ctl, b], [a, b, ctl]])
        run = FaultRun(c, fabric, zookeeper, topic, PARTITIONS, SESSION_S, log=print,
                       client_debug="broker,metadata,topic")
        print()
        run.warm_up()
        r = run.inject(kind, p=0, zk_down_s=1.5 * SESSION_S)
        v = run.finish()
        print(f"acked {v.acked} of {v.produced} ({v.acked_without_offset} without an offset), lost {len(v.lost)}, "
              f"dup {len(v.dup)}, reordered {len(v.reordered)}, identical {'yes' if v.identical else 'no'}")
        problems = list(r.problems)
        if r.over_bound:
            problems.append(f"the longest gap between acknowledgements, {r.gap_s:.2f} s on partition "
                            f"{r.gap_partition}, is over the bound of {r.bound:.1f} s")
        problems += v.problems()
        if problems:
            run.keep_logs(kind, [r])
        assert not problems, "\n".join(problems) + "\n\n" + r.describe()
    finally:
        if run is not None:
            run.close()
        c.close()
