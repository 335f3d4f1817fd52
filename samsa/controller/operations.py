"""The controller's operations on request: ElectLeaders (preferred and unclean), the automatic
preferred-leader rebalance, and partition reassignment (KIP-455).

Each runs in the controller's turn on its event queue (`events.call`), so it never races a
broker failure being handled. Waiting for this broker's view to show what was written (so
that the answer agrees with the next Metadata) happens outside the queue.
"""

from __future__ import annotations

import logging

from samsa.controller.context import ControllerCore
from samsa.controller.decisions import (
    AssignmentError,
    elect_for_reassignment,
    elect_leader,
    preferred_leader,
    reassignment_complete,
    reassignment_plan,
)
from samsa.metadata import zkdata
from samsa.metadata.store import StoreError
from samsa.protocol.errors import ErrorCode

log = logging.getLogger("samsa.controller")
PS = zkdata.PartitionState

TP = tuple[str, int]
Outcome = dict[TP, tuple[int, str | None]]
NOT_HOSTED = "This server does not host this topic-partition."


class Operations:
    def __init__(self, controller: ControllerCore) -> None:
        self.c = controller

    # -- preferred leaders ------------------------------------------------------------------------

    async def auto_rebalance(self) -> int:
        """Kafka's auto.leader.rebalance: for each broker whose share of partitions it prefers
        but does not lead exceeds leader.imbalance.per.broker.percentage, elect it back."""
        c = self.c
        pct = int(c.ctx.config("leader.imbalance.per.broker.percentage"))
        view = c.ctx.view
        preferred: dict[int, list[TP]] = {}
        for t, a in c.assignments.items():
            for p, reps in a.partitions.items():
                if reps:
                    preferred.setdefault(reps[0], []).append((t, p))
        todo: list[TP] = []
        for b, keys in preferred.items():
            if b not in (c.live or set()) or b in c.shutting_down:
                continue
            not_led = [k for k in keys if (st := view.state(*k)) is not None and st.leader != b]
            if keys and len(not_led) * 100 / len(keys) > pct:
                todo += not_led
        if not todo:
            return 0
        return sum(1 for code, _ in (await self._elect_preferred(todo)).values() if code == ErrorCode.NONE)

    async def _elect_preferred(self, keys: list[TP]) -> Outcome:
        c = self.c
        live = c.live or set()
        outcome: Outcome = {}

        def decide(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
            if st is None:
                outcome[(topic, p)] = (ErrorCode.LEADER_NOT_AVAILABLE, "partition has no state yet")
                return None
            if replicas and st.leader == replicas[0]:
                outcome[(topic, p)] = (ErrorCode.ELECTION_NOT_NEEDED, None)
                return None
            leader = preferred_leader(replicas, st.isr, live - c.shutting_down)
            if leader is None:
                outcome[(topic, p)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                                       f"preferred replica {replicas[0] if replicas else -1} is not alive and "
                                       "in the ISR")
                return None
            outcome[(topic, p)] = (ErrorCode.NONE, None)
            return zkdata.PartitionState(leader, st.leader_epoch + 1, st.isr)

        await c.update_states(keys, decide)
        moved = [k for k, (code, _) in outcome.items() if code == ErrorCode.NONE]
        if moved:
            log.info("Preferred leader election moved %d partitions", len(moved))
        return outcome

    async def _elect_unclean(self, keys: list[TP]) -> Outcome:
        c = self.c
        live = c.live or set()
        outcome: Outcome = {}

        def decide(topic: str, p: int, replicas: list[int], st: PS | None) -> PS | None:
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

        await c.update_states(keys, decide)
        return outcome

    # -- the admin APIs ---------------------------------------------------------------------------

    def _known(self, partitions: list[TP] | None) -> tuple[list[TP], Outcome]:
        c = self.c
        if partitions is None:
            return c.all_partitions(), {}
        ok: list[TP] = []
        bad: Outcome = {}
        for t, p in partitions:
            if t in c.assignments and p in c.assignments[t].partitions:
                ok.append((t, p))
            else:
                bad[(t, p)] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), NOT_HOSTED)
        return ok, bad

    async def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> Outcome:
        result: Outcome = await self.c.events.call(self._elect_leaders, election_type, partitions)
        await self._await_leaders([k for k, v in result.items() if v[0] == ErrorCode.NONE])
        return result

    async def _elect_leaders(self, election_type: int, partitions: list[TP] | None) -> Outcome:
        if not self.c.active:
            raise StoreError("this broker is no longer the controller")
        keys, result = self._known(partitions)
        outcome = await (self._elect_preferred(keys) if election_type == 0 else self._elect_unclean(keys))
        for k, (code, msg) in outcome.items():
            result[k] = (int(code), msg)
        if partitions is None:  # "all partitions": report only those that were elected
            result = {k: v for k, v in result.items() if v[0] == ErrorCode.NONE}
        return result

    async def _await_leaders(self, keys: list[TP], timeout_s: float = 5.0) -> None:
        """Let this broker's own view catch up with what was written (answers then agree)."""
        view = self.c.ctx.view
        if keys:
            await view.wait_until(lambda: all(view.state(*k) is not None for k in keys), timeout_s)

    async def alter_reassignments(self, changes: dict[TP, list[int] | None]) -> Outcome:
        result: Outcome = await self.c.events.call(self._alter_reassignments, changes)
        return result

    async def _alter_reassignments(self, changes: dict[TP, list[int] | None]) -> Outcome:
        c = self.c
        if not c.active:
            raise StoreError("this broker is no longer the controller")
        result: Outcome = {}
        live = c.live or set()
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for (t, p), target in changes.items():
            a = c.assignments.get(t)
            if a is None or p not in a.partitions:
                result[(t, p)] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), NOT_HOSTED)
                continue
            if target is None:
                if p not in a.adding and p not in a.removing:
                    result[(t, p)] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
                                      f"no reassignment of {t}-{p} in progress")
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
            a = c.assignments[t]
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
                await c.store.set(zkdata.topic_path(t), new.encode())
            except StoreError as e:
                for p in parts:
                    result[(t, p)] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), f"could not write the assignment: {e}")
                continue
            c.assignments[t] = new
            for p in parts:
                result[(t, p)] = (int(ErrorCode.NONE), None)
                log.info("Reassignment of %s-%d: replicas %s, adding %s, removing %s", t, p, new.partitions[p],
                         new.adding.get(p, []), new.removing.get(p, []))
                st = c.ctx.view.state(t, p)
                if st is not None:
                    await self.maybe_finish_reassignment(t, p, st)
                    if parts[p] is None and st.leader not in new.partitions[p]:
                        await c.elect_offline([(t, p)], f"reassignment of {t}-{p} cancelled")
        return result

    def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        out: dict[TP, tuple[list[int], list[int], list[int]]] = {}
        for t, a in self.c.assignments.items():
            for p in sorted(set(a.adding) | set(a.removing)):
                if partitions is None or (t, p) in partitions:
                    out[(t, p)] = (a.partitions[p], a.adding.get(p, []), a.removing.get(p, []))
        return out

    async def maybe_finish_reassignment(self, topic: str, p: int, st: zkdata.PartitionState) -> None:
        c = self.c
        a = c.assignments.get(topic)
        if a is None or (p not in a.adding and p not in a.removing):
            return
        removing = a.removing.get(p, [])
        target = [r for r in a.partitions[p] if r not in removing]
        if not reassignment_complete(target, st.isr):
            return
        live = c.live or set()

        def finish(t: str, q: int, replicas: list[int], cur: PS | None) -> PS | None:
            if cur is None or not reassignment_complete(target, cur.isr):
                return None
            isr = [r for r in cur.isr if r in target]
            if cur.leader in target and cur.leader in live:
                return zkdata.PartitionState(cur.leader, cur.leader_epoch, isr) if isr != cur.isr else None
            leader = elect_for_reassignment(target, cur.isr, live)
            if leader is None:
                return None
            return zkdata.PartitionState(leader, cur.leader_epoch + 1, isr)

        await c.update_states([(topic, p)], finish)
        new = zkdata.TopicAssignment(a.topic_id, dict(a.partitions), dict(a.adding), dict(a.removing))
        new.partitions[p] = target
        new.adding.pop(p, None)
        new.removing.pop(p, None)
        try:
            await c.store.set(zkdata.topic_path(topic), new.encode())
        except StoreError as e:
            log.warning("Could not complete the reassignment of %s-%d: %s", topic, p, e)
            return
        c.assignments[topic] = new
        log.info("Reassignment of %s-%d completed: replicas %s", topic, p, target)
