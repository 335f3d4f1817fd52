"""ISR changes a leader proposes, written to the store without ever blocking (Kafka's
AlterPartitionManager, KIP-497, in ZooKeeper's terms).

How it works. A leader that wants a follower in or out of its ISR calls `propose(part, isr)`
from wherever it noticed (a follower's fetch, the periodic lag check). That only records the
proposal on the partition (`pending_isr`) and schedules a flush; at most one change per
partition is in flight, and proposals made meanwhile are dropped (the next fetch or check
proposes again from the state then). The flush writes every pending change in one pipelined
batch of compare-and-set writes on the partitions' state nodes:

- written: the partition's ISR becomes the proposal, its high watermark may move;
- version mismatch (the controller changed the state, or the leader was replaced): the
  state is read again and applied, which gives up the proposal;
- the store is unreachable: the proposal waits and is retried every `retry_s`, with one
  warning per partition per interval rather than one per fetch.

While a change is pending, the high watermark counts the larger of the two ISRs (the current
one plus the followers being added), as Kafka's "maximal ISR": it can only be slower, never
ahead of what the committed ISR has.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, MetadataStore, StoreError
from samsa.ratelimit import BurstLog, RateLimitedLog

if TYPE_CHECKING:
    from samsa.server.replica_manager import Partition

log = logging.getLogger("samsa.isr")


class IsrManager:
    def __init__(self, store: MetadataStore, node_id: int,
                 on_state_read: Callable[[str, int, zkdata.PartitionState], None],
                 on_written: Callable[[str, int, zkdata.PartitionState], None],
                 retry_s: float = 1.0) -> None:
        self.store = store
        self.node_id = node_id
        self.on_state_read = on_state_read  # a state read after a failed compare-and-set
        self.on_written = on_written  # the state this broker wrote
        self.retry_s = retry_s
        self._pending: dict[tuple[str, int], Partition] = {}
        self._task: asyncio.Task[None] | None = None
        self._warn = RateLimitedLog(log, interval_s=10.0)
        self._changes = BurstLog(log)  # a broker rejoining 10,000 ISRs: 20 lines a second, then a count
        self._closed = False
        self.expands = 0  # ISR changes written that added followers (Kafka's IsrExpandsPerSec)
        self.shrinks = 0  # and that removed some (IsrShrinksPerSec)
        # The ISR each pending proposal changes (by the time the write is acknowledged, the
        # partition may already show the new one, delivered by the store's watch).
        self._before: dict[tuple[str, int], list[int]] = {}

    def propose(self, part: Partition, isr: list[int]) -> None:
        if self._closed or part.pending_isr is not None or not part.is_leader or isr == part.isr:
            return
        part.pending_isr = list(isr)
        part.pending_isr_epoch = part.leader_epoch
        self._pending[(part.topic, part.index)] = part
        self._before[(part.topic, part.index)] = list(part.isr)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._flush(), name="isr-writer")

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def _flush(self) -> None:
        try:
            while self._pending and not self._closed:
                batch = list(self._pending.values())
                self._pending.clear()
                batch = [p for p in batch if self._still_wanted(p)]
                if batch:
                    retry = await self._write(batch)
                    for p in retry:
                        self._pending.setdefault((p.topic, p.index), p)
                    if retry:
                        await asyncio.sleep(self.retry_s)
        finally:
            self._task = None

    def _still_wanted(self, part: Partition) -> bool:
        if part.pending_isr is None:
            return False
        if not part.is_leader or part.leader_epoch != part.pending_isr_epoch:
            part.pending_isr = None  # the role changed: the proposal is moot
            return False
        return True

    async def _write(self, batch: list[Partition]) -> list[Partition]:
        """One pipelined batch of compare-and-set writes; returns the partitions to retry."""
        items, states = [], []
        for part in batch:
            assert part.pending_isr is not None
            st = zkdata.PartitionState(self.node_id, part.leader_epoch, list(part.pending_isr), part.controller_epoch)
            states.append(st)
            items.append((zkdata.partition_state_path(part.topic, part.index), st.encode(), part.state_version))
        try:
            results = await self.store.set_many(items)
        except StoreError as e:
            results = [e] * len(batch)
        retry: list[Partition] = []
        stale: list[Partition] = []
        for part, st, res in zip(batch, states, results):
            if isinstance(res, BadVersion):
                part.pending_isr = None
                self._before.pop((part.topic, part.index), None)
                stale.append(part)
            elif isinstance(res, StoreError):
                self._warn.warning(f"{part}", "Could not change the ISR of %s to %s (will retry): %s", part,
                                   ",".join(map(str, st.isr)), res)
                if self._still_wanted(part):
                    retry.append(part)
            else:
                st.version = int(res)
                old = self._before.pop((part.topic, part.index), part.isr)
                part.pending_isr = None
                if part.is_leader and part.leader_epoch == st.leader_epoch:
                    part.state_version = st.version
                    part.isr = list(st.isr)
                kind = "expanded" if len(st.isr) > len(old) else "shrank"
                if kind == "expanded":
                    self.expands += 1
                else:
                    self.shrinks += 1
                self._changes.note("ISR expansions" if kind == "expanded" else "ISR shrinks",
                                   "ISR of %s %s from %s to %s", part, kind, ",".join(map(str, old)),
                                   ",".join(map(str, st.isr)))
                self.on_written(part.topic, part.index, st)
                part.maybe_increment_hw()
                part.wake()
        if stale:
            try:
                nodes = await self.store.get_many([zkdata.partition_state_path(p.topic, p.index) for p in stale])
            except StoreError as e:
                self._warn.warning("reread", "Could not re-read partition states after a conflicting ISR change: %s", e)
                return retry
            for part, node in zip(stale, nodes):
                if node is not None and node[0]:
                    self.on_state_read(part.topic, part.index, zkdata.PartitionState.decode(node[0], node[1]))
        return retry

    def flush_log(self) -> None:
        """Log the count of ISR changes left out of the log (called every second)."""
        self._changes.flush()

    def close(self) -> None:
        self._closed = True
        self._before.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._pending.clear()
