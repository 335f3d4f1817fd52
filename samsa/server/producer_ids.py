"""Producer ids, reserved in blocks in the metadata store so they never repeat after a restart."""

from __future__ import annotations

from samsa.metadata import zkdata
from samsa.metadata.store import MetadataStore

PATH = "/latest_producer_id_block"
BLOCK = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self._next = 0
        self._end = 0  # exclusive

    def next(self) -> int:
        if self._next >= self._end:
            self._reserve()
        pid = self._next
        self._next += 1
        return pid

    def _reserve(self) -> None:
        node = self.store.get(PATH)
        if node is None:
            start = 0
            self.store.create(PATH, zkdata.dumps({"version": 1, "broker": self.broker_id, "block_start": 0, "block_end": BLOCK - 1}))
        else:
            doc = zkdata.loads(node[0])
            start = int(doc["block_end"]) + 1
            self.store.set(PATH, zkdata.dumps({"version": 1, "broker": self.broker_id, "block_start": start,
                                               "block_end": start + BLOCK - 1}), node[1])
        self._next, self._end = start, start + BLOCK
