"""The order Java's HashMap iterates its keys in, so that tools listing a map print as Kafka's.

Kafka's tools print some results by iterating a java.util.HashMap: the findings of
DumpLogSegments per file, DeleteRecordsCommand's low watermarks per partition. A HashMap
iterates its table of `capacity` buckets in index order, where a key's bucket is
`(h ^ (h >>> 16)) & (capacity - 1)` for its hashCode h; inside a bucket, keys added with `put`
come in the order they were added, keys added with `computeIfAbsent` latest first (it links a
new key at the head of the bucket). The table starts at 16 buckets (or the next power of two
of an initial capacity) and doubles whenever the map holds more than three quarters of that;
doubling keeps the order inside each bucket. (Buckets of 8 colliding keys, which Java turns
into trees, are not modelled: they do not happen with a handful of keys.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from samsa.coordinator.records import java_string_hash

K = TypeVar("K")


def _table_size(initial_capacity: int) -> int:
    capacity = 1
    while capacity < initial_capacity:
        capacity *= 2
    return capacity


def hashmap_order(keys: Sequence[K], hash_code: Callable[[K], int], *, computed: bool = False,
                  initial_capacity: int = 16) -> list[K]:
    """`keys` (distinct, in the order they were added) in the order the map iterates them;
    `computed`: added with computeIfAbsent rather than put."""
    capacity = _table_size(initial_capacity)
    while len(keys) > int(capacity * 0.75):
        capacity *= 2

    def bucket(k: K) -> int:
        h = hash_code(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    order = sorted(range(len(keys)), key=lambda i: (bucket(keys[i]), -i if computed else i))
    return [keys[i] for i in order]


def string_hash(s: str) -> int:
    return java_string_hash(s)


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """TopicPartition.hashCode: 31 * (31 + partition) + topic.hashCode(), as an int32."""
    h = (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
