"""LogManager.create_logs / add_logs and Log.create: many new partitions at the cost of a few."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from samsa.storage import Log, LogManager
from samsa.storage import log as log_module
from samsa.storage import log_manager as log_manager_module
from tests.unit.test_storage_log import FakeClock, append
from tests.unit.test_storage_recovery import BATCH, CFG, make_manager


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def dir_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every directory fsync made by the log manager and by logs."""
    seen: list[Path] = []
    real = log_manager_module._fsync_dir

    def spy(path: Path) -> None:
        seen.append(Path(path))
        real(path)

    monkeypatch.setattr(log_manager_module, "_fsync_dir", spy)
    monkeypatch.setattr(log_module, "_fsync_dir", spy)
    return seen


def started(tmp_path: Path, clock: FakeClock, fsyncs: list[Path] | None = None) -> LogManager:
    m = make_manager(tmp_path, clock, broker_id=1)
    m.startup()
    if fsyncs is not None:
        fsyncs.clear()  # start-up's own (meta.properties)
    return m


def test_create_logs_balances_dirs_and_fsyncs_each_once(tmp_path: Path, clock: FakeClock,
                                                        dir_fsyncs: list[Path]) -> None:
    m = started(tmp_path, clock, dir_fsyncs)
    items = [("t", p, None) for p in range(7)] + [("u", 0, CFG.replace(retention_ms=5))]
    logs = m.create_logs(items)
    assert [lg.name for lg in logs] == [f"{t}-{p}" for t, p, _ in items]
    assert sorted(dir_fsyncs) == [tmp_path / "d1", tmp_path / "d2"]  # once per parent, not per log
    assert [lg.dir.parent.name for lg in logs] == ["d1", "d2"] * 4
    assert logs[-1].config.retention_ms == 5
    assert m.get_log(("t", 0)) is None  # created, not registered: add_logs does that
    assert m.add_logs(logs) == logs
    assert m.get_log(("t", 0)) is logs[0] and len(m.logs()) == 8
    m.shutdown()


def test_a_new_log_is_kafkas_layout_and_empty(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    (lg,) = m.add_logs(m.create_logs([("t", 0, None)]))
    assert sorted(p.name for p in lg.dir.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (0, 0, 0)
    assert append(lg, BATCH).first_offset == 0
    m.shutdown()


def test_directory_choice_counts_registered_logs(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    m.add_logs(m.create_logs([("t", p, None) for p in range(4)]))  # 2 in d1, 2 in d2
    d1 = [tp for tp, lg in m.logs().items() if lg.dir.parent.name == "d1"]
    for tp in d1:
        m.delete_log(*tp)
    new = m.create_logs([("u", 0, None), ("u", 1, None), ("u", 2, None)])
    assert [lg.dir.parent.name for lg in new] == ["d1", "d1", "d1"]  # 0, 1, then 2 = 2: the first dir
    m.add_logs(new)
    m.shutdown()
    # The counts are rebuilt from what startup loads.
    m = started(tmp_path, clock)
    assert len(m.logs()) == 5
    assert m.create_logs([("v", 0, None)])[0].dir.parent.name == "d2"  # 3 in d1, 2 in d2
    m.shutdown()


def test_get_or_create_log_is_a_batch_of_one(tmp_path: Path, clock: FakeClock, dir_fsyncs: list[Path]) -> None:
    m = started(tmp_path, clock, dir_fsyncs)
    lg = m.get_or_create_log("t", 0)
    assert dir_fsyncs == [lg.dir.parent]
    assert m.get_or_create_log("t", 0) is lg and m.create_logs([("t", 0, None)]) == [lg]
    assert dir_fsyncs == [lg.dir.parent]  # nothing created, nothing fsynced
    m.shutdown()


def test_illegal_names_create_nothing(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    with pytest.raises(ValueError):
        m.create_logs([("ok", 0, None), ("../evil", 0, None)])
    with pytest.raises(ValueError):
        m.create_logs([("ok", -1, None)])
    assert not any(p.is_dir() for d in ("d1", "d2") for p in (tmp_path / d).iterdir())
    m.shutdown()


def test_create_logs_in_a_worker_thread(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    m.add_logs(m.create_logs([("busy", p, None) for p in range(20)]))
    stop = threading.Event()
    seen: list[int] = []

    def owner_work() -> None:  # what the event loop keeps doing meanwhile
        while not stop.is_set():
            m.checkpoint()
            seen.append(len(m.logs()))

    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(m.create_logs, [("t", p, None) for p in range(200)])
        owner = threading.Thread(target=owner_work)
        owner.start()
        logs = fut.result(60)
        stop.set()
        owner.join()
    assert set(seen) == {20}  # nothing registered behind the owner's back
    m.add_logs(logs)
    assert len(m.logs()) == 220
    m.shutdown()


def test_add_logs_keeps_the_first_registration(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    first = m.create_logs([("t", 0, None)])
    m.add_logs(first)
    twin = Log.open(first[0].dir, CFG, clock=clock)  # e.g. loaded by a racing call
    assert m.add_logs([twin]) == first
    with pytest.raises(Exception, match="closed"):
        twin.read(0, 100)
    m.shutdown()


def test_first_flush_fsyncs_the_new_directory_once(tmp_path: Path, clock: FakeClock, dir_fsyncs: list[Path]) -> None:
    m = started(tmp_path, clock)
    empty, used = m.add_logs(m.create_logs([("t", 0, None), ("t", 1, None)]))
    dir_fsyncs.clear()
    empty.flush()
    assert dir_fsyncs == []  # nothing in it to make durable
    append(used, BATCH)
    used.flush()
    assert dir_fsyncs == [used.dir]  # before its recovery point moves past the new segment's data
    append(used, BATCH)
    used.flush()
    assert dir_fsyncs == [used.dir]
    dir_fsyncs.clear()
    m.shutdown()
    assert used.dir not in dir_fsyncs and empty.dir not in dir_fsyncs


def test_crash_after_creation_loses_nothing_durable(tmp_path: Path, clock: FakeClock) -> None:
    m = started(tmp_path, clock)
    logs = m.add_logs(m.create_logs([("t", p, None) for p in range(4)]))
    append(logs[0], BATCH)
    logs[0].flush()
    m.checkpoint()
    # kill -9: no shutdown. A crash between mkdir and the files leaves an empty directory too.
    (tmp_path / "d1" / "t-9").mkdir()
    os.unlink(logs[1].active_segment.path(".index"))
    m = started(tmp_path, clock)
    assert sorted(m.logs()) == [("t", p) for p in (0, 1, 2, 3, 9)]
    assert m.get_log(("t", 0)).log_end_offset == 3  # type: ignore[union-attr]
    assert all(lg.log_end_offset == 0 for tp, lg in m.logs().items() if tp != ("t", 0))
    # A leftover directory nobody registered is opened, not an error.
    (tmp_path / "d2" / "t-5").mkdir()
    (lg,) = m.add_logs(m.create_logs([("t", 5, None)]))
    assert lg.dir.parent.name in ("d1", "d2") and lg.log_end_offset == 0
    m.shutdown()


def test_recovery_threads_open_and_flush_the_logs_in_parallel(tmp_path: Path, clock: FakeClock) -> None:
    """num.recovery.threads.per.data.dir: that many threads per log dir open the logs at start-up
    and flush them at shutdown; what they load is what one thread loads."""
    m = started(tmp_path, clock)
    logs = m.add_logs(m.create_logs([("t", p, None) for p in range(40)]))
    for lg in logs[:10]:
        append(lg, BATCH)
    m.shutdown()

    threads: set[str] = set()

    def opening(*args: object, **kw: object) -> Log:
        threads.add(threading.current_thread().name)
        return Log.open(*args, **kw)  # type: ignore[arg-type]

    again = make_manager(tmp_path, clock, broker_id=1, log_factory=opening, recovery_threads=3)
    again.startup()
    assert len(again.logs()) == 40
    assert sum(lg.log_end_offset for lg in again.logs().values()) == 10 * logs[0].log_end_offset
    assert len(threads) > 1 and all(t.startswith("samsa-log-recovery") for t in threads)
    again.shutdown()


def test_partition_metadata_goes_only_into_the_directory_it_was_meant_for(tmp_path: Path) -> None:
    """The topic id is written after the log leads (in the background, as Kafka does): if the
    log was deleted and its partition created again meanwhile, the new directory must not get
    the old topic's id."""
    d = tmp_path / "t-0"
    d.mkdir()
    st = os.stat(d)
    inode = (st.st_dev, st.st_ino)
    assert log_manager_module.write_topic_id(d, "AAAAAAAAAAAAAAAAAAAAAA", inode)
    assert log_manager_module.read_topic_id(d) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert not (d / "partition.metadata.tmp").exists()
    os.rename(d, tmp_path / "t-0.deleted")
    d.mkdir()  # the partition of a new topic of the same name
    assert not log_manager_module.write_topic_id(d, "AAAAAAAAAAAAAAAAAAAAAA", inode)
    assert log_manager_module.read_topic_id(d) is None
    assert log_manager_module.read_topic_id(tmp_path / "t-0.deleted") == "AAAAAAAAAAAAAAAAAAAAAA"
    assert not log_manager_module.write_topic_id(tmp_path / "gone-0", "AAAAAAAAAAAAAAAAAAAAAA", inode)
