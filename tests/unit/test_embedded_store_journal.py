"""EmbeddedStore on the journal: what is committed per call, reopening, migration at open."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.metadata import journal as journal_module
from samsa.metadata.embedded import EmbeddedStore
from samsa.metadata.store import StoreError


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[str, bytes | None, int]]]:
    seen: list[list[tuple[str, bytes | None, int]]] = []
    real = journal_module.Journal.commit

    def spy(self: journal_module.Journal, changes: list[tuple[str, bytes | None, int]]) -> int:
        seen.append(list(changes))
        return real(self, changes)

    monkeypatch.setattr(journal_module.Journal, "commit", spy)
    return seen


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def test_each_change_commits_only_the_nodes_it_touched(tmp_path: Path, commits: list[Any]) -> None:
    async def body() -> None:
        s = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        await s.create("/brokers/topics/t", b"a")
        assert commits == [[("/brokers", b"", 0), ("/brokers/topics", b"", 0), ("/brokers/topics/t", b"a", 0)]]
        await s.set("/brokers/topics/t", b"b")
        await s.create("/brokers/ids/0", b"me", ephemeral=True)  # its (persistent) parent is committed
        await s.set("/brokers/ids/0", b"me again")  # ephemeral: nothing committed
        assert commits[1:] == [[("/brokers/topics/t", b"b", 1)], [("/brokers/ids", b"", 0)]]
        await s.create_many([(f"/brokers/topics/t/partitions/{p}/state", b"s") for p in range(3)])
        assert len(commits) == 4  # one transaction for the batch
        assert {p for p, _, _ in commits[3]} == {"/brokers/topics/t/partitions"} | {
            f"/brokers/topics/t/partitions/{p}{leaf}" for p in range(3) for leaf in ("", "/state")}
        await s.delete("/brokers/topics/t", recursive=True)
        assert sorted(p for p, d, _ in commits[4] if d is None)[0] == "/brokers/topics/t"
        await s.delete("/brokers/ids/0")
        assert len(commits) == 5
        await s.close()
        again = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        assert await again.children("/brokers") == ["ids", "topics"]
        assert await again.get("/brokers/ids/0") is None and await again.get("/brokers/topics/t") is None
        await again.close()

    run(body)


def test_writes_in_flight_together_share_one_commit(tmp_path: Path, commits: list[Any]) -> None:
    async def body() -> None:
        s = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        await asyncio.gather(*(s.create(f"/n/{i}", b"x") for i in range(100)))
        assert len(commits) <= 3  # the first alone, the rest grouped while it was being written
        assert sum(len(c) for c in commits) == 101
        await s.close()

    run(body)


def test_reopen_has_every_persistent_node_and_version(tmp_path: Path) -> None:
    async def body() -> None:
        s = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        await s.create("/config/topics/t", b"{}")
        await s.set("/config/topics/t", b'{"a":1}', 0)
        await s.create("/controller", b"1", ephemeral=True)
        await s.close()
        again = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        assert await again.get("/config/topics/t") == (b'{"a":1}', 1)
        assert await again.get("/controller") is None
        await again.close()

    run(body)


def test_a_failed_commit_is_undone_in_memory_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Disk full (or any journal error): the write fails with StoreError, memory is what the
    disk holds, watches saw nothing of it, and the next write succeeds."""

    async def body() -> None:
        s = await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        await s.create("/a", b"1")
        seen: list[Any] = []
        await s.watch_data("/a", lambda d, v: seen.append((d, v)))
        real = journal_module.Journal.commit

        def full(self: journal_module.Journal, changes: Any) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(journal_module.Journal, "commit", full)
        results = await asyncio.gather(s.set("/a", b"2", 0), s.create("/b", b"x"), s.delete("/a"),
                                       return_exceptions=True)
        assert all(isinstance(r, StoreError) and "No space left" in str(r) for r in results)
        assert await s.get("/a") == (b"1", 0) and await s.get("/b") is None
        monkeypatch.setattr(journal_module.Journal, "commit", real)
        assert await s.set("/a", b"3", 0) == 1
        await asyncio.sleep(0)
        assert seen == [(b"1", 0), (b"3", 1)]
        await s.close()

    run(body)


def test_the_store_imports_a_legacy_json_file(tmp_path: Path) -> None:
    legacy = tmp_path / "samsa-metadata.json"
    legacy.write_text(json.dumps({"version": 1, "nodes": {
        "/cluster": {"data": "", "version": 0},
        "/cluster/id": {"data": base64.b64encode(b'{"id":"x"}').decode(), "version": 0}}}))

    async def body() -> None:
        s = await EmbeddedStore.open(tmp_path / "samsa-metadata.db", legacy_json=legacy)
        assert await s.get("/cluster/id") == (b'{"id":"x"}', 0)
        await s.close()
        assert not legacy.exists() and (tmp_path / "samsa-metadata.json.migrated").exists()
        legacy.write_text("{broken")
        with pytest.raises(StoreError, match="samsa-metadata.json"):
            await EmbeddedStore.open(tmp_path / "samsa-metadata.db", legacy_json=legacy)

    run(body)
