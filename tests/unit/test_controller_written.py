"""The controller decides from the newest state it knows: its broker's view, or what it wrote
itself when the view has not caught up yet (the view follows the store by watches and can be
thousands of events behind after a big election). On the real embedded store; the view is a
stand-in whose lag the test controls.

The case found at 10,000 partitions: the controller marks every partition offline (the
brokers of their ISRs failed); those brokers register again seconds later, before the view
shows those offline writes. Deciding from the view's
older state (leader 1, which is now alive) elected nobody, and 8,354 partitions stayed
without a leader.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from samsa.controller.context import ControllerContext
from samsa.controller.controller import Controller
from samsa.metadata import zkdata
from samsa.metadata.embedded import EmbeddedStore

PS = zkdata.PartitionState


class LaggingView:
    """The broker's view as the controller sees it: whatever the test last put in it."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, int], PS] = {}

    def state(self, topic: str, partition: int) -> PS | None:
        return self.states.get((topic, partition))

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        return None

    async def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        return bool(predicate())

    async def wait_loaded(self, timeout_s: float) -> bool:
        return True

    def was_seen(self, node_id: int) -> bool:
        return False


async def _controller(tmp_path: Path, view: LaggingView) -> tuple[Controller, EmbeddedStore]:
    store = await EmbeddedStore.open(tmp_path / "meta")
    await store.create(zkdata.CONTROLLER_EPOCH, b"1")
    ctx = ControllerContext(node_id=0, store=store, view=view, config=lambda key: None,
                            topic_config=lambda topic, key: "false", inter_broker_listener="PLAINTEXT")
    c = Controller(ctx)
    c.active, c.epoch, c.epoch_version = True, 1, 0
    c.assignments = {"t": zkdata.TopicAssignment(uuid.uuid4(), {0: [1, 2], 1: [2, 1]})}
    return c, store


def test_a_broker_joining_is_elected_even_if_the_view_still_shows_the_state_before_offline(tmp_path: Path) -> None:
    async def main() -> None:
        view = LaggingView()
        c, store = await _controller(tmp_path, view)
        for p, st in ((0, PS(1, 3, [1, 2])), (1, PS(2, 5, [2, 1]))):
            await store.create(zkdata.partition_state_path("t", p), st.encode())
            view.states[("t", p)] = PS(st.leader, st.leader_epoch, st.isr, version=0)
        c.live = {0}  # brokers 1 and 2 have failed
        offline = await c.elect_offline(c.all_partitions(), "brokers 1,2 failed", mark_offline=True)
        assert {k: s.leader for k, s in offline.items()} == {("t", 0): -1, ("t", 1): -1}
        # The view still shows leaders 1 and 2 when broker 1 registers.
        c.live = {0, 1}
        elected = await c.elect_offline(c.all_partitions(), "broker 1 joined")
        assert {k: (s.leader, s.leader_epoch) for k, s in elected.items()} == {("t", 0): (1, 5), ("t", 1): (1, 7)}
        node = await store.get(zkdata.partition_state_path("t", 1))
        assert node is not None and PS.decode(node[0], node[1]).leader == 1
        await store.close()

    asyncio.run(main())


def test_the_views_newer_state_wins_over_what_the_controller_wrote(tmp_path: Path) -> None:
    """A leader's ISR change written after the controller's own write: the view has the higher
    version, and the controller decides from it (and forgets its own)."""
    async def main() -> None:
        view = LaggingView()
        c, store = await _controller(tmp_path, view)
        path = zkdata.partition_state_path("t", 0)
        await store.create(path, PS(1, 3, [1, 2]).encode())
        view.states[("t", 0)] = PS(1, 3, [1, 2], version=0)
        c.live = {0, 2}
        written = await c.elect_offline([("t", 0)], "broker 1 failed")
        assert written[("t", 0)].leader == 2 and written[("t", 0)].version == 1
        # Broker 2, now leader, shrinks its ISR to itself (version 2); the view shows it.
        version = await store.set(path, PS(2, 4, [2]).encode(), 1)
        view.states[("t", 0)] = PS(2, 4, [2], version=version)
        assert c._latest("t", 0) == PS(2, 4, [2])
        assert ("t", 0) not in c._written
        await store.close()

    asyncio.run(main())
