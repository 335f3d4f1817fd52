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

Everything the controller does runs on one task consuming an event queue (`EventQueue`,
Kafka's ControllerEventManager): watch callbacks, timers, probes and the admin APIs only put
events, so the controller's state has a single writer and no store call ever runs on a
watch's callback. Store calls are awaited, so the broker's event loop serves clients while
the controller waits on ZooKeeper. Events of an earlier term (before a resign) are dropped.

Besides ZooKeeper's session timeout, the controller notices a dead broker at once: it keeps
one idle TCP connection to each live broker, and when that connection closes and a new one
is refused (no process listens there any more), it removes the broker's registration, which
is then handled as a session expiry. A paused or partitioned broker is not refused and waits
for its session to expire, as in Kafka.

Partition states are read fresh before each decision (from this broker's view first) and
written with compare-and-set on the node's version, guarded by /controller_epoch's version:
a leader changing its ISR at the same moment makes one of the two writes fail, and the
controller re-reads and decides again; a controller whose epoch has passed is fenced.
Elections bump the leader epoch, which fences the old leader. Decisions are the pure
functions of `decisions`; the admin APIs (ElectLeaders, reassignments) are in `operations`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from samsa.controller.context import TP, ControllerContext, Decide
from samsa.controller.decisions import elect_for_controlled_shutdown, offline_election
from samsa.controller.event_queue import EventQueue
from samsa.controller.operations import Operations
from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, Fenced, MetadataStore, NodeExists, NoNode, StoreError

log = logging.getLogger("samsa.controller")
PS = zkdata.PartitionState
VIEW_LOAD_WAIT_S = 30.0  # the failover waits this long at most for the broker's view to hold every state



def _copy(st: zkdata.PartitionState | None) -> zkdata.PartitionState | None:
    """A private copy of a state from the view (a decision must not change the view's)."""
    return None if st is None else dataclasses.replace(st, isr=list(st.isr))


async def probe_until_refused(endpoint: Callable[[], tuple[str, int] | None], keep_going: Callable[[], bool]) -> bool:
    """Hold an idle connection to a broker; True when it drops and reconnecting is refused
    (no process listens there any more), False once `keep_going()` turns false."""
    while keep_going():
        ep = endpoint()
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


async def remove_dead_broker(store: MetadataStore, broker_id: int, also_controller: bool) -> None:
    """A broker's process is gone (its port refuses connections): remove what its session
    holds now rather than when the session expires (its /controller node too, if it held it)."""
    if also_controller:
        node = await store.get(zkdata.CONTROLLER)
        if node is not None and zkdata.loads(node[0]).get("brokerid") == broker_id:
            try:
                await store.delete(zkdata.CONTROLLER)
            except NoNode:
                pass
    try:
        await store.delete(zkdata.broker_path(broker_id))
    except NoNode:
        pass


class Controller:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.active = False
        self.epoch = 0
        self.epoch_version = -1  # /controller_epoch's version: the guard of every state write
        self.live: set[int] | None = None
        self.shutting_down: set[int] = set()
        # Replicas whose log dir failed, per broker, until it registers again (a restart).
        self.offline_replicas: dict[int, set[TP]] = {}
        self.assignments: dict[str, zkdata.TopicAssignment] = {}
        # Topic ids this controller deleted: a watch delivery of such an assignment queued before
        # the deletion ran is stale (a topic created again under the name has a new id).
        self._deleted_ids: set[Any] = set()
        self.events = EventQueue("controller", log)
        self.closing = False
        # Counted by every state this controller writes (`update_states`), for the broker's metrics:
        # a partition's leader moved to another live broker, and among those, to one that was
        # not in the ISR (an unclean election).
        self.leader_elections = 0
        self.unclean_leader_elections = 0
        self._term = 0  # bumped at every activation and resign: events of an old term are dropped
        self._watches: list[Any] = []
        self._topic_watches: dict[str, Any] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._probes: dict[int, asyncio.Task[None]] = {}
        self._initial_topics: set[str] | None = None  # the topics there were when this term began
        self._broker_ids: list[str] = []  # the newest children of /brokers/ids seen in this term
        self._failover_pending = False  # until the topics there were at activation are loaded
        self._unseen: set[int] = set()  # replicas' brokers never registered since this broker started
        self._unseen_timer: asyncio.TimerHandle | None = None
        # The states this controller wrote that its view may not show yet (the view follows
        # the store by watches, thousands of events behind after a big election): a decision
        # taken on the view's older state could skip a partition that needs one.
        self._written: dict[TP, PS] = {}
        self.ops = Operations(self)

    @property
    def store(self) -> MetadataStore:
        return self.ctx.store

    @property
    def node_id(self) -> int:
        return self.ctx.node_id

    # -- inputs: called on the loop, they only queue ------------------------------------------

    def start(self) -> None:
        self.events.start()

    async def stop(self) -> None:
        self.closing = True
        self.resign()
        await self.events.stop()

    def controller_changed(self, controller_id: int) -> None:
        """This broker's view saw /controller change (-1: no controller)."""
        self.events.put(self._on_controller_changed, controller_id)

    def on_partition_state(self, topic: str, p: int, st: zkdata.PartitionState) -> None:
        """This broker's view saw a partition state change: it may finish a reassignment."""
        a = self.assignments.get(topic)
        if self.active and a is not None and (p in a.adding or p in a.removing):
            self._put(self.ops.maybe_finish_reassignment, topic, p, st)

    def _put(self, fn: Callable[..., Any], *args: Any) -> None:
        self.events.put(self._in_term, self._term, fn, *args)

    def _in_term(self, term: int, fn: Callable[..., Any], *args: Any) -> Any:
        if term != self._term or not self.active:
            return None
        return fn(*args)

    # -- election ---------------------------------------------------------------------------------

    async def _on_controller_changed(self, controller_id: int) -> None:
        if controller_id == -1 and not self.closing:
            await self.try_elect()
        elif controller_id not in (-1, self.node_id) and self.active:
            self.resign()

    async def try_elect(self) -> bool:
        """Stand for controller: True if this broker won (and is now active)."""
        if self.active:
            return True
        me = self.node_id
        try:
            await self.store.create(zkdata.CONTROLLER, zkdata.dumps(
                {"version": 2, "brokerid": me, "timestamp": str(int(time.time() * 1000))}), ephemeral=True)
        except NodeExists:
            return False
        except StoreError as e:
            log.warning("Could not stand for controller: %s", e)
            return False
        try:
            node = await self.store.get(zkdata.CONTROLLER_EPOCH)
            epoch = int(node[0]) + 1 if node and node[0] else 1
            if node is None:
                await self.store.create(zkdata.CONTROLLER_EPOCH, str(epoch).encode())
                self.epoch_version = 0
            else:
                self.epoch_version = await self.store.set(zkdata.CONTROLLER_EPOCH, str(epoch).encode(), node[1])
        except StoreError as e:
            log.warning("Won /controller but could not bump /controller_epoch (%s); resigning", e)
            await self._delete_quietly(zkdata.CONTROLLER)
            return False
        self.epoch = epoch
        log.info("Broker %d is the controller (epoch %d)", me, epoch)
        await self.activate()
        return True

    async def activate(self) -> None:
        self.active = True
        self.live = None
        self._initial_topics = None
        self._failover_pending = True
        self._unseen = set()
        self._term += 1
        term = self._term

        def queue(fn: Callable[..., Any]) -> Callable[..., None]:
            return lambda *args: self.events.put(self._in_term, term, fn, *args)

        def on_broker_ids(ids: list[str]) -> None:
            # The handler reads the newest list, not the one of its event: registrations that
            # arrive while the controller is busy (a cluster starting) make one change, not many.
            self._broker_ids = ids
            self.events.put(self._in_term, term, self._on_brokers)

        try:
            self._watches = [
                await self.store.watch_children(zkdata.BROKER_IDS, on_broker_ids),
                await self.store.watch_children(zkdata.TOPICS, queue(self._on_topics)),
                await self.store.watch_children(zkdata.DELETE_TOPICS, queue(self._on_delete_topics)),
                await self.store.watch_children(zkdata.CONTROLLED_SHUTDOWN, queue(self._on_controlled_shutdown)),
                await self.store.watch_children(zkdata.LOG_DIR_EVENTS, queue(self._on_log_dir_events)),
            ]
        except StoreError as e:
            log.warning("Could not watch the cluster as controller (%s); resigning", e)
            self.resign()
            await self._delete_quietly(zkdata.CONTROLLER)
            return
        if self.ctx.config("auto.leader.rebalance.enable"):
            self._schedule_rebalance()

    def resign(self) -> None:
        """Stop acting as controller at once (no I/O): watches, probes and timers go, and the
        events already queued for this term are dropped when their turn comes."""
        self._term += 1
        self._written.clear()
        if not self.active:
            return
        self.active = False
        for w in self._watches:
            w.cancel()
        for w in self._topic_watches.values():
            if w is not None:
                w.cancel()
        self._watches, self._topic_watches = [], {}
        self.assignments.clear()
        self._deleted_ids.clear()
        for task in self._probes.values():
            task.cancel()
        self._probes.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unseen_timer is not None:
            self._unseen_timer.cancel()
            self._unseen_timer = None
        log.info("Broker %d is no longer the controller", self.node_id)

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self.store.delete(path)
        except StoreError:
            pass

    # -- the core: read states, decide, write with compare-and-set -----------------------------

    async def update_states(self, keys: Iterable[TP], decide: Decide,
                            fresh: set[TP] | frozenset[TP] = frozenset()) -> dict[TP, zkdata.PartitionState]:
        """Apply `decide` to the current state of each partition; retry the ones whose state
        changed under us. Returns the states written. `fresh`: partitions that have just
        appeared, taken to have no state yet without reading it (one that has is found by
        its create failing, and read then)."""
        pending = [k for k in keys if k[0] in self.assignments and k[1] in self.assignments[k[0]].partitions]
        written: dict[TP, zkdata.PartitionState] = {}
        before: dict[TP, zkdata.PartitionState] = {}  # the state each write replaced
        t_start = time.monotonic()
        spent = {"read": 0.0, "decide": 0.0, "write": 0.0}
        reads = conflicts = rounds = 0
        for attempt in range(10):
            if not pending or not self.active:
                break
            rounds += 1
            t_round = time.monotonic()
            paths = [zkdata.partition_state_path(t, p) for t, p in pending]
            currents: list[zkdata.PartitionState | None]
            if attempt == 0:
                # This broker's view follows every state by watch: start from it (a stale one
                # fails the compare-and-set and is read afresh on the next round).
                currents = [self._latest(t, p) for t, p in pending]
                missing = [i for i, c in enumerate(currents) if c is None and pending[i] not in fresh]
                if missing:
                    reads += len(missing)
                    for i, node in zip(missing, await self.store.get_many([paths[i] for i in missing])):
                        currents[i] = zkdata.PartitionState.decode(node[0], node[1]) if node and node[0] else None
            else:
                reads += len(paths)
                currents = [zkdata.PartitionState.decode(n[0], n[1]) if n and n[0] else None
                            for n in await self.store.get_many(paths)]
            spent["read"] += time.monotonic() - t_round
            if not self.active:
                break
            creates: list[tuple[TP, str, zkdata.PartitionState]] = []
            sets: list[tuple[TP, str, zkdata.PartitionState, int]] = []
            slice_start = slice_start_total = time.monotonic()
            for key, path, current in zip(pending, paths, currents):
                if key[0] not in self.assignments or key[1] not in self.assignments[key[0]].partitions:
                    continue
                if time.monotonic() - slice_start > 0.02:  # 10,000 decisions: let clients in between
                    await asyncio.sleep(0)
                    slice_start = time.monotonic()
                new = decide(key[0], key[1], self.assignments[key[0]].partitions[key[1]], current)
                if new is None:
                    continue
                new.controller_epoch = self.epoch
                if current is None:
                    creates.append((key, path, new))
                else:
                    sets.append((key, path, new, current.version))
                    before[key] = current
            retry: list[TP] = []
            t_write = time.monotonic()
            spent["decide"] += t_write - slice_start_total
            guard = (zkdata.CONTROLLER_EPOCH, self.epoch_version)
            if creates:
                errs = await self.store.create_many([(p, s.encode()) for _, p, s in creates], guard=guard)
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
                results = await self.store.set_many([(p, s.encode(), v) for _, p, s, v in sets], guard=guard)
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
            spent["write"] += time.monotonic() - t_write
            conflicts += len(retry)
            pending = retry
        self._written.update(written)
        for key, st in written.items():
            old = before.get(key)
            if old is not None and st.leader >= 0 and st.leader != old.leader:
                self.leader_elections += 1
                if st.leader not in old.isr:
                    self.unclean_leader_elections += 1
        took = time.monotonic() - t_start
        if took > 1.0:
            log.info("Slow partition state update: %.1f s for %d writes in %d rounds (%d states read, %d write "
                     "conflicts; reading %.1f s, deciding %.1f s, writing %.1f s)", took, len(written), rounds, reads,
                     conflicts, spent["read"], spent["decide"], spent["write"])
        return written

    def _latest(self, topic: str, p: int) -> PS | None:
        """A private copy of the newest state known of a partition: the view's, or the one this
        controller wrote if the view has not caught up with it yet (the higher version)."""
        seen = self.ctx.view.state(topic, p)
        mine = self._written.get((topic, p))
        if mine is not None:
            if seen is None or seen.version < mine.version:
                return _copy(mine)
            del self._written[(topic, p)]  # the view has it (or newer): no need to remember
        return _copy(seen)

    def _forget_written(self, topic: str) -> None:
        for key in [k for k in self._written if k[0] == topic]:
            del self._written[key]

    def _fenced(self) -> None:
        log.warning("Another broker became controller (/controller_epoch moved past %d); resigning", self.epoch)
        self.resign()

    def all_partitions(self) -> list[TP]:
        return [(t, p) for t, a in sorted(self.assignments.items()) for p in sorted(a.partitions)]

    def unclean_allowed(self, topic: str) -> bool:
        return str(self.ctx.topic_config(topic, "unclean.leader.election.enable")).lower() == "true"

    async def elect_offline(self, keys: Iterable[TP], why: str, fresh: set[TP] | frozenset[TP] = frozenset(), *,
                            mark_offline: bool = False) -> dict[TP, zkdata.PartitionState]:
        """Elect a leader for each partition whose leader is not alive (or stopping). One with no
        live replica in its ISR stays as it is, as in Kafka's failed election; with
        `mark_offline` (its leader's broker has just failed) its leader becomes -1 with a new
        epoch, ISR kept, as Kafka's OfflineReplica transition writes it."""
        live = self.live or set()
        offline: dict[TP, str] = {}  # (a decision may be made again for a retried write: one line each)
        waiting: dict[TP, str] = {}
        unclean: dict[TP, str] = {}

        offline_replicas = self.offline_replicas

        def decide(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
            if st is None:  # a new partition: its live replicas are its ISR
                isr = [r for r in replicas if r in live]
                return zkdata.PartitionState(isr[0] if isr else -1, 0, isr or list(replicas))
            here = live
            if offline_replicas:  # (a failed log dir somewhere: its replicas are not candidates)
                here = live - {b for b, tps in offline_replicas.items() if (topic, p) in tps}
            if st.leader in here and st.leader not in self.shutting_down:
                return None
            result = offline_election(replicas, st.isr, here, self.unclean_allowed(topic))
            if result.leader is None:
                if st.leader == -1:
                    return None
                if not mark_offline:
                    # (Its last leader resumes when it registers; until then Metadata answers
                    # LEADER_NOT_AVAILABLE, its leader not being alive.)
                    waiting[(topic, p)] = f"{topic}-{p} (ISR {','.join(map(str, st.isr))})"
                    return None
                offline[(topic, p)] = f"{topic}-{p} (ISR {','.join(map(str, st.isr))})"
                return zkdata.PartitionState(-1, st.leader_epoch + 1, st.isr)
            if result.unclean:
                unclean[(topic, p)] = f"{topic}-{p} (broker {result.leader}, ISR was {','.join(map(str, st.isr))})"
            return zkdata.PartitionState(result.leader, st.leader_epoch + 1, result.isr)

        t0 = time.monotonic()
        written = await self.update_states(keys, decide, fresh)
        if offline:
            log.warning("%d partitions are offline: no live replica in their ISR (unclean.leader.election.enable is "
                        "false): %s%s", len(offline), ", ".join(list(offline.values())[:10]),
                        " ..." if len(offline) > 10 else "")
        if waiting:
            log.info("%d partitions wait for a replica of their ISR to register: %s%s", len(waiting),
                     ", ".join(list(waiting.values())[:10]), " ..." if len(waiting) > 10 else "")
        if unclean:
            log.warning("Unclean leader election for %d partitions; records acknowledged by the old ISR may be lost: "
                        "%s%s", len(unclean), ", ".join(list(unclean.values())[:10]),
                        " ..." if len(unclean) > 10 else "")
        if written:
            led = sum(1 for s in written.values() if s.leader >= 0)
            log.info("Elected leaders for %d partitions (%d offline) after %s in %.0f ms", led, len(written) - led,
                     why, (time.monotonic() - t0) * 1000)
        return written

    # -- events -----------------------------------------------------------------------------------

    def _refresh_live(self) -> tuple[set[int], set[int]] | None:
        """Take the newest registrations: (dead, born) since the last time, None the first time."""
        new = {int(i) for i in self._broker_ids if i.isdigit()}
        old, self.live = self.live, new
        self.shutting_down &= new
        self._update_probes(new)
        return None if old is None else (old - new, new - old)

    async def _on_brokers(self) -> None:
        change = self._refresh_live()
        if change is None or self._failover_pending:
            return  # the failover's election, once the topics are loaded, covers these brokers
        dead, born = change
        self._unseen -= born
        for b in dead | born:
            self.offline_replicas.pop(b, None)
        if dead:
            log.info("Brokers %s are gone", ",".join(map(str, sorted(dead))))
            await self._on_brokers_dead(dead)
        if born:
            log.info("Brokers %s joined", ",".join(map(str, sorted(born))))
            keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                    if any(b in reps for b in born)]
            await self.elect_offline(keys, f"broker {','.join(map(str, sorted(born)))} joined")

    async def _on_brokers_dead(self, dead: set[int]) -> None:
        keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                if any(b in reps for b in dead)]
        await self.elect_offline(keys, f"broker {','.join(map(str, sorted(dead)))} failed", mark_offline=True)
        await self._remove_from_isrs(keys, dead)

    async def _failover(self) -> None:
        """The first decisions of a term, once the assignments of the topics there were are
        loaded: one election over every partition with the brokers registered by then (those
        that registered meanwhile included), from this broker's view once it holds every
        state (no second read of them all)."""
        self._failover_pending = False
        if not await self.ctx.view.wait_loaded(VIEW_LOAD_WAIT_S):
            log.warning("This broker's view of the cluster is not loaded after %.0f s; the failover reads the "
                        "partition states it lacks from the store", VIEW_LOAD_WAIT_S)
        if not self.active:
            return
        self._refresh_live()  # the newest registrations: the election below covers them
        live = self.live or set()
        await self.elect_offline(self.all_partitions(), "controller failover")
        gone = {r for a in self.assignments.values() for reps in a.partitions.values() for r in reps} - live
        # Brokers that died before this controller took over leave the ISRs now. Those this
        # broker has never seen registered (the whole cluster is starting) get the time a
        # follower has to fetch before its leader drops it: they are expected any moment, and
        # dropping them only to add them back would rewrite every partition state twice.
        dead = {b for b in gone if self.ctx.view.was_seen(b)}
        self._unseen = gone - dead
        if dead:
            await self._on_brokers_dead(dead)
        if self._unseen:
            lag_ms = int(self.ctx.config("replica.lag.time.max.ms") or 30000)
            log.info("Brokers %s hold replicas but have not registered yet; they leave the ISRs in %d ms unless "
                     "they do", ",".join(map(str, sorted(self._unseen))), lag_ms)
            self._unseen_timer = asyncio.get_running_loop().call_later(lag_ms / 1000, self._put, self._unseen_expired)
        for name, a in list(self.assignments.items()):
            for p in list(a.adding) + list(a.removing):
                st = self.ctx.view.state(name, p)
                if st is not None:
                    await self.ops.maybe_finish_reassignment(name, p, st)

    async def _unseen_expired(self) -> None:
        self._unseen_timer = None
        gone, self._unseen = self._unseen - (self.live or set()), set()
        if gone:
            log.info("Brokers %s never registered; handling them as failed", ",".join(map(str, sorted(gone))))
            await self._on_brokers_dead(gone)

    async def _remove_from_isrs(self, keys: list[TP], dead: set[int]) -> None:
        """Dead replicas leave the ISRs (the leader would keep an idle one: its log end offset
        still matches)."""

        def shrink(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
            if st is None or st.leader < 0 or not (set(st.isr) & dead):
                return None
            isr = [r for r in st.isr if r not in dead]
            if not isr:
                return None
            return zkdata.PartitionState(st.leader, st.leader_epoch, isr)

        written = await self.update_states(keys, shrink)
        if written:
            log.info("Removed dead brokers %s from the ISR of %d partitions", ",".join(map(str, sorted(dead))),
                     len(written))

    async def _on_topics(self, names: list[str]) -> None:
        current = set(names)
        first = self._initial_topics is None
        if first:
            self._initial_topics = set(current)
        for gone in set(self._topic_watches) - current:
            w = self._topic_watches.pop(gone)
            if w is not None:
                w.cancel()
            self.assignments.pop(gone, None)
            self._forget_written(gone)
        term = self._term
        new = sorted(current - set(self._topic_watches))
        for name in new:
            self._topic_watches[name] = None  # claimed: a later event does not watch it twice

        def on_assignment(name: str) -> Callable[[bytes | None, int | None], None]:
            return lambda data, version: self.events.put(self._in_term, term, self._on_assignment, name, data)

        async def watch(name: str) -> None:
            try:
                w = await self.store.watch_data(zkdata.topic_path(name), on_assignment(name))
            except StoreError as e:
                self._topic_watches.pop(name, None)
                log.warning("Could not watch topic %s: %s", name, e)
                return
            if term != self._term or name not in self._topic_watches:
                w.cancel()
            else:
                self._topic_watches[name] = w

        await asyncio.gather(*(watch(n) for n in new))
        if first:
            # Each watch's first delivery is queued by now: the failover comes after them all.
            self.events.put(self._in_term, term, self._failover)

    async def _on_assignment(self, name: str, data: bytes | None) -> None:
        if not data:
            return
        try:
            assignment = zkdata.TopicAssignment.decode(data)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("Ignoring the unreadable assignment of %s: %s", name, e)
            return
        if assignment.topic_id in self._deleted_ids:
            return  # queued before this controller deleted it
        before = self.assignments.get(name)
        if before is not None and before.topic_id != assignment.topic_id:
            self._forget_written(name)  # deleted and created again: versions start over
        self.assignments[name] = assignment
        if self._failover_pending or before == assignment:
            return  # (the failover decides for the topics there were; an unchanged one needs nothing)
        if self.live is not None:
            keys = [(name, p) for p in assignment.partitions]
            fresh: set[TP] = set()
            # A topic that existed when this controller took over has states: none is new.
            if self._initial_topics is not None and name not in self._initial_topics:
                known = before.partitions if before is not None and before.topic_id == assignment.topic_id else {}
                view = self.ctx.view
                fresh = {(name, p) for p in assignment.partitions if p not in known and view.state(name, p) is None}
            await self.elect_offline(keys, f"topic {name} changed", fresh)
            gone = {r for reps in assignment.partitions.values() for r in reps} - self.live
            if gone:
                await self._remove_from_isrs(keys, gone)
            for p in list(assignment.adding) + list(assignment.removing):
                st = self.ctx.view.state(name, p)
                if st is not None:
                    await self.ops.maybe_finish_reassignment(name, p, st)

    async def _on_delete_topics(self, names: list[str]) -> None:
        for name in names:
            try:
                # The config before the assignment: once the assignment is gone the name may be
                # created again at once, with a config of its own that must not be deleted.
                if await self.store.get(zkdata.topic_config_path(name)) is not None:
                    await self.store.delete(zkdata.topic_config_path(name))
                node = await self.store.get(zkdata.topic_path(name))
                if node is not None:
                    try:
                        self._deleted_ids.add(zkdata.TopicAssignment.decode(node[0]).topic_id)
                    except (ValueError, KeyError, TypeError):
                        pass  # (unreadable: nothing of it was ever taken in)
                    await self.store.delete(zkdata.topic_path(name), recursive=True)
                # Gone for this controller's decisions now, not when the watch says so: an
                # election queued meanwhile (a failover) would write its partition states and
                # so bring the topic's node back.
                self.assignments.pop(name, None)
                self._forget_written(name)
                await self.store.delete(zkdata.delete_topic_path(name))
                log.info("Deleted topic %s", name)
            except NoNode:
                pass
            except StoreError as e:
                log.warning("Could not delete topic %s yet: %s", name, e)

    async def _on_log_dir_events(self, names: list[str]) -> None:
        """A broker's log dir failed (Kafka's LogDirEventNotification): its replicas of the
        partitions it names are offline until it registers again (a restart), so leadership
        moves to another in-sync replica and it leaves the ISRs; then the event is deleted."""
        for name in sorted(names):
            path = f"{zkdata.LOG_DIR_EVENTS}/{name}"
            try:
                node = await self.store.get(path)
            except StoreError as e:
                log.warning("Could not read %s: %s", path, e)
                continue
            if node is None:
                continue
            try:
                doc = zkdata.loads(node[0])
                broker = int(doc["broker"])
                keys = {(str(t), int(p)) for t, p in doc.get("offline_partitions", [])}
            except (ValueError, KeyError, TypeError) as e:
                log.warning("Ignoring %s: %s", path, e)
                await self._delete_quietly(path)
                continue
            self.offline_replicas.setdefault(broker, set()).update(keys)
            await self._move_off_offline(broker, sorted(keys))
            await self._delete_quietly(path)

    async def _move_off_offline(self, broker: int, keys: list[TP]) -> None:
        live = (self.live or set()) - {broker}

        def move(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
            if st is None:
                return None
            isr = [r for r in st.isr if r != broker]
            if st.leader == broker:
                result = offline_election(replicas, isr, live, self.unclean_allowed(topic))
                if result.leader is None:  # no other in-sync replica: offline, as Kafka's OfflinePartition
                    return zkdata.PartitionState(-1, st.leader_epoch + 1, st.isr)
                return zkdata.PartitionState(result.leader, st.leader_epoch + 1, result.isr)
            if broker in st.isr and st.leader >= 0 and isr:
                return zkdata.PartitionState(st.leader, st.leader_epoch, isr)
            return None

        written = await self.update_states(keys, move)
        log.warning("Broker %d reports %d partitions offline (a failed log dir): moved off it in %d partition states",
                    broker, len(keys), len(written))

    async def _on_controlled_shutdown(self, ids: list[str]) -> None:
        asked = {int(i) for i in ids if i.isdigit()}
        fresh = asked - self.shutting_down
        self.shutting_down = asked
        if not fresh:
            return
        live = self.live or set()
        going = set(asked)
        keys = [(t, p) for t, a in self.assignments.items() for p, reps in a.partitions.items()
                if any(b in reps for b in fresh)]

        def move(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
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

        written = await self.update_states(keys, move)
        log.info("Controlled shutdown of broker %s: moved %d leaderships", ",".join(map(str, sorted(fresh))),
                 sum(1 for (t, p), s in written.items() if s.leader not in going))

    # -- fast failure detection ----------------------------------------------------------------

    def _update_probes(self, live: set[int]) -> None:
        for b in set(self._probes) - live:
            self._probes.pop(b).cancel()
        for b in live - set(self._probes) - {self.node_id}:
            self._probes[b] = asyncio.get_running_loop().create_task(self._probe(b, self._term), name=f"probe-{b}")

    async def _probe(self, broker_id: int, term: int) -> None:
        listener = self.ctx.inter_broker_listener
        if await probe_until_refused(lambda: self.ctx.view.endpoint(broker_id, listener),
                                     lambda: self.active and self._term == term):
            self.events.put(self._in_term, term, self._broker_refused, broker_id)

    async def _broker_refused(self, broker_id: int) -> None:
        if broker_id not in (self.live or set()):
            return
        log.info("Broker %d refuses connections: its process is gone; not waiting for its ZooKeeper session "
                 "to expire", broker_id)
        self._probes.pop(broker_id, None)
        try:
            await remove_dead_broker(self.store, broker_id, also_controller=False)
        except StoreError as e:
            log.warning("Could not remove the registration of broker %d: %s", broker_id, e)

    # -- preferred leaders ------------------------------------------------------------------------

    def _schedule_rebalance(self) -> None:
        interval = max(1, int(self.ctx.config("leader.imbalance.check.interval.seconds")))
        self._timer = asyncio.get_running_loop().call_later(interval, self._put, self._rebalance_tick)

    async def _rebalance_tick(self) -> None:
        self._timer = None
        try:
            await self.ops.auto_rebalance()
        finally:
            if self.active:
                self._schedule_rebalance()

    # -- the admin APIs, served in the controller's turn ------------------------------------------

    async def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        return await self.ops.elect_leaders(election_type, partitions)

    async def alter_reassignments(self, changes: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        return await self.ops.alter_reassignments(changes)

    def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        return self.ops.list_reassignments(partitions)
