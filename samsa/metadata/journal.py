"""Interim journal of the embedded store: the whole tree rewritten as one JSON file per commit.

File format (`samsa-metadata.json`): {"version": 1, "nodes": {"/path": {"data": "<base64>",
"version": N}}}, written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from samsa.metadata.store import Node, StoreError


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._nodes: dict[str, Node] = {}

    @classmethod
    def open(cls, path: Path) -> "Journal":
        j = cls(path)
        if path.exists():
            try:
                doc = json.loads(path.read_text())
                for p, n in doc["nodes"].items():
                    j._nodes[p] = (base64.b64decode(n["data"]), int(n["version"]))
            except (ValueError, KeyError, TypeError) as e:
                raise StoreError(f"metadata file {path} is unreadable: {e}") from None
        return j

    def load(self) -> dict[str, Node]:
        return dict(self._nodes)

    def commit(self, changes: list[tuple[str, bytes | None, int]]) -> None:
        for path, data, version in changes:
            if data is None:
                self._nodes.pop(path, None)
            else:
                self._nodes[path] = (data, version)
        doc = {"version": 1, "nodes": {p: {"data": base64.b64encode(d).decode(), "version": v}
                                       for p, (d, v) in sorted(self._nodes.items()) if p != "/"}}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def close(self) -> None:
        pass
