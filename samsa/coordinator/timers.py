"""Deadlines of a coordinator shard, without threads: a keyed timer set.

Each timer has a key (say `("hb", group, member)`) and at most one deadline. `set` replaces a
key's deadline, `cancel` drops it. A heap holds (deadline, seq, key) entries; an entry is live
only while the key's current deadline is still that entry's, so rescheduling (a heartbeat every
few seconds per member) is one heap push and never a search. Stale entries are discarded when
they reach the top.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable


class Timers:
    __slots__ = ("_deadline", "_heap", "_seq")

    def __init__(self) -> None:
        self._deadline: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def set(self, key: Hashable, deadline: int) -> None:
        self._deadline[key] = deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._deadline):
            self._compact()

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def get(self, key: Hashable) -> int | None:
        return self._deadline.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadline

    def __len__(self) -> int:
        return len(self._deadline)

    def _clean_top(self) -> None:
        heap = self._heap
        while heap:
            deadline, _, key = heap[0]
            if self._deadline.get(key) == deadline:
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if self._deadline.get(e[2]) == e[0]]
        heapq.heapify(self._heap)

    def next_deadline(self) -> int | None:
        self._clean_top()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Hashable | None:
        """The key of one timer due at `now` (removed), or None when nothing is due."""
        self._clean_top()
        heap = self._heap
        if not heap or heap[0][0] > now:
            return None
        _, _, key = heapq.heappop(heap)
        del self._deadline[key]
        return key

    def clear(self) -> None:
        self._deadline.clear()
        self._heap.clear()
