"""Producer ids, reserved in blocks in the metadata store so they never repeat after a restart.

A block of `BLOCK` ids is claimed with a compare-and-set on `/latest_producer_id_block` (as
Kafka's ZooKeeper mode does); ids are handed out from memory until the block runs out.
Claims are serialized, and a lost race simply claims the next block.
"""

from __future__ import annotations

import asyncio

from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, MetadataStore, NodeExists, StoreError

PATH = "/latest_producer_id_block"
BLOCK = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, broker_id: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self._next = 0
        self._end = 0  # exclusive
        self._lock = asyncio.Lock()

    async def next(self) -> int:
        if self._next >= self._end:
            async with self._lock:
                if self._next >= self._end:
                    await self._reserve()
        pid = self._next
        self._next += 1
        return pid

    async def _reserve(self) -> None:
        for _ in range(10):
            node = await self.store.get(PATH)
            try:
                if node is None:
                    start = 0
                    await self.store.create(PATH, zkdata.dumps(
                        {"version": 1, "broker": self.broker_id, "block_start": 0, "block_end": BLOCK - 1}))
                else:
                    start = int(zkdata.loads(node[0])["block_end"]) + 1
                    await self.store.set(PATH, zkdata.dumps({"version": 1, "broker": self.broker_id,
                                                             "block_start": start, "block_end": start + BLOCK - 1}),
                                         node[1])
            except (BadVersion, NodeExists):
                continue  # another broker claimed a block meanwhile: claim the next one
            self._next, self._end = start, start + BLOCK
            return
        raise StoreError("could not reserve a block of producer ids (too much contention)")
