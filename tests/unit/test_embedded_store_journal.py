"""EmbeddedStore on the journal: what is committed per call, reopening, migration at open."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from samsa.metadata import journal as journal_module
from samsa.metadata.store import EmbeddedStore, StoreError


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[str, bytes | None, int]]]:
    seen: list[list[tuple[str, bytes | None, int]]] = []
    real = journal_module.Journal.commit

    def spy(self: journal_module.Journal, changes: list[tuple[str, bytes | None, int]]) -> int:
        seen.append(list(changes))
        return real(self, changes)

    monkeypatch.setattr(journal_module.Journal, "commit", spy)
    return seen


def test_each_change_commits_only_the_nodes_it_touched(tmp_path: Path, commits: list) -> None:
    s = EmbeddedStore(tmp_path / "samsa-metadata.db")
    s.create("/brokers/topics/t", b"a")
    assert commits == [[("/brokers", b"", 0), ("/brokers/topics", b"", 0), ("/brokers/topics/t", b"a", 0)]]
    s.set("/brokers/topics/t", b"b")
    s.create("/brokers/ids/0", b"me", ephemeral=True)  # ephemeral: nothing committed (its parent later)
    s.set("/brokers/ids/0", b"me again")
    assert commits[1:] == [[("/brokers/topics/t", b"b", 1)]]
    s.create_many([(f"/brokers/topics/t/partitions/{p}/state", b"s") for p in range(3)])
    assert len(commits) == 3  # one transaction for the batch, with the ephemeral node's parent
    assert {p for p, _, _ in commits[2]} == {"/brokers/ids", "/brokers/topics/t/partitions"} | {
        f"/brokers/topics/t/partitions/{p}{leaf}" for p in range(3) for leaf in ("", "/state")}
    s.delete("/brokers/topics/t", recursive=True)
    assert sorted(p for p, d, _ in commits[3] if d is None)[0] == "/brokers/topics/t"
    s.delete("/brokers/ids/0")
    assert len(commits) == 4
    s.close()
    again = EmbeddedStore(tmp_path / "samsa-metadata.db")
    assert again.children("/brokers") == ["ids", "topics"]
    assert again.get("/brokers/ids/0") is None and again.get("/brokers/topics/t") is None
    again.close()


def test_reopen_has_every_persistent_node_and_version(tmp_path: Path) -> None:
    s = EmbeddedStore(tmp_path / "samsa-metadata.db")
    s.create("/config/topics/t", b"{}")
    s.set("/config/topics/t", b'{"a":1}', 0)
    s.create("/controller", b"1", ephemeral=True)
    s.close()
    again = EmbeddedStore(tmp_path / "samsa-metadata.db")
    assert again.get("/config/topics/t") == (b'{"a":1}', 1)
    assert again.get("/controller") is None
    again.close()


def test_the_store_imports_a_legacy_json_file(tmp_path: Path) -> None:
    legacy = tmp_path / "samsa-metadata.json"
    legacy.write_text(json.dumps({"version": 1, "nodes": {
        "/cluster": {"data": "", "version": 0},
        "/cluster/id": {"data": base64.b64encode(b'{"id":"x"}').decode(), "version": 0}}}))
    s = EmbeddedStore(tmp_path / "samsa-metadata.db", legacy_json=legacy)
    assert s.get("/cluster/id") == (b'{"id":"x"}', 0)
    s.close()
    assert not legacy.exists() and (tmp_path / "samsa-metadata.json.migrated").exists()
    legacy.write_text("{broken")
    with pytest.raises(StoreError, match="samsa-metadata.json"):
        EmbeddedStore(tmp_path / "samsa-metadata.db", legacy_json=legacy)
