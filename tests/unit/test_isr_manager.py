"""ISR changes written in the background: a real Partition over a real Log, a real embedded
store. Nothing waits on the store in the follower-fetch path; one change in flight per
partition; a conflicting write gives the proposal up; an unreachable store is retried with
one warning per interval."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from samsa.metadata import zkdata
from samsa.metadata.embedded import EmbeddedStore
from samsa.protocol.records import build_batch, scan_batches
from samsa.server.isr_manager import IsrManager
from samsa.server.replica_manager import Partition
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

PATH = zkdata.partition_state_path("t", 0)


async def setup(tmp_path: Path, isr: list[int]) -> tuple[EmbeddedStore, Partition, IsrManager, list[zkdata.PartitionState]]:
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    state = zkdata.PartitionState(leader=0, leader_epoch=5, isr=isr)
    await store.create(PATH, state.encode())
    node = await store.get(PATH)
    assert node is not None
    part = Partition("t", 0, uuid.uuid4(), Log.open(tmp_path / "t-0", LogConfig(retention_ms=-1)), node_id=0)
    part.apply_state(zkdata.PartitionState.decode(node[0], node[1]), [0, 1, 2])
    read: list[zkdata.PartitionState] = []

    def on_read(topic: str, index: int, st: zkdata.PartitionState) -> None:
        read.append(st)
        part.apply_state(st, [0, 1, 2])

    mgr = IsrManager(store, 0, on_state_read=on_read, on_written=lambda t, i, st: None, retry_s=0.01)
    part.isr_writer = mgr.propose
    return store, part, mgr, read


async def settle(mgr: IsrManager) -> None:
    for _ in range(500):
        if mgr.in_flight == 0 and mgr._task is None:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the ISR change is still in flight")


def append(part: Partition, n: int = 1) -> None:
    buf = bytearray(build_batch([(None, b"x", [], 0)] * n))
    out = part.append(buf, scan_batches(buf), log_append_time=False)
    assert out.error == 0


def test_shrink_is_written_and_applied(tmp_path: Path) -> None:
    async def main() -> None:
        store, part, mgr, _ = await setup(tmp_path, [0, 1, 2])
        part.propose_isr([0, 1])
        assert part.isr == [0, 1, 2] and part.pending_isr == [0, 1]  # nothing changed yet
        part.propose_isr([0])  # one change in flight: this one is dropped
        await settle(mgr)
        assert part.isr == [0, 1] and part.pending_isr is None
        node = await store.get(PATH)
        assert node is not None
        st = zkdata.PartitionState.decode(node[0], node[1])
        assert st.isr == [0, 1] and st.leader_epoch == 5 and part.state_version == node[1]
        await store.close()

    asyncio.run(main())


def test_the_high_watermark_waits_for_a_follower_being_added(tmp_path: Path) -> None:
    async def main() -> None:
        store, part, mgr, _ = await setup(tmp_path, [0])
        append(part, 3)
        assert part.hw == 3  # ISR {0}: the leader alone
        part.propose_isr([0, 1])  # follower 1 has offsets below 3 only
        part.followers[1].leo = 3
        append(part)
        assert part.hw == 3, "the member being added counts before the change is written"
        await settle(mgr)
        assert part.isr == [0, 1]
        part.followers[1].leo = 4
        part.maybe_increment_hw()
        assert part.hw == 4
        await store.close()

    asyncio.run(main())


def test_a_conflicting_write_gives_the_proposal_up_and_takes_the_stored_state(tmp_path: Path) -> None:
    async def main() -> None:
        store, part, mgr, read = await setup(tmp_path, [0, 1, 2])
        # The controller moves the state on (a new leader epoch) before our write lands.
        node = await store.get(PATH)
        assert node is not None
        await store.set(PATH, zkdata.PartitionState(leader=1, leader_epoch=6, isr=[1, 2]).encode(), node[1])
        part.propose_isr([0, 1])
        await settle(mgr)
        assert [(s.leader, s.leader_epoch) for s in read] == [(1, 6)]
        assert not part.is_leader and part.pending_isr is None
        node = await store.get(PATH)
        assert node is not None and zkdata.PartitionState.decode(node[0]).isr == [1, 2]
        await store.close()

    asyncio.run(main())


def test_an_unreachable_store_is_retried_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        store, part, mgr, _ = await setup(tmp_path, [0, 1, 2])
        await store.close()  # every write now fails
        part.propose_isr([0, 1])
        for _ in range(30):  # the follower-fetch path keeps proposing: never blocks, never floods
            part.propose_isr([0, 1])
            await asyncio.sleep(0.01)
        assert part.pending_isr == [0, 1] and part.isr == [0, 1, 2]
        mgr.close()

    with caplog.at_level(logging.WARNING, "samsa.isr"):
        asyncio.run(main())
    lines = [r for r in caplog.records if "Could not change the ISR" in r.getMessage()]
    assert len(lines) == 1
