"""The metadata store: a small tree of versioned nodes, as ZooKeeper keeps Kafka's metadata.

One interface, two backends. `EmbeddedStore` (this module) serves a single broker with no
other process to run: nodes live in memory and persistent ones are written to one JSON file
(atomically: temp file, fsync, rename) on every change. The ZooKeeper backend (a later
module) maps the same calls onto znodes. Versions give compare-and-set: `set(path, data,
version)` fails with `BadVersion` unless the node is still at `version`.

File format (`samsa-metadata.json`): {"version": 1, "nodes": {"/path": {"data": "<base64>",
"version": N}}}.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path
from typing import Protocol


class StoreError(Exception):
    pass


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


class MetadataStore(Protocol):
    def get(self, path: str) -> tuple[bytes, int] | None: ...
    def children(self, path: str) -> list[str]: ...
    def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None: ...
    def set(self, path: str, data: bytes, version: int = -1) -> int: ...
    def delete(self, path: str, *, recursive: bool = False) -> None: ...
    def close(self) -> None: ...


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class EmbeddedStore:
    """An in-process store persisted to a JSON file; ephemeral nodes die with the process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self._ephemeral: set[str] = set()
        if path.exists():
            try:
                doc = json.loads(path.read_text())
                for p, n in doc["nodes"].items():
                    self._nodes[p] = (base64.b64decode(n["data"]), int(n["version"]))
            except (ValueError, KeyError, TypeError) as e:
                raise StoreError(f"metadata file {path} is unreadable: {e}") from None

    def _persist(self) -> None:
        doc = {
            "version": 1,
            "nodes": {
                p: {"data": base64.b64encode(d).decode(), "version": v}
                for p, (d, v) in sorted(self._nodes.items())
                if p not in self._ephemeral and p != "/"
            },
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def get(self, path: str) -> tuple[bytes, int] | None:
        return self._nodes.get(path)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None:
        with self._lock:
            if path in self._nodes:
                raise NodeExists(path)
            parent = _parent(path)
            missing = []
            while parent not in self._nodes:
                missing.append(parent)
                parent = _parent(parent)
            if missing and not make_parents:
                raise NoNode(_parent(path))
            for p in reversed(missing):
                self._nodes[p] = (b"", 0)
            self._nodes[path] = (data, 0)
            if ephemeral:
                self._ephemeral.add(path)
            else:
                self._persist()

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        with self._lock:
            cur = self._nodes.get(path)
            if cur is None:
                raise NoNode(path)
            if version != -1 and cur[1] != version:
                raise BadVersion(f"{path} is at version {cur[1]}, not {version}")
            self._nodes[path] = (data, cur[1] + 1)
            if path not in self._ephemeral:
                self._persist()
            return cur[1] + 1

    def delete(self, path: str, *, recursive: bool = False) -> None:
        with self._lock:
            if path not in self._nodes:
                raise NoNode(path)
            prefix = path + "/"
            kids = [p for p in self._nodes if p.startswith(prefix)]
            if kids and not recursive:
                raise StoreError(f"{path} has children")
            for p in kids + [path]:
                del self._nodes[p]
                self._ephemeral.discard(p)
            self._persist()

    def close(self) -> None:
        pass
