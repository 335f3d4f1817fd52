"""Server-side assignors of the consumer group protocol (KIP-848), as pure functions.

An assignor maps each member to the partitions it should own -- the group's *target
assignment* -- from:

    members   member id -> the topic names it subscribes to
    topics    topic name -> (topic id, partition count), the subscribed topics that exist
    previous  member id -> its current target assignment (topic id -> partitions)

and returns member id -> {topic id: frozenset(partitions)} for every member (possibly empty).

* `uniform` (the default, Kafka's UniformAssignor): every partition of a subscribed topic goes to
  one member subscribed to it, the counts per member differ by at most one where subscriptions
  allow it, and a partition stays with its previous owner unless balance requires a move
  (sticky: previous ownership is kept, new partitions go to the least loaded eligible member,
  then partitions move one at a time from the most to the least loaded until balanced).
* `range` (Kafka's RangeAssignor, server side): per topic, the subscribed members sorted by id
  each get a contiguous range; the first `n % m` members get one partition more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set

Assignment = dict[bytes, frozenset[int]]
TopicInfo = tuple[bytes, int]
Assignor = Callable[[Mapping[str, Set[str]], Mapping[str, TopicInfo], Mapping[str, Assignment]],
                    dict[str, Assignment]]


def _freeze(owned: dict[str, dict[bytes, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in owned.items()}


def uniform(members: Mapping[str, Set[str]], topics: Mapping[str, TopicInfo],
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    name_of = {tid: name for name, (tid, _) in topics.items()}
    size = {tid: n for tid, n in topics.values()}
    out: dict[str, dict[bytes, set[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    taken: set[tuple[bytes, int]] = set()

    def give(m: str, tid: bytes, p: int) -> None:
        out[m].setdefault(tid, set()).add(p)
        count[m] += 1
        taken.add((tid, p))

    # 1. Keep what each member had, where the partition still exists and it still subscribes.
    for m in sorted(members):
        for tid, parts in (previous.get(m) or {}).items():
            name = name_of.get(tid)
            if name is None or name not in members[m]:
                continue
            for p in sorted(parts):
                if p < size[tid] and (tid, p) not in taken:
                    give(m, tid, p)

    # 2. Unowned partitions go to the least loaded subscribed member.
    for name in sorted(topics):
        tid, n = topics[name]
        subs = sorted(m for m in members if name in members[m])
        if not subs:
            continue
        for p in range(n):
            if (tid, p) not in taken:
                give(min(subs, key=lambda m: (count[m], m)), tid, p)

    # 3. Move partitions one at a time from loaded members to members with 2+ fewer.
    moved = True
    while moved:
        moved = False
        for a in sorted(members, key=lambda m: (-count[m], m)):
            for b in sorted((m for m in members if count[m] <= count[a] - 2), key=lambda m: (count[m], m)):
                movable = [(tid, p) for tid, ps in out[a].items() if name_of[tid] in members[b] for p in ps]
                if not movable:
                    continue
                tid, p = max(movable)
                out[a][tid].discard(p)
                count[a] -= 1
                out[b].setdefault(tid, set()).add(p)
                count[b] += 1
                moved = True
                break
            if moved:
                break
    return _freeze(out)


def range_(members: Mapping[str, Set[str]], topics: Mapping[str, TopicInfo],
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    out: dict[str, dict[bytes, set[int]]] = {m: {} for m in members}
    for name in sorted(topics):
        tid, n = topics[name]
        subs = sorted(m for m in members if name in members[m])
        if not subs:
            continue
        q, r = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            k = q + (1 if i < r else 0)
            if k:
                out[m][tid] = set(range(start, start + k))
            start += k
    return _freeze(out)


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
