"""A controller's first decisions (failover), on the real embedded store with a real event
queue; the broker's view is a stand-in the test controls.

What a cluster restart of 10,000 partitions taught: the first broker up becomes controller
while the others are still loading their logs. Marking every partition whose replicas had not
registered yet offline (a new epoch each), removing those brokers from every ISR, and then
electing them all again when they registered a second later rewrote each partition state two
or three times and kept the partitions leaderless for 20-40 s. As in Kafka, a failed election
now writes nothing (the last leader resumes when it registers), registrations that arrive while
the controller is busy make one change, and brokers this one has never seen registered get
replica.lag.time.max.ms before they are handled as failed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from samsa.controller.context import ControllerContext
from samsa.controller.controller import Controller
from samsa.metadata import zkdata
from samsa.metadata.embedded import EmbeddedStore

PS = zkdata.PartitionState
GRACE_MS = 300


class View:
    """The broker's view as the controller sees it: states from the store, what it has seen
    registered, and whether its start-up load is done (the test may hold it back)."""

    def __init__(self, store: EmbeddedStore, seen: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.store = store
        self.states: dict[tuple[str, int], PS] = {}
        self.seen = set(seen)
        self.loaded = asyncio.Event()
        self.loaded.set()

    async def refresh(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            node = await self.store.get(zkdata.partition_state_path(topic, p))
            if node is not None:
                self.states[(topic, p)] = PS.decode(node[0], node[1])

    def state(self, topic: str, partition: int) -> PS | None:
        return self.states.get((topic, partition))

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        return None

    async def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        return bool(predicate())

    async def wait_loaded(self, timeout_s: float) -> bool:
        await self.loaded.wait()
        return True

    def was_seen(self, node_id: int) -> bool:
        return node_id in self.seen


# p0: led by 1, ISR 1,2; p1: led by 2 alone; p2: led by 1, ISR 1,0.
START = {0: ([1, 2], PS(1, 3, [1, 2])), 1: ([2, 1], PS(2, 5, [2])), 2: ([1, 0], PS(1, 7, [1, 0]))}


async def _cluster(tmp_path: Path, registered: list[int], seen: set[int] = frozenset()  # type: ignore[assignment]
                   ) -> tuple[Controller, EmbeddedStore, View]:
    store = await EmbeddedStore.open(tmp_path / "meta")
    topic_id = uuid.uuid4()
    await store.create(zkdata.topic_path("t"), zkdata.TopicAssignment(
        topic_id, {p: reps for p, (reps, _) in START.items()}).encode())
    for p, (_, st) in START.items():
        await store.create(zkdata.partition_state_path("t", p), st.encode())
    for b in registered:
        await store.create(zkdata.broker_path(b), b"{}", ephemeral=True)
    view = View(store, seen)
    await view.refresh("t", len(START))
    config = {"replica.lag.time.max.ms": GRACE_MS}
    ctx = ControllerContext(node_id=0, store=store, view=view, config=config.get,
                            topic_config=lambda topic, key: "false", inter_broker_listener="PLAINTEXT")
    return Controller(ctx), store, view


async def _states(store: EmbeddedStore) -> dict[int, tuple[int, int, list[int], int]]:
    out = {}
    for p in START:
        node = await store.get(zkdata.partition_state_path("t", p))
        assert node is not None
        st = PS.decode(node[0], node[1])
        out[p] = (st.leader, st.leader_epoch, st.isr, st.version)
    return out


async def _until(what: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await what():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)  # a timer of the controller's is due: nothing to await across it


def test_failover_elects_what_it_can_and_writes_nothing_for_partitions_without_a_live_isr(tmp_path: Path) -> None:
    async def main() -> None:
        c, store, _ = await _cluster(tmp_path, registered=[0])
        c.start()
        assert await c.try_elect()
        await c.events.drained()
        assert await _states(store) == {
            0: (1, 3, [1, 2], 0),  # no live replica in its ISR: left as it is
            1: (2, 5, [2], 0),
            2: (0, 8, [0], 1),  # broker 0 is in its ISR: elected, broker 1 leaves that ISR
        }
        # Brokers 1 and 2 never register: after replica.lag.time.max.ms they are failed ones.
        await _until(lambda: _marked_offline(store))
        assert await _states(store) == {0: (-1, 4, [1, 2], 1), 1: (-1, 6, [2], 1), 2: (0, 8, [0], 1)}
        await c.stop()
        await store.close()

    asyncio.run(main())


async def _marked_offline(store: EmbeddedStore) -> bool:
    states = await _states(store)
    return states[0][0] == -1 and states[1][0] == -1


def test_a_broker_registering_within_the_grace_resumes_as_leader_with_no_write(tmp_path: Path) -> None:
    async def main() -> None:
        c, store, _ = await _cluster(tmp_path, registered=[0])
        c.start()
        assert await c.try_elect()
        await c.events.drained()
        await store.create(zkdata.broker_path(1), b"{}", ephemeral=True)
        await _until(lambda: _live_is(c, {0, 1}))
        await c.events.drained()
        assert (await _states(store))[0] == (1, 3, [1, 2], 0)  # its last leader is back: nothing to write
        # Broker 2 never comes: it leaves p0's ISR, and p1 (only 2 in its ISR) goes offline.
        await _until(lambda: _marked_offline_p1(store))
        assert await _states(store) == {0: (1, 3, [1], 1), 1: (-1, 6, [2], 1), 2: (0, 8, [0], 1)}
        await c.stop()
        await store.close()

    asyncio.run(main())


async def _live_is(c: Controller, live: set[int]) -> bool:
    return c.live == live


async def _marked_offline_p1(store: EmbeddedStore) -> bool:
    return (await _states(store))[1][0] == -1


def test_a_broker_seen_before_and_gone_at_failover_is_handled_as_failed_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        # Broker 2 was registered while this broker ran, and died with the old controller.
        c, store, _ = await _cluster(tmp_path, registered=[0, 1], seen={0, 1, 2})
        c.start()
        assert await c.try_elect()
        await c.events.drained()
        assert c._unseen_timer is None
        assert await _states(store) == {0: (1, 3, [1], 1), 1: (-1, 6, [2], 1), 2: (1, 7, [1, 0], 0)}
        await c.stop()
        await store.close()

    asyncio.run(main())


def test_registrations_during_the_failover_make_one_decision_with_the_newest_brokers(tmp_path: Path) -> None:
    async def main() -> None:
        c, store, view = await _cluster(tmp_path, registered=[0])
        view.loaded.clear()  # the broker is still loading its view when it becomes controller
        c.start()
        assert await c.try_elect()
        for b in (1, 2):  # ... and the others register meanwhile
            await store.create(zkdata.broker_path(b), b"{}", ephemeral=True)
        await asyncio.sleep(0)
        view.loaded.set()
        await c.events.drained()
        assert c.live == {0, 1, 2}
        # Every last leader is alive: not one state was written.
        assert await _states(store) == {p: (st.leader, st.leader_epoch, st.isr, 0) for p, (_, st) in START.items()}
        assert c._unseen_timer is None
        await c.stop()
        await store.close()

    asyncio.run(main())
