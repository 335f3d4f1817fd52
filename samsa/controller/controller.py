"""The controller: one broker, elected through the ephemeral /controller node, that decides.

How it works. Every broker stands for controller when /controller is missing (at start-up
and whenever the node vanishes); the one whose create succeeds bumps /controller_epoch and
activates. From then on it watches, in the store:

    /brokers/ids                 a broker died  -> elect new leaders for what it led (from
                                                   the ISR; unclean only if allowed, and
                                                   logged), drop it from the ISRs it was in
                                 a broker came  -> partitions left leaderless get a leader
    /brokers/topics, /<t>        new topic or partitions -> initial leader and ISR
    /admin/delete_topics         delete the topic's nodes (brokers then delete their logs)
    /admin/controlled_shutdown   a broker is stopping -> move its leaderships first

Besides ZooKeeper's session timeout, the controller notices a dead broker at once: it keeps
one idle TCP connection to each live broker, and when that connection closes and a new one
is refused (no process listens there any more), it removes the broker's registration, which
is then handled as a session expiry. Every other broker watches the controller the same way
and, when it is gone, removes its /controller node too, so a new controller is elected at
once. A paused or partitioned broker is not refused and waits
for its session to expire, as in Kafka. A broker that finds its registration removed while
it is alive registers again.

It also runs preferred-leader elections (`auto.leader.rebalance.enable`), the ElectLeaders and
partition-reassignment APIs. All of this runs on the broker's event loop, one callback at a
time, so the controller's state has a single writer. Decisions are the pure functions of
`decisions`; this module gathers facts and writes the results.

Partition states are read fresh before each decision and written with compare-and-set on the
node's version: a leader changing its ISR at the same moment makes one of the two writes
fail, and the controller re-reads and decides again. Elections bump the leader epoch, which
fences the old leader (its own ISR writes fail, followers and clients reject its epoch).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from samsa.controller.decisions import (
    AssignmentError,
    elect_for_controlled_shutdown,
    elect_for_reassignment,
    elect_leader,
    offline_election,
    preferred_leader,
    reassignment_complete,
    reassignment_plan,
)
from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, Fenced, NodeExists, NoNode, StoreError, log_failures
from samsa.protocol.errors import ErrorCode

log = logging.getLogger("samsa.controller")

TP = tuple[str, int]


guarded = log_failures(log, "Controller")
Decide = Callable[[str, int, list[int], "zkdata.PartitionState | None"], "zkdata.PartitionState | None"]


async def probe_until_refused(broker: Any, target: int, keep_going: Callable[[], bool]) -> bool:
    """Hold an idle connection to broker `target`; True when it drops and reconnecting is
    refused (no process listens there any more), False once `keep_going()` turns false."""
    while keep_going():
        ep = broker.cluster.endpoint(target, broker.inter_broker_listener)
        if ep is None:
            await asyncio.sleep(0.5)
            continue
        try:
            reader, writer = await asyncio.open_connection(*ep)
        except ConnectionRefusedError:
            return keep_going()
        except OSError:
            await asyncio.sleep(0.5)
            continue
        try:
            await reader.read(1)  # a broker never speaks first: this returns at EOF
        except OSError:
            pass
        finally:
            writer.close()
        await asyncio.sleep(0.01)
    return False


def remove_dead_broker(store: Any, broker_id: int, also_controller: bool) -> None:
    """A broker's process is gone (its port refuses connections): remove what its session
    holds now rather than when the session expires (its /controller node too, if it held it)."""
    if also_controller:
        node = store.get(zkdata.CONTROLLER)
        if node is not None and zkdata.loads(node[0]).get("brokerid") == broker_id:
            try:
                store.delete(zkdata.CONTROLLER)
            except NoNode:
                pass
    try:
        store.delete(zkdata.broker_path(broker_id))
    except NoNode:
        pass


class Controller:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.active = False
        self.epoch = 0
        self.epoch_version = -1  # /controller_epoch's version: the guard of every state write
        self.live: set[int] | None = None
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, zkdata.TopicAssignment] = {}
        self._watches: list[Any] = []
        self._topic_watches: dict[str, Any] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._probes: dict[int, asyncio.Task[None]] = {}

    @property
    def store(self) -> Any:
        return self.broker.store

    # -- election ---------------------------------------------------------------------------------

    def try_elect(self) -> bool:
        """Stand for controller: True if this broker won (and is now active)."""
        if self.active:
            return True
        me = self.broker.node_id
        try:
            self.store.create(zkdata.CONTROLLER, zkdata.dumps(
                {"version": 2, "brokerid": me, "timestamp": str(int(time.time() * 1000))}), ephemeral=True)
        except NodeExists:
            return False
        except StoreError as e:
            log.warning("Could not stand for controller: %s", e)
            return False
        try:
            node = self.store.get(zkdata.CONTROLLER_EPOCH)
            epoch = int(node[0]) + 1 if node and node[0] else 1
            if node is None:
                self.store.create(zkdata.CONTROLLER_EPOCH, str(epoch).encode())
                self.epoch_version = 0
            else:
                self.epoch_version = self.store.set(zkdata.CONTROLLER_EPOCH, str(epoch).encode(), node[1])
        except StoreError as e:
            log.warning("Won /controller but could not bump /controller_epoch (%s); resigning", e)
            self._delete_quietly(zkdata.CONTROLLER)
            return False
        self.epoch = epoch
        log.info("Broker %d is the controller (epoch %d)", me, epoch)
        self.activate()
        return True

    def activate(self) -> None:
        self.active = True
        self.live = None
        loop = self.broker.loop
        self._watches = [
            self.store.watch_children(zkdata.BROKER_IDS, self._on_brokers, loop=loop),
            self.store.watch_children(zkdata.TOPICS, self._on_topics, loop=loop),
            self.store.watch_children(zkdata.DELETE_TOPICS, self._on_delete_topics, loop=loop),
            self.store.watch_children(zkdata.CONTROLLED_SHUTDOWN, self._on_controlled_shutdown, loop=loop),
        ]
        if self.broker.config.get_bool("auto.leader.rebalance.enable"):
            self._schedule_rebalance()

    def resign(self) -> None:
        if not self.active:
            return
        self.active = False
        for w in self._watches:
            w.cancel()
        for w in self._topic_watches.values():
            w.cancel()
        self._watches, self._topic_watches = [], {}
        self.assignments.clear()
        for task in self._probes.values():
            task.cancel()
        self._probes.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        log.info("Broker %d is no longer the controller", self.broker.node_id)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.store.delete(path)
        except StoreError:
            pass

    # -- the core: read states, decide, write with compare-and-set -----------------------------

    def update_states(self, keys: Iterable[TP], decide: Decide) -> dict[TP, zkdata.PartitionState]:
        """Apply `decide` to the current state of each partition; retry the ones whose state
        changed under us. Returns the states written."""
        pending = [k for k in keys if k[0] in self.assignments and k[1] in self.assignments[k[0]].partitions]
        written: dict[TP, zkdata.PartitionState] = {}
        for attempt in range(10):
            if not pending or not self.active:
                break
            paths = [zkdata.partition_state_path(t, p) for t, p in pending]
            if attempt == 0:
                # This broker's view follows every state by watch: start from it (a stale one
                # fails the compare-and-set and is read afresh on the next round).
                cached = [self.broker.cluster.state(t, p) for t, p in pending]
                nodes = [None if st is None else (st.encode(), st.version) for st in cached]
                missing = [i for i, n in enumerate(nodes) if n is None]
                if missing:
                    for i, node in zip(missing, self.store.get_many([paths[i] for i in missing])):
                        nodes[i] = node
            else:
                nodes = self.store.get_many(paths)
            creates: list[tuple[TP, str, zkdata.PartitionState]] = []
            sets: list[tuple[TP, str, zkdata.PartitionState, int]] = []
            for key, path, node in zip(pending, paths, nodes):
                current = zkdata.PartitionState.decode(node[0], node[1]) if node and node[0] else None
                new = decide(key[0], key[1], self.assignments[key[0]].partitions[key[1]], current)
                if new is None:
                    continue
                new.controller_epoch = self.epoch
                if current is None:
                    creates.append((key, path, new))
                else:
                    sets.append((key, path, new, current.version))
            retry: list[TP] = []
            guard = (zkdata.CONTROLLER_EPOCH, self.epoch_version)
            if creates:
                errs = self.store.create_many([(p, s.encode()) for _, p, s in creates], guard=guard)
                if any(isinstance(e, Fenced) for e in errs):
                    self._fenced()
                    break
                for (key, _, st), err in zip(creates, errs):
                    if err is None:
                        written[key] = st
                    elif isinstance(err, NodeExists):
                        retry.append(key)
                    else:
                        log.warning("Could not create the state of %s-%d: %s", key[0], key[1], err)
            if sets:
                results = self.store.set_many([(p, s.encode(), v) for _, p, s, v in sets], guard=guard)
                if any(isinstance(r, Fenced) for r in results):
                    self._fenced()
                    break
                for (key, _, st, _), res in zip(sets, results):
                    if isinstance(res, BadVersion):
                        retry.append(key)
                    elif isinstance(res, StoreError):
                        log.warning("Could not write the state of %s-%d: %s", key[0], key[1], res)
                    else:
                        st.version = int(res)
                        written[key] = st
            pending = retry
        return written

    def _fenced(self) -> None:
        log.warning("Another broker became controller (/controller_epoch moved past %d); resigning", self.epoch)
        self.resign()

    def all_partitions(self) -> list[TP]:
        return [(t, p) for t, a in sorted(self.assignments.items()) for p in sorted(a.partitions)]

    def _unclean(self, topic: str) -> bool:
        return str(self.broker.topic_config(topic, "unclean.leader.election.enable")).lower() == "true"

    def _elect_offline(self, keys: Iterable[TP], why: str) -> dict[TP, zkdata.PartitionState]:
        live = self.live or set()

        def decide(topic: str, p: int, replicas: list[int], st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if st is None:  # a new partition: its live replicas are its ISR
                isr = [r for r in replicas if r in live]
                return zkdata.PartitionState(isr[0] if isr else -1, 0, isr or list(replicas))
            if st.leader in live and st.leader not in self.shutting_down:
                return None
            if not any(r in live for r in replicas):
                if st.leader == -1:
                    return None
                return zkdata.PartitionState(-1, st.leader_epoch + 1, st.isr)
            result = offline_election(replicas, st.isr, live, self._unclean(topic))
            if result.leader is None:
                if st.leader == -1:
                    return None
                log.warning("%s-%d is offline: no live replica in its ISR %s (unclean.leader.election.enable "
                            "is false)", topic, p, st.isr)
                return zkdata.PartitionState(-1, st.leader_epoch + 1, st.isr)
            if result.unclean:
                log.warning("Unclean leader election for %s-%d: broker %d was not in the ISR %s; records "
                            "acknowledged by the old ISR may be lost", topic, p, result.leader, st.isr)
            return zkdata.PartitionState(result.leader, st.leader_epoch + 1, result.isr)

        t0 = time.monotonic()
        written = self.update_states(keys, decide)
        if written:
            led = sum(1 for s in written.values() if s.leader >= 0)
            log.info("Elected leaders for %d partitions (%d offline) after %s in %.0f ms", led, len(written) - led,
                     why, (time.monotonic() - t0) * 1000)
        return written

    # -- events -----------------------------------------------------------------------------------

    @guarded
    def _on_brokers(self, ids: list[str]) -> None:
        if not self.active:
            return
        new = {int(i) for i in ids if i.isdigit()}
        old, self.live = self.live, new
        self.shutting_down &= new
        self._update_probes(new)
        if old is None:
            self._elect_offline(self.all_partitions(), "controller failover")
            gone = {r for a in self.assignments.values() for reps in a.partitions.values() for r in reps} - new
            if gone:  # brokers that died before this controller took over leave the ISRs too
                self._on_brokers_dead(gone)
            return
        dead, born = old - new, new - old
        if dead:
            log.info("Brokers %s are gone", ",".join(map(str, sorted(dead))))
            self._on_brokers_dead(dead)
        if born:
            log.info("Brokers %s joined", ",".join(map(str, sorted(born))))
            keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                    if any(b in reps for b in born)]
            self._elect_offline(keys, f"broker {','.join(map(str, sorted(born)))} joined")

    def _on_brokers_dead(self, dead: set[int]) -> None:
        keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                if any(b in reps for b in dead)]
        self._elect_offline(keys, f"broker {','.join(map(str, sorted(dead)))} failed")
        self._remove_from_isrs(keys, dead)

    def _remove_from_isrs(self, keys: list[TP], dead: set[int]) -> None:
        """Dead replicas leave the ISRs (the leader would keep an idle one: its log end offset
        still matches)."""

        def shrink(topic: str, p: int, replicas: list[int], st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if st is None or st.leader < 0 or not (set(st.isr) & dead):
                return None
            isr = [r for r in st.isr if r not in dead]
            if not isr:
                return None
            return zkdata.PartitionState(st.leader, st.leader_epoch, isr)

        written = self.update_states(keys, shrink)
        if written:
            log.info("Removed dead brokers %s from the ISR of %d partitions", ",".join(map(str, sorted(dead))),
                     len(written))

    @guarded
    def _on_topics(self, names: list[str]) -> None:
        if not self.active:
            return
        current = set(names)
        for gone in set(self._topic_watches) - current:
            self._topic_watches.pop(gone).cancel()
            self.assignments.pop(gone, None)
        for name in sorted(current - set(self._topic_watches)):
            self._topic_watches[name] = self.store.watch_data(
                zkdata.topic_path(name), lambda d, v, n=name: self._on_assignment(n, d), loop=self.broker.loop)

    @guarded
    def _on_assignment(self, name: str, data: bytes | None) -> None:
        if not self.active or not data:
            return
        try:
            assignment = zkdata.TopicAssignment.decode(data)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the unreadable assignment of %s: %s", name, e)
            return
        self.assignments[name] = assignment
        if self.live is not None:
            keys = [(name, p) for p in assignment.partitions]
            self._elect_offline(keys, f"topic {name} changed")
            gone = {r for reps in assignment.partitions.values() for r in reps} - self.live
            if gone:
                self._remove_from_isrs(keys, gone)
            for p in list(assignment.adding) + list(assignment.removing):
                st = self.broker.cluster.state(name, p)
                if st is not None:
                    self.on_partition_state(name, p, st)

    @guarded
    def _on_delete_topics(self, names: list[str]) -> None:
        if not self.active:
            return
        for name in names:
            try:
                if self.store.get(zkdata.topic_path(name)) is not None:
                    self.store.delete(zkdata.topic_path(name), recursive=True)
                if self.store.get(zkdata.topic_config_path(name)) is not None:
                    self.store.delete(zkdata.topic_config_path(name))
                self.store.delete(zkdata.delete_topic_path(name))
                log.info("Deleted topic %s", name)
            except NoNode:
                pass
            except StoreError as e:
                log.warning("Could not delete topic %s yet: %s", name, e)

    @guarded
    def _on_controlled_shutdown(self, ids: list[str]) -> None:
        if not self.active:
            return
        asked = {int(i) for i in ids if i.isdigit()}
        fresh = asked - self.shutting_down
        self.shutting_down = asked
        if not fresh:
            return
        live = self.live or set()
        going = set(asked)
        keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                if any(b in reps for b in fresh)]

        def move(topic: str, p: int, replicas: list[int], st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if st is None:
                return None
            if st.leader in going:
                leader = elect_for_controlled_shutdown(replicas, st.isr, live, going)
                if leader is None:
                    return None
                return zkdata.PartitionState(leader, st.leader_epoch + 1, [r for r in st.isr if r not in going])
            if set(st.isr) & going and st.leader >= 0:
                isr = [r for r in st.isr if r not in going]
                return zkdata.PartitionState(st.leader, st.leader_epoch, isr) if isr else None
            return None

        written = self.update_states(keys, move)
        log.info("Controlled shutdown of broker %s: moved %d leaderships", ",".join(map(str, sorted(fresh))),
                 sum(1 for (t, p), s in written.items() if s.leader not in going))

    # -- fast failure detection ----------------------------------------------------------------

    def _update_probes(self, live: set[int]) -> None:
        for b in set(self._probes) - live:
            self._probes.pop(b).cancel()
        for b in live - set(self._probes) - {self.broker.node_id}:
            self._probes[b] = self.broker.loop.create_task(self._probe(b), name=f"probe-{b}")

    async def _probe(self, broker_id: int) -> None:
        if await probe_until_refused(self.broker, broker_id, lambda: self.active):
            self._broker_refused(broker_id)

    def _broker_refused(self, broker_id: int) -> None:
        if not self.active or broker_id not in (self.live or set()):
            return
        log.info("Broker %d refuses connections: its process is gone; not waiting for its ZooKeeper session "
                 "to expire", broker_id)
        self._probes.pop(broker_id, None)
        try:
            remove_dead_broker(self.store, broker_id, also_controller=False)
        except StoreError as e:
            log.warning("Could not remove the registration of broker %d: %s", broker_id, e)

    # -- preferred leaders ------------------------------------------------------------------------

    def _schedule_rebalance(self) -> None:
        interval = max(1, int(self.broker.config.get("leader.imbalance.check.interval.seconds")))
        self._timer = self.broker.loop.call_later(interval, self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        self._timer = None
        if not self.active:
            return
        try:
            self.auto_rebalance()
        except StoreError as e:
            log.warning("Preferred leader check failed: %s", e)
        except Exception:
            log.exception("Preferred leader check failed")
        self._schedule_rebalance()

    def auto_rebalance(self) -> int:
        """Kafka's auto.leader.rebalance: for each broker whose share of partitions it prefers
        but does not lead exceeds leader.imbalance.per.broker.percentage, elect it back."""
        pct = int(self.broker.config.get("leader.imbalance.per.broker.percentage"))
        view = self.broker.cluster
        preferred: dict[int, list[TP]] = {}
        for t, a in self.assignments.items():
            for p, reps in a.partitions.items():
                if reps:
                    preferred.setdefault(reps[0], []).append((t, p))
        todo: list[TP] = []
        for b, keys in preferred.items():
            if b not in (self.live or set()) or b in self.shutting_down:
                continue
            not_led = [k for k in keys if (view.state(*k) is not None and view.state(*k).leader != b)]
            if keys and len(not_led) * 100 / len(keys) > pct:
                todo += not_led
        if not todo:
            return 0
        return sum(1 for code, _ in self._elect_preferred(todo).values() if code == ErrorCode.NONE)

    def _elect_preferred(self, keys: list[TP]) -> dict[TP, tuple[int, str | None]]:
        live = self.live or set()
        outcome: dict[TP, tuple[int, str | None]] = {}

        def decide(topic: str, p: int, replicas: list[int], st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if st is None:
                outcome[(topic, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, "partition has no state yet")
                return None
            if replicas and st.leader == replicas[0]:
                outcome[(topic, p)] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                return None
            leader = preferred_leader(replicas, st.isr, live - self.shutting_down)
            if leader is None:
                outcome[(topic, p)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                       f"preferred replica {replicas[0] if replicas else -1} is not alive and in the ISR")
                return None
            outcome[(topic, p)] = (ErrorCode.NONE, None)
            return zkdata.PartitionState(leader, st.leader_epoch + 1, st.isr)

        self.update_states(keys, decide)
        moved = [k for k, (c, _) in outcome.items() if c == ErrorCode.NONE]
        if moved:
            log.info("Preferred leader election moved %d partitions", len(moved))
        return outcome

    def _elect_unclean(self, keys: list[TP]) -> dict[TP, tuple[int, str | None]]:
        live = self.live or set()
        outcome: dict[TP, tuple[int, str | None]] = {}

        def decide(topic: str, p: int, replicas: list[int], st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if st is None:
                outcome[(topic, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, "partition has no state yet")
                return None
            if st.leader in live:
                outcome[(topic, p)] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                return None
            leader, unclean = elect_leader(replicas, st.isr, live, True)
            if leader is None:
                outcome[(topic, p)] = (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is alive")
                return None
            if unclean:
                log.warning("Unclean leader election (requested) for %s-%d: broker %d, ISR was %s",
                            topic, p, leader, st.isr)
            outcome[(topic, p)] = (ErrorCode.NONE, None)
            return zkdata.PartitionState(leader, st.leader_epoch + 1, [leader] if unclean else
                                         [r for r in st.isr if r in live])

        self.update_states(keys, decide)
        return outcome

    # -- the admin APIs (ElectLeaders, partition reassignment) ---------------------------------

    def _known(self, partitions: list[TP] | None) -> tuple[list[TP], dict[TP, tuple[int, str | None]]]:
        if partitions is None:
            return self.all_partitions(), {}
        ok, bad = [], {}
        for t, p in partitions:
            if t in self.assignments and p in self.assignments[t].partitions:
                ok.append((t, p))
            else:
                bad[(t, p)] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic-partition.")
        return ok, bad

    async def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        keys, result = self._known(partitions)
        outcome = self._elect_preferred(keys) if election_type == 0 else self._elect_unclean(keys)
        for k, (code, msg) in outcome.items():
            result[k] = (int(code), msg)
        if partitions is None:  # "all partitions": report only those that were elected
            result = {k: v for k, v in result.items() if v[0] == ErrorCode.NONE}
        await self._await_leaders([k for k, v in result.items() if v[0] == ErrorCode.NONE])
        return result

    async def _await_leaders(self, keys: list[TP], timeout_s: float = 5.0) -> None:
        """Let this broker's own view catch up with what was written (answers then agree)."""
        if keys:
            await self.broker.cluster.wait_until(lambda: all(self.broker.cluster.state(*k) is not None for k in keys),
                                                 timeout_s)

    async def alter_reassignments(self, changes: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        result: dict[TP, tuple[int, str | None]] = {}
        live = self.live or set()
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for (t, p), target in changes.items():
            a = self.assignments.get(t)
            if a is None or p not in a.partitions:
                result[(t, p)] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "This server does not host this topic-partition.")
                continue
            if target is None:
                if p not in a.adding and p not in a.removing:
                    result[(t, p)] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), f"no reassignment of {t}-{p} in progress")
                    continue
            else:
                unknown = [r for r in target if r not in live]
                if unknown:
                    result[(t, p)] = (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                                      f"replicas {unknown} are not live brokers ({sorted(live)})")
                    continue
                try:
                    reassignment_plan(a.partitions[p], target)
                except AssignmentError as e:
                    result[(t, p)] = (int(e.error_code), str(e))
                    continue
            by_topic.setdefault(t, {})[p] = target
        for t, parts in by_topic.items():
            a = self.assignments[t]
            new = zkdata.TopicAssignment(a.topic_id, dict(a.partitions), dict(a.adding), dict(a.removing))
            for p, target in parts.items():
                original = [r for r in new.partitions[p] if r not in new.adding.get(p, [])]
                if target is None:  # cancel: back to the original replicas
                    new.partitions[p] = original
                    new.adding.pop(p, None)
                    new.removing.pop(p, None)
                    continue
                plan = reassignment_plan(original, target)
                if plan.no_op:
                    new.partitions[p] = original
                    new.adding.pop(p, None)
                    new.removing.pop(p, None)
                    continue
                new.partitions[p] = plan.replicas
                new.adding[p] = plan.adding
                new.removing[p] = plan.removing
                if not plan.adding and not plan.removing:  # a reorder: complete at once
                    new.partitions[p] = plan.target
                    new.adding.pop(p, None)
                    new.removing.pop(p, None)
            try:
                self.store.set(zkdata.topic_path(t), new.encode())
            except StoreError as e:
                for p in parts:
                    result[(t, p)] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), f"could not write the assignment: {e}")
                continue
            self.assignments[t] = new
            for p in parts:
                result[(t, p)] = (int(ErrorCode.NONE), None)
                log.info("Reassignment of %s-%d: replicas %s, adding %s, removing %s", t, p, new.partitions[p],
                         new.adding.get(p, []), new.removing.get(p, []))
                st = self.broker.cluster.state(t, p)
                if st is not None:
                    self._maybe_finish_reassignment(t, p, st)
                    if parts[p] is None and st.leader not in new.partitions[p]:
                        self._elect_offline([(t, p)], f"reassignment of {t}-{p} cancelled")
        return result

    def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        out: dict[TP, tuple[list[int], list[int], list[int]]] = {}
        for t, a in self.assignments.items():
            for p in sorted(set(a.adding) | set(a.removing)):
                if partitions is None or (t, p) in partitions:
                    out[(t, p)] = (a.partitions[p], a.adding.get(p, []), a.removing.get(p, []))
        return out

    def on_partition_state(self, topic: str, p: int, st: zkdata.PartitionState) -> None:
        """Called by this broker's view on every state change: finishes reassignments."""
        if self.active:
            self._maybe_finish_reassignment(topic, p, st)

    def _maybe_finish_reassignment(self, topic: str, p: int, st: zkdata.PartitionState) -> None:
        a = self.assignments.get(topic)
        if a is None or (p not in a.adding and p not in a.removing):
            return
        removing = a.removing.get(p, [])
        target = [r for r in a.partitions[p] if r not in removing]
        if not reassignment_complete(target, st.isr):
            return
        live = self.live or set()

        def finish(t: str, q: int, replicas: list[int], cur: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
            if cur is None or not reassignment_complete(target, cur.isr):
                return None
            isr = [r for r in cur.isr if r in target]
            if cur.leader in target and cur.leader in live:
                return zkdata.PartitionState(cur.leader, cur.leader_epoch, isr) if isr != cur.isr else None
            leader = elect_for_reassignment(target, cur.isr, live)
            if leader is None:
                return None
            return zkdata.PartitionState(leader, cur.leader_epoch + 1, isr)

        self.update_states([(topic, p)], finish)
        new = zkdata.TopicAssignment(a.topic_id, dict(a.partitions), dict(a.adding), dict(a.removing))
        new.partitions[p] = target
        new.adding.pop(p, None)
        new.removing.pop(p, None)
        try:
            self.store.set(zkdata.topic_path(topic), new.encode())
        except StoreError as e:
            log.warning("Could not complete the reassignment of %s-%d: %s", topic, p, e)
            return
        self.assignments[topic] = new
        log.info("Reassignment of %s-%d completed: replicas %s", topic, p, target)
