"""samsa.metadata.journal: round trip, deletes, one transaction per batch, migration from the
JSON file, and what survives a kill -9 (real child processes killed with SIGKILL)."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.metadata.journal import MIGRATED_SUFFIX, Journal, JournalError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Journal]:
    j = Journal.open(tmp_path / "samsa-metadata.db")
    yield j
    j.close()


def reopen(path: Path) -> dict[str, tuple[bytes, int]]:
    j = Journal.open(path)
    try:
        return j.load()
    finally:
        j.close()


def write_legacy_json(path: Path, nodes: dict[str, tuple[bytes, int]]) -> None:
    doc = {"version": 1, "nodes": {p: {"data": base64.b64encode(d).decode(), "version": v}
                                   for p, (d, v) in nodes.items()}}
    path.write_text(json.dumps(doc))


# -- round trip, deletes, batches ----------------------------------------------------------------


def test_new_journal_is_empty(journal: Journal) -> None:
    assert journal.load() == {}


def test_round_trip_across_reopen(journal: Journal, tmp_path: Path) -> None:
    journal.commit([("/brokers/topics/t", b'{"partitions":{}}', 0), ("/config/topics/t", b"{}", 3),
                    ("/empty", b"", 0), ("/binary", bytes(range(256)), 7)])
    journal.commit([("/config/topics/t", b'{"x":1}', 4)])
    expected = {"/brokers/topics/t": (b'{"partitions":{}}', 0), "/config/topics/t": (b'{"x":1}', 4),
                "/empty": (b"", 0), "/binary": (bytes(range(256)), 7)}
    assert journal.load() == expected
    journal.close()
    assert reopen(tmp_path / "samsa-metadata.db") == expected


def test_deletes_and_changes_apply_in_order(journal: Journal) -> None:
    journal.commit([("/a", b"1", 0), ("/b", b"2", 0), ("/c", b"3", 0)])
    # Within one batch: delete then re-create, create then delete, delete of an absent node.
    journal.commit([("/a", None, 0), ("/a", b"again", 0), ("/d", b"4", 0), ("/d", None, 0),
                    ("/nope", None, 0), ("/b", None, 0)])
    assert journal.load() == {"/a": (b"again", 0), "/c": (b"3", 0)}


def test_empty_batch_is_a_no_op(journal: Journal) -> None:
    assert journal.commit([]) == 0
    assert journal.load() == {}


def test_a_failing_batch_is_rolled_back_whole(journal: Journal) -> None:
    journal.commit([("/kept", b"1", 0)])

    def changes() -> Iterator[tuple[str, bytes | None, int]]:
        yield "/new", b"x", 0
        yield "/kept", None, 0
        raise RuntimeError("the caller failed mid-batch")

    with pytest.raises(RuntimeError):
        journal.commit(changes())
    with pytest.raises(JournalError):  # SQLite refuses the third change: the first two go too
        journal.commit([("/kept", None, 0), ("/new", b"x", 0), ("/x", object(), 0)])  # type: ignore[list-item]
    assert journal.load() == {"/kept": (b"1", 0)}
    journal.commit([("/after", b"2", 0)])  # the journal is usable again
    assert journal.load() == {"/kept": (b"1", 0), "/after": (b"2", 0)}


def test_commit_from_a_writer_thread(journal: Journal, tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(50):
                journal.commit([(f"/n/{i}", str(i).encode(), i)])
        except BaseException as e:  # reported below
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    t.join()
    assert not errors
    journal.close()
    assert reopen(tmp_path / "samsa-metadata.db") == {f"/n/{i}": (str(i).encode(), i) for i in range(50)}


def test_pragmas(journal: Journal) -> None:
    conn = journal._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: the WAL is fsynced at every commit
    assert conn.execute("PRAGMA locking_mode").fetchone()[0] == "exclusive"


# -- kill -9 ---------------------------------------------------------------------------------------

CHILD_PRELUDE = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from samsa.metadata.journal import Journal
    j = Journal.open(Path({db!r}))
    j.commit([("/batch1/" + str(i), b"one", i) for i in range(100)])
    def say(word):
        os.write(1, word.encode() + b"\\n")
""")


def run_child_until(tmp_path: Path, body: str, word: str) -> subprocess.Popen[bytes]:
    """Start a child that opens the journal, commits batch 1, then runs `body`; return once it
    printed `word` (it then sleeps until killed)."""
    db = tmp_path / "samsa-metadata.db"
    code = CHILD_PRELUDE.format(root=str(ROOT), db=str(db)) + textwrap.dedent(body)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if line != word:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"child said {line!r}, not {word!r}: {err.decode()}")
    return proc


def kill9(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()


def test_committed_batches_survive_kill9(tmp_path: Path) -> None:
    proc = run_child_until(tmp_path, """
        j.commit([("/batch2/" + str(i), b"two", 0) for i in range(100)] + [("/batch1/0", None, 0)])
        say("committed")
        time.sleep(60)
    """, "committed")
    kill9(proc)
    nodes = reopen(tmp_path / "samsa-metadata.db")
    assert len(nodes) == 199
    assert "/batch1/0" not in nodes
    assert nodes["/batch1/99"] == (b"one", 99) and nodes["/batch2/99"] == (b"two", 0)


def test_a_batch_interrupted_by_kill9_is_not_applied_at_all(tmp_path: Path) -> None:
    # The child pauses inside commit(), half-way through a batch big enough that SQLite has
    # already spilled some of its pages to the -wal file, and is killed there.
    proc = run_child_until(tmp_path, """
        def changes():
            for i in range(100):
                yield "/batch1/" + str(i), None, 0  # delete everything of batch 1 ...
            for i in range(20000):
                yield "/batch2/" + str(i), b"x" * 1000, 0  # ... and write 20 MB
                if i == 15000:
                    say("inside")
                    time.sleep(60)
        j.commit(changes())
    """, "inside")
    wal = tmp_path / "samsa-metadata.db-wal"
    assert wal.stat().st_size > 4 << 20, "the uncommitted batch should have reached the WAL file"
    kill9(proc)
    nodes = reopen(tmp_path / "samsa-metadata.db")
    assert nodes == {f"/batch1/{i}": (b"one", i) for i in range(100)}


def test_a_second_process_cannot_open_a_journal_in_use(tmp_path: Path) -> None:
    proc = run_child_until(tmp_path, """
        say("open")
        time.sleep(60)
    """, "open")
    try:
        with pytest.raises(JournalError, match="in use by another process"):
            Journal.open(tmp_path / "samsa-metadata.db")
    finally:
        kill9(proc)
    assert len(reopen(tmp_path / "samsa-metadata.db")) == 100


# -- migration from samsa-metadata.json ----------------------------------------------------------

LEGACY = {"/brokers/topics/t": (b'{"version":2}', 0), "/brokers/topics/t/partitions/0/state": (b'{"leader":0}', 5),
          "/cluster/id": (b'{"id":"abc"}', 0), "/empty": (b"", 2)}


def test_migration_imports_the_json_and_renames_it(tmp_path: Path) -> None:
    legacy = tmp_path / "samsa-metadata.json"
    write_legacy_json(legacy, LEGACY)
    (tmp_path / "samsa-metadata.tmp").write_text("{half a rewrite")  # the old store's leftover
    j = Journal.open(tmp_path / "samsa-metadata.db", legacy_json=legacy)
    assert j.load() == LEGACY
    j.commit([("/new", b"1", 0)])
    j.close()
    assert not legacy.exists()
    assert (tmp_path / ("samsa-metadata.json" + MIGRATED_SUFFIX)).exists()
    assert not (tmp_path / "samsa-metadata.tmp").exists()
    # Later opens do not import again (the renamed file is left alone).
    j = Journal.open(tmp_path / "samsa-metadata.db", legacy_json=legacy)
    assert j.load() == {**LEGACY, "/new": (b"1", 0)}
    j.close()


def test_migration_interrupted_before_the_rename_is_redone(tmp_path: Path) -> None:
    legacy = tmp_path / "samsa-metadata.json"
    write_legacy_json(legacy, LEGACY)
    db = tmp_path / "samsa-metadata.db"
    # A child imports the JSON, then is killed just before renaming it.
    code = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from samsa.metadata import journal
        def stop_here(*args):
            os.write(1, b"imported\\n")
            time.sleep(60)
        journal.os.replace = stop_here
        journal.Journal.open(Path({str(db)!r}), legacy_json=Path({str(legacy)!r}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"imported\n", proc.communicate(timeout=10)
    kill9(proc)
    assert legacy.exists()
    # The import is done again on the next start: the JSON still is the truth.
    j = Journal.open(db, legacy_json=legacy)
    assert j.load() == LEGACY
    j.close()
    assert not legacy.exists()


def test_migration_replaces_what_an_interrupted_import_left(tmp_path: Path) -> None:
    db = tmp_path / "samsa-metadata.db"
    j = Journal.open(db)
    j.commit([("/stale", b"from an earlier attempt", 0), ("/cluster/id", b"other", 9)])
    j.close()
    legacy = tmp_path / "samsa-metadata.json"
    write_legacy_json(legacy, LEGACY)
    j = Journal.open(db, legacy_json=legacy)
    assert j.load() == LEGACY
    j.close()


@pytest.mark.parametrize("text", ["{not json", '{"version": 1}', '{"version": 1, "nodes": {"/a": {"data": "!!"}}}',
                                  '{"version": 7, "nodes": {}}', '{"version": 1, "nodes": {"a": {"data": "", "version": 0}}}'])
def test_unreadable_legacy_json_is_a_clear_error(tmp_path: Path, text: str) -> None:
    legacy = tmp_path / "samsa-metadata.json"
    legacy.write_text(text)
    with pytest.raises(JournalError, match="samsa-metadata.json.*unreadable.*move it aside"):
        Journal.open(tmp_path / "samsa-metadata.db", legacy_json=legacy)
    assert legacy.exists()  # left for the operator


# -- unreadable journal ----------------------------------------------------------------------------


def test_a_corrupt_journal_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "samsa-metadata.db"
    db.write_bytes(b"this is not an SQLite database at all" * 200)
    with pytest.raises(JournalError, match=r"samsa-metadata\.db is unreadable.*restore.*move samsa-metadata\.db"):
        Journal.open(db)


def test_a_damaged_journal_page_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "samsa-metadata.db"
    j = Journal.open(db)
    j.commit([(f"/n/{i:05d}", b"v" * 200, 0) for i in range(2000)])
    j.close()
    raw = bytearray(db.read_bytes())
    page = 4096
    for off in range(3 * page, len(raw) - page, page):  # scribble over the b-tree pages
        raw[off:off + 64] = b"\xff" * 64
    db.write_bytes(bytes(raw))
    with pytest.raises(JournalError, match="is unreadable"):
        j = Journal.open(db)
        j.load()
        j.close()


def test_another_sqlite_database_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "samsa-metadata.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE something (x)")
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match="not a Samsa metadata journal"):
        Journal.open(db)
