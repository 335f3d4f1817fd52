"""The admin tools against three real brokers on ZooKeeper: `samsa reassign-partitions`,
`samsa leader-election`, the controller's own preferred-leader rebalance, and `samsa topics
--delete` / `--alter --partitions`.

Each tool runs as a subprocess, as an operator runs it; the outcome is observed from outside
(the ZooKeeper znodes, `samsa configs --describe`, the brokers' partition directories, real
producers and consumers). The expected behaviour is Kafka's (ZooKeeper mode, KIP-455
reassignments, KIP-460 elections).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from tests.cli.helpers import ok, samsa
from tests.cluster.cluster import Cluster, produce_sync

pytestmark = pytest.mark.slow

RP = "reassign-partitions"
LE = "leader-election"


# --- helpers -------------------------------------------------------------------------------------


def topic_name() -> str:
    return f"a-{uuid.uuid4().hex[:8]}"


def values(n: int, tag: str = "v", size: int = 0) -> list[bytes]:
    return [f"{tag}{i:06d}".encode().ljust(size, b".") for i in range(n)]


def assert_delivered(reports: list[tuple[bytes, int, KafkaError | None]]) -> list[int]:
    errors = [(v, e) for v, _, e in reports if e is not None]
    assert not errors, f"{len(errors)} of {len(reports)} deliveries failed, first: {errors[:3]}"
    return [o for _, o, _ in reports]


def tool(c: Cluster, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`samsa NAME --bootstrap-server <the live, unpaused brokers> ARGS` as a subprocess."""
    return samsa(name, "--bootstrap-server", c.live_bootstrap(), *args)


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(content))
    return str(path)


def reassignment(topic: str, replicas: list[int], p: int = 0) -> dict[str, Any]:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": replicas}]}


def verify_completed(c: Cluster, path: str, topic: str, timeout: float = 20.0) -> str:
    """Run `--verify` until it reports the partition's reassignment completed; its output."""
    seen: list[str] = []

    def completed() -> str | None:
        proc = tool(c, RP, "--verify", "--reassignment-json-file", path)
        seen.append(proc.stdout + proc.stderr)
        return proc.stdout if f"Reassignment of partition {topic}-0 is completed." in proc.stdout else None

    return c.wait_for(completed, timeout, lambda: f"--verify reports {topic}-0 completed (last output: {seen[-1:]})")


def topic_dirs(c: Cluster, i: int, topic: str) -> list[str]:
    """Broker i's partition directories of `topic` (also ones renamed for deletion)."""
    d = c.broker(i).log_dir
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-"))


def configs(c: Cluster, entity_type: str, name: str) -> str:
    return ok(tool(c, "configs", "--entity-type", entity_type, "--entity-name", name, "--describe"))


def not_controller(c: Cluster) -> list[int]:
    ctrl = c.controller()
    return [i for i in range(c.n) if i != ctrl]


# --- reassign-partitions -------------------------------------------------------------------------


def test_reassign_moves_replica_to_two_other_brokers(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, assignment=[[0]])
    sent = values(400, size=100)
    assert assert_delivered(produce_sync(c.bootstrap, t, sent)) == list(range(400))

    # --generate proposes a placement on the listed brokers (same replication factor).
    move = write(tmp_path, "move.json", {"topics": [{"topic": t}], "version": 1})
    lines = ok(tool(c, RP, "--generate", "--topics-to-move-json-file", move, "--broker-list", "1,2")).splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == \
        "Proposed partition reassignment configuration", lines
    assert json.loads(lines[1])["partitions"] == [{"topic": t, "partition": 0, "replicas": [0], "log_dirs": ["any"]}]
    proposed = json.loads(lines[4])["partitions"]
    assert len(proposed) == 1 and proposed[0]["topic"] == t and proposed[0]["partition"] == 0, proposed
    assert len(proposed[0]["replicas"]) == 1 and set(proposed[0]["replicas"]) <= {1, 2}, proposed

    # --execute a move to [1, 2].
    path = write(tmp_path, "r.json", reassignment(t, [1, 2]))
    out = ok(tool(c, RP, "--execute", "--reassignment-json-file", path))
    assert f"Successfully started partition reassignment for {t}-0" in out, out
    assert '"replicas":[0]' in out, out  # the rollback file: the current assignment

    verify_completed(c, path, t)
    assert c.assignment(t) == {0: [1, 2]}
    st = c.state(t, 0)
    assert st is not None and st["leader"] in (1, 2), st
    assert sorted(st["isr"]) == [1, 2], st
    assert ok(tool(c, RP, "--list")) == "No partition reassignments found.\n"

    # The removed replica deletes its log; the new ones hold the same bytes.
    c.wait_for(lambda: topic_dirs(c, 0, t) == [], 15,
               lambda: f"broker 0 deletes its replica of {t}-0 (has {topic_dirs(c, 0, t)})")
    c.wait_replicas_identical(t)
    assert len(c.segment_bytes(1, t)) > 400 * 100
    got = c.consume_all(t, [0])[0]
    assert [o for o, _, _ in got] == list(range(400))
    assert [v for _, _, v in got] == sent


def test_reassign_throttle_is_set_then_removed_by_verify(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, assignment=[[0]])
    # 2.5 MB at 10 kB/s: a new replica copies one fetch (replica.fetch.max.bytes, 1 MiB) at once,
    # then the rest at 10 kB/s, so the move cannot be over before about 150 s, however loaded the
    # machine: the checks below find it in progress, then a raised throttle lets it finish.
    assert_delivered(produce_sync(c.bootstrap, t, values(250, size=10_000)))
    path = write(tmp_path, "r.json", reassignment(t, [1, 2]))
    out = ok(tool(c, RP, "--execute", "--reassignment-json-file", path, "--throttle", "10000"))
    assert "The inter-broker throttle limit was set to 10000 B/s" in out, out
    assert f"Successfully started partition reassignment for {t}-0" in out, out

    # Kafka's throttle configs: the source replica leads throttled, the new ones follow throttled.
    topic_cfg = configs(c, "topics", t)
    assert "leader.replication.throttled.replicas=0:0" in topic_cfg, topic_cfg
    assert "follower.replication.throttled.replicas=0:1,0:2" in topic_cfg, topic_cfg
    for b in range(3):
        broker_cfg = configs(c, "brokers", str(b))
        assert "leader.replication.throttled.rate=10000" in broker_cfg, (b, broker_cfg)
        assert "follower.replication.throttled.rate=10000" in broker_cfg, (b, broker_cfg)
    # The throttle holds the move: --verify finds it in progress and keeps the throttles.
    early = ok(tool(c, RP, "--verify", "--reassignment-json-file", path))
    assert f"Reassignment of partition {t}-0 is still in progress." in early, early
    assert "Clearing" not in early, early
    assert "follower.replication.throttled.replicas=0:1,0:2" in configs(c, "topics", t)
    assert c.assignment(t) == {0: [1, 2, 0]}  # KIP-455: still adding 1 and 2

    # Kafka's way to change the throttle of a running move: resubmit it with --additional. The
    # followers, waiting out the data they copied at 10 kB/s, go on at the new rate at once.
    out = ok(tool(c, RP, "--execute", "--additional", "--reassignment-json-file", path, "--throttle", "100000000"))
    assert "The inter-broker throttle limit was set to 100000000 B/s" in out, out
    out = verify_completed(c, path, t, timeout=30)
    assert "Clearing broker-level throttles on brokers 0,1,2" in out, out
    assert f"Clearing topic-level throttles on topic {t}" in out, out
    assert c.assignment(t) == {0: [1, 2]}
    assert "throttled" not in configs(c, "topics", t)
    for b in range(3):
        assert "throttled" not in configs(c, "brokers", str(b)), b
    c.wait_replicas_identical(t)


def test_reassign_cancel_restores_original_replicas(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A long session: the paused broker stays registered (alive to the controller) throughout.
    c = cluster(3, zookeeper_session_timeout_ms=15000)
    orig, new = not_controller(c)
    t = topic_name()
    c.create_topic(t, assignment=[[orig]])
    sent = values(100)
    assert_delivered(produce_sync(c.bootstrap, t, sent))

    # The only new replica cannot fetch: the move stays in progress.
    c.pause(new)
    path = write(tmp_path, "r.json", reassignment(t, [new]))
    out = ok(tool(c, RP, "--execute", "--reassignment-json-file", path))
    assert f"Successfully started partition reassignment for {t}-0" in out, out
    assert c.assignment(t) == {0: [new, orig]}  # KIP-455: target replicas + original replicas
    listed = ok(tool(c, RP, "--list"))
    assert f"{t}-0: replicas: {new},{orig}. adding: {new}. removing: {orig}." in listed, listed
    out = ok(tool(c, RP, "--verify", "--reassignment-json-file", path))
    assert f"Reassignment of partition {t}-0 is still in progress." in out, out

    # (--preserve-throttles: none were set, and clearing them would wait for the paused broker.)
    out = ok(tool(c, RP, "--cancel", "--reassignment-json-file", path, "--preserve-throttles"))
    assert f"Successfully cancelled partition reassignment for: {t}-0" in out, out
    assert c.assignment(t) == {0: [orig]}
    assert ok(tool(c, RP, "--list")) == "No partition reassignments found.\n"
    c.resume(new)

    # Nothing moves afterwards: the original replica keeps the partition, the new one drops its copy.
    out = ok(tool(c, RP, "--verify", "--reassignment-json-file", path))
    assert (f"There is no active reassignment of partition {t}-0, but replica set is [{orig}] rather than "
            f"[{new}].") in out, out
    c.wait_for(lambda: topic_dirs(c, new, t) == [], 15,
               lambda: f"broker {new} deletes its partial replica of {t}-0 (has {topic_dirs(c, new, t)})")
    assert c.assignment(t) == {0: [orig]}
    st = c.state(t, 0)
    assert st is not None and st["leader"] == orig and st["isr"] == [orig], st
    assert [v for _, _, v in c.consume_all(t, [0])[0]] == sent


# --- leader-election -----------------------------------------------------------------------------


def test_preferred_leader_election_restores_leadership(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3, auto_leader_rebalance_enable="false")
    t = topic_name()
    c.create_topic(t, assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    victim = not_controller(c)[0]
    p = victim  # the partition whose preferred leader is the victim
    assert c.leader_of(t, p) == victim
    c.kill9(victim)
    c.wait_leader_change(t, p, victim, 15)
    c.start(victim)
    c.wait_full_isr(t, range(3), 20)
    assert c.leader_of(t, p) != victim  # nobody moved it back (auto rebalance is off)

    out = ok(tool(c, LE, "--election-type", "preferred", "--all-topic-partitions"))
    assert out == f"Successfully completed leader election (PREFERRED) for partitions {t}-{p}\n", out
    assert c.leader_of(t, p) == victim
    for q in range(3):
        assert c.leader_of(t, q) == c.assignment(t)[q][0]
    c.wait_for(lambda: c.metadata_leader(t, p) == victim, 10, f"clients are told broker {victim} leads {t}-{p}")

    # Again: nothing to elect. With --all-topic-partitions those partitions are left out of the
    # answer (Kafka's rule); named explicitly they are reported as already elected.
    proc = tool(c, LE, "--election-type", "preferred", "--all-topic-partitions")
    assert proc.returncode == 0 and proc.stdout == "", proc
    out = ok(tool(c, LE, "--election-type", "preferred", "--topic", t, "--partition", str(p)))
    assert out == f"Valid replica already elected for partitions {t}-{p}\n", out


def test_unclean_election_elects_live_out_of_sync_replica(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    a, b = not_controller(c)  # the controller stays up throughout
    t = topic_name()
    c.create_topic(t, assignment=[[a, b]], configs={"unclean.leader.election.enable": "false"})
    first = values(50, "in-sync-")
    assert_delivered(produce_sync(c.bootstrap, t, first))
    c.wait_replicas_identical(t)

    c.kill9(b)
    c.wait_for(lambda: c.isr(t, 0) == [a], 15, f"broker {b} leaves the ISR of {t}-0")
    assert_delivered(produce_sync(c.live_bootstrap(), t, values(30, "only-on-a-"), acks="1", idempotent=False))
    c.kill9(a)
    c.wait_for(lambda: c.state(t, 0)["leader"] == -1, 15, f"{t}-0 is offline")  # type: ignore[index]
    c.start(b)
    c.wait_metadata_brokers([b, *(i for i in range(3) if i not in (a, b))], 20)
    st = c.state(t, 0)
    assert st is not None and st["leader"] == -1 and st["isr"] == [a], st  # unclean is disabled: stays offline

    proc = tool(c, LE, "--election-type", "preferred", "--topic", t, "--partition", "0")
    assert proc.returncode == 1, proc
    assert proc.stdout.startswith(
        f"Error completing leader election (PREFERRED) for partition: {t}-0: PREFERRED_LEADER_NOT_AVAILABLE"), proc
    assert c.leader_of(t, 0) is None

    out = ok(tool(c, LE, "--election-type", "unclean", "--topic", t, "--partition", "0"))
    assert out == f"Successfully completed leader election (UNCLEAN) for partitions {t}-0\n", out
    st = c.state(t, 0)
    assert st is not None and st["leader"] == b and st["isr"] == [b], st
    # The new leader has what it had: the records only the dead replica got are gone.
    got = c.consume_all(t, [0])[0]
    assert [v for _, _, v in got] == first
    assert [o for o, _, _ in got] == list(range(50))


def test_controller_rebalances_preferred_leaders_by_itself(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3, auto_leader_rebalance_enable="true", leader_imbalance_check_interval_seconds=1)
    t = topic_name()
    c.create_topic(t, assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    victim = not_controller(c)[0]
    p = victim
    c.kill9(victim)
    c.wait_leader_change(t, p, victim, 15)
    c.start(victim)
    c.wait_for(lambda: c.leader_of(t, p) == victim, 20, f"the controller gives {t}-{p} back to broker {victim}")
    for q in range(3):
        assert c.leader_of(t, q) == c.assignment(t)[q][0]
        assert sorted(c.isr(t, q)) == [0, 1, 2]
    c.wait_for(lambda: c.metadata_leader(t, p) == victim, 10, f"clients are told broker {victim} leads {t}-{p}")


# --- topics --delete / --alter -------------------------------------------------------------------


def test_delete_topic_removes_it_everywhere_and_recreate_starts_empty(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=2, rf=3, configs={"retention.ms": "86400000"})
    for p in range(2):
        assert_delivered(produce_sync(c.bootstrap, t, values(100, f"old-p{p}-"), partition=p))
    c.wait_replicas_identical(t, range(2))
    for i in range(3):
        assert topic_dirs(c, i, t) == [f"{t}-0", f"{t}-1"], (i, topic_dirs(c, i, t))
    assert c.zk.exists(f"{c.chroot}/config/topics/{t}") is not None
    assert "retention.ms=86400000" in configs(c, "topics", t)

    ok(tool(c, "topics", "--delete", "--topic", t))
    for i in range(3):
        c.wait_for(lambda i=i: topic_dirs(c, i, t) == [], 15,
                   lambda i=i: f"broker {i} deletes the directories of {t} (has {topic_dirs(c, i, t)})")
    for node in (f"/brokers/topics/{t}", f"/config/topics/{t}", f"/admin/delete_topics/{t}"):
        c.wait_for(lambda node=node: c.zk.exists(c.chroot + node) is None, 15, f"{node} is removed")
    c.wait_for(lambda: t not in ok(tool(c, "topics", "--list")).split(), 10, f"{t} is no longer listed")

    ok(tool(c, "topics", "--create", "--topic", t, "--partitions", "1", "--replication-factor", "3"))
    c.wait_full_isr(t, [0], 20)
    assert c.assignment(t).keys() == {0}
    assert "retention.ms" not in configs(c, "topics", t)  # the old topic's override went with it
    for i in range(3):
        c.wait_for(lambda i=i: topic_dirs(c, i, t) == [f"{t}-0"], 10, f"broker {i} hosts the new {t}-0")
    new = values(5, "new-")
    assert assert_delivered(produce_sync(c.bootstrap, t, new)) == list(range(5))
    got = c.consume_all(t, [0])[0]
    assert [(o, v) for o, _, v in got] == list(enumerate(new))


def test_create_partitions_on_cluster_get_leaders_and_full_isrs(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3)
    before = c.assignment(t)[0]
    ok(tool(c, "topics", "--alter", "--topic", t, "--partitions", "4"))
    c.wait_for(lambda: sorted(c.assignment(t)) == [0, 1, 2, 3], 10, f"{t} has 4 partitions in ZooKeeper")
    c.wait_full_isr(t, range(4), 20)
    assignment = c.assignment(t)
    assert assignment[0] == before  # existing partitions are not moved
    for p in range(4):
        assert sorted(assignment[p]) == [0, 1, 2], assignment
        assert c.leader_of(t, p) == assignment[p][0], (p, c.state(t, p))
    # Kafka's assignment spreads the preferred leaders of the new partitions over the brokers.
    assert {assignment[p][0] for p in (1, 2, 3)} == {0, 1, 2}, assignment
    for i in range(3):
        assert topic_dirs(c, i, t) == [f"{t}-{p}" for p in range(4)], (i, topic_dirs(c, i, t))
        for p in range(4):
            c.wait_for(lambda p=p, i=i: c.metadata_leader(t, p, via=i) == assignment[p][0], 10,
                       f"broker {i} tells clients the leader of {t}-{p}")
    for p in (1, 2, 3):
        sent = values(20, f"p{p}-")
        assert assert_delivered(produce_sync(c.bootstrap, t, sent, partition=p)) == list(range(20))
        assert [v for _, _, v in c.consume_all(t, [p])[p]] == sent
    c.wait_replicas_identical(t, (1, 2, 3))
