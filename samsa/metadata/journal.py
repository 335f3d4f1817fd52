"""The embedded metadata store's journal: its persistent nodes in one SQLite database.

How it works: the store keeps every node in memory and hands the journal each batch of
changes; `commit` writes the batch as one SQLite transaction, so a change costs what it
writes (a few rows in the write-ahead log), not the size of all metadata, and a batch is on
disk whole or not at all. `load` reads every node back at start.

On disk (`samsa-metadata.db` in the first log dir, beside it `samsa-metadata.db-wal` while
the broker runs):

    nodes(path TEXT PRIMARY KEY, data BLOB, version INTEGER) WITHOUT ROWID
    PRAGMA application_id = 0x53414D53 ("SAMS"), user_version = 1 (this schema)

Pragmas, chosen for a store with one writer that must not lose an acknowledged change:

- `journal_mode=WAL`: a commit appends its pages to the -wal file (sequential, no rewrite
  of the database), checkpointed into the database every ~4 MB by SQLite.
- `synchronous=FULL`: the WAL is fsynced at every commit, so a commit that returned
  survives power loss as well as a crash of the process. (`NORMAL` would survive a process
  crash but may roll back the last commits on power loss; with batched commits the one
  fsync per batch is cheap.)
- `locking_mode=EXCLUSIVE`: the journal is locked while open (a second broker pointed at
  the same log dir fails at once instead of sharing it), and SQLite keeps the WAL index in
  process memory instead of a -shm file.

Threads: open and `load` on one thread, then `commit` from one thread at a time (a lock
serialises calls anyway; the connection is opened with check_same_thread=False).

Migration: earlier Samsa versions kept the nodes in `samsa-metadata.json` (a JSON document
{"version": 1, "nodes": {"/path": {"data": "<base64>", "version": N}}}, rewritten whole on
every change). If that file is present when the journal opens, its nodes replace the
journal's in one transaction, then it is renamed `samsa-metadata.json.migrated`. A crash
between the two leaves the JSON in place and the import is simply done again (the JSON is
the truth until it has been renamed).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from itertools import groupby
from pathlib import Path

log = logging.getLogger("samsa.metadata")

APPLICATION_ID = 0x53414D53  # "SAMS"
SCHEMA_VERSION = 1
MIGRATED_SUFFIX = ".migrated"

Change = tuple[str, "bytes | None", int]  # (path, data or None to delete, version)

_SCHEMA = ("CREATE TABLE IF NOT EXISTS nodes (path TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL, "
           "version INTEGER NOT NULL) WITHOUT ROWID")
_UPSERT = "INSERT OR REPLACE INTO nodes (path, data, version) VALUES (?, ?, ?)"
_DELETE = "DELETE FROM nodes WHERE path = ?"


class JournalError(Exception):
    """The journal cannot be opened or written; the message says which file and what to do."""


class Journal:
    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, *, legacy_json: Path | None = None) -> Journal:
        """Open (creating if absent) the journal at `path`; import `legacy_json` if it exists."""
        path = Path(path)
        created = not path.exists()
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise JournalError(f"cannot open the metadata journal {path}: {e}") from None
        try:
            _configure(conn, path)
        except BaseException:
            conn.close()
            raise
        if created:
            _fsync_dir(path.parent)  # the new database file's name is durable too
        journal = cls(path, conn)
        if legacy_json is not None and Path(legacy_json).exists():
            journal._migrate(Path(legacy_json))
        return journal

    def load(self) -> dict[str, tuple[bytes, int]]:
        """Every node: path -> (data, version)."""
        with self._lock:
            try:
                rows = self._conn.execute("SELECT path, data, version FROM nodes").fetchall()
            except sqlite3.DatabaseError as e:
                raise _corrupt(self.path, e) from None
        return {p: (bytes(d), int(v)) for p, d, v in rows}

    def commit(self, changes: Iterable[Change]) -> int:
        """Apply the changes in order as one transaction, durable when this returns; rows written.

        A change with data None deletes the node (a no-op if it is absent). On any error the
        transaction is rolled back (none of the batch is applied) and JournalError raised.
        """
        with self._lock:
            conn = self._conn
            n = 0
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # Each run is consumed once, streamed into SQLite (a batch need not fit in memory twice).
                    for is_delete, run in groupby(changes, key=lambda c: c[1] is None):
                        if is_delete:
                            cur = conn.executemany(_DELETE, ((c[0],) for c in run))
                        else:
                            cur = conn.executemany(_UPSERT, _upserts(run))  # noqa: B031
                        n += max(cur.rowcount, 0)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise JournalError(f"could not write the metadata journal {self.path}: {e}") from None
            return n

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- migration from samsa-metadata.json ------------------------------------------------

    def _migrate(self, json_path: Path) -> None:
        nodes = read_legacy_json(json_path)
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute("DELETE FROM nodes")
                    conn.executemany(_UPSERT, ((p, d, v) for p, (d, v) in nodes.items()))
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                raise JournalError(f"could not import {json_path} into the metadata journal {self.path}: {e}") from None
        done = json_path.with_name(json_path.name + MIGRATED_SUFFIX)
        os.replace(json_path, done)
        _fsync_dir(json_path.parent)
        stale_tmp = json_path.with_suffix(".tmp")  # the old store's half-written rewrite, if any
        stale_tmp.unlink(missing_ok=True)
        log.info("Imported %d metadata nodes from %s into %s; the JSON file is kept as %s",
                 len(nodes), json_path, self.path, done.name)


def read_legacy_json(path: Path) -> dict[str, tuple[bytes, int]]:
    """The nodes of a `samsa-metadata.json` written by an earlier Samsa version."""
    try:
        doc = json.loads(path.read_text())
        if doc.get("version", 1) != 1:
            raise ValueError(f"unknown format version {doc.get('version')!r}")
        nodes = {}
        for p, n in doc["nodes"].items():
            if not isinstance(p, str) or not p.startswith("/"):
                raise ValueError(f"bad node path {p!r}")
            nodes[p] = (base64.b64decode(n["data"], validate=True), int(n["version"]))
        return nodes
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise JournalError(
            f"the metadata file {path} (from an earlier Samsa version, to be imported into the journal) is "
            f"unreadable: {e}. Restore it from a backup, or move it aside to start with empty metadata.") from None


def _upserts(run: Iterable[Change]) -> Iterator[tuple[str, bytes, int]]:
    yield from run  # type: ignore[misc]  # data is not None in an upsert run


def _configure(conn: sqlite3.Connection, path: Path) -> None:
    try:
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise JournalError(f"the metadata journal {path} cannot use write-ahead logging (journal_mode={mode})")
        conn.execute("PRAGMA synchronous=FULL")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        schema = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app_id == 0 and not tables:  # a new database
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SCHEMA)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        elif app_id != APPLICATION_ID or "nodes" not in tables:
            raise JournalError(f"{path} is an SQLite database but not a Samsa metadata journal; "
                               "move it out of the log dir")
        elif schema > SCHEMA_VERSION:
            raise JournalError(f"the metadata journal {path} has schema version {schema}, written by a newer "
                               f"Samsa (this one knows version {SCHEMA_VERSION}); run that version")
        check = conn.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise sqlite3.DatabaseError(f"quick_check: {check}")
    except sqlite3.OperationalError as e:
        if "locked" in str(e):
            raise JournalError(f"the metadata journal {path} is in use by another process (is another broker "
                               "running with this log dir?)") from None
        raise _corrupt(path, e) from None
    except sqlite3.DatabaseError as e:
        raise _corrupt(path, e) from None


def _corrupt(path: Path, e: Exception) -> JournalError:
    return JournalError(
        f"the metadata journal {path} is unreadable ({e}). Stop the broker and restore it (with its -wal file) "
        f"from a backup; or, to start with empty metadata (topics, configs and ACLs forgotten; partition logs "
        f"stay on disk), move {path.name} and {path.name}-wal aside.")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
