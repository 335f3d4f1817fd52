"""server/alter_log_dirs.py in process, on real logs and an event loop, where the broker tests
cannot reach: appends on the loop all through a move (the final catch-up and the swap between
two of them), a truncation of the source under a copy that already went past it, a throttle
changed while a move waits on it. Over TCP with real clients: tests/broker/test_alter_replica_log_dirs.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.alter_log_dirs import THROTTLE_KEY, ReplicaAlterLogDirsManager
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.storage import Log, LogManager
from tests.unit.test_log_move import batches
from tests.unit.test_storage_log import make_batch, make_buf
from tests.unit.test_storage_recovery import CFG

UNLIMITED = 2**63 - 1


class Config:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {THROTTLE_KEY: UNLIMITED, "replica.fetch.max.bytes": 1 << 20}

    def get(self, key: str) -> Any:
        return self.values[key]


def append(part: Partition, i: int) -> bytes:
    """A leader append through the partition's log of now, as a produce makes; the batch's bytes."""
    buf, headers = make_buf([make_batch(3, ts=1000 + i, value_size=40)])
    part.log.append(buf, headers, leader_epoch=0)
    return bytes(buf)


async def until(what: Callable[[], object], timeout: float = 20.0) -> None:
    async def poll() -> None:
        while not what():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), timeout)


def setup(tmp_path: Path) -> tuple[LogManager, Partition, ReplicaManager]:
    logs = LogManager([tmp_path / "a", tmp_path / "b"], CFG)
    logs.startup()
    part = Partition("t", 0, uuid.uuid4(), logs.get_or_create_log("t", 0, CFG))
    assert part.log.dir == tmp_path / "a" / "t-0"
    replicas = ReplicaManager()
    replicas.add(part)
    return logs, part, replicas


def test_appends_go_on_through_a_move_and_a_truncation_under_the_copy_is_followed(tmp_path: Path) -> None:
    async def scenario() -> None:
        logs, part, replicas = setup(tmp_path)
        source = part.log
        assert isinstance(source, Log)
        written = [append(part, i) for i in range(60)]  # (6 segments: one read covers at most one)
        config = Config()
        config.values[THROTTLE_KEY] = 1  # (the first round copies one segment, then waits)
        errors: list[OSError] = []
        mover = ReplicaAlterLogDirsManager(asyncio.get_running_loop(), logs, replicas, lambda: config,  # type: ignore[arg-type,return-value]
                                           None, lambda d, e: errors.append(e))
        assert mover.alter({("t", 0): str(tmp_path / "b")}) == {("t", 0): ErrorCode.NONE}
        await until(lambda: ("t", 0) in mover.futures() and mover.futures()[("t", 0)].log_end_offset >= 30)
        future = mover.futures()[("t", 0)]
        assert future.log_dir == tmp_path / "b" and future.log_end_offset == 30  # (one segment, 10 batches)

        source.truncate_to(15)  # (a follower's truncation: the copy, at 30, must follow it)
        del written[5:]
        stop = asyncio.Event()

        async def producer() -> None:
            i = 100
            while not stop.is_set():
                written.append(append(part, i))
                i += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(producer())
        config.values[THROTTLE_KEY] = UNLIMITED  # (the waiting round sees it within half a second)
        await until(lambda: ("t", 0) not in mover.moves)
        moved = len(written)
        await until(lambda: len(written) > moved + 20)  # (appends go on, into the new log)
        stop.set()
        await task

        assert not errors
        assert part.log is not source and part.log.dir == tmp_path / "b" / "t-0"
        assert logs.get_log(("t", 0)) is part.log
        assert batches(part.log) == written  # every batch appended, at its offset, once
        assert not (tmp_path / "a" / "t-0").exists()
        assert [p.name for p in (tmp_path / "b").iterdir() if p.name.startswith("t-0")] == ["t-0"]
        await mover.shutdown()
        logs.shutdown()

    asyncio.run(scenario())


def test_a_move_stopped_by_shutdown_leaves_its_copy_for_the_next_start(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, int]:
        logs, part, replicas = setup(tmp_path)
        for i in range(60):
            append(part, i)
        config = Config()
        config.values[THROTTLE_KEY] = 1
        mover = ReplicaAlterLogDirsManager(asyncio.get_running_loop(), logs, replicas, lambda: config,  # type: ignore[arg-type,return-value]
                                           None, lambda d, e: None)
        mover.alter({("t", 0): str(tmp_path / "b")})
        await until(lambda: ("t", 0) in mover.futures())
        await mover.shutdown()
        copies = [p.name for p in (tmp_path / "b").iterdir() if p.name.startswith("t-0")]
        assert len(copies) == 1 and copies[0].endswith("-future")
        leo = part.log.log_end_offset
        logs.shutdown()
        again = LogManager([tmp_path / "a", tmp_path / "b"], CFG)
        again.startup()
        lg = again.get_log(("t", 0))
        assert lg is not None and lg.dir == tmp_path / "a" / "t-0"
        assert again.interrupted_moves == {("t", 0): tmp_path / "b"}
        return lg.log_end_offset, leo

    reopened, leo = asyncio.run(scenario())
    assert reopened == leo == 180
    assert [p.name for p in (tmp_path / "b").iterdir() if p.name.startswith("t-0")] == []
