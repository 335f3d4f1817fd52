"""Fetch sessions (KIP-227), the bookkeeping: which request opens, continues or closes a
session, what an incremental fetch reads and what its answer carries; eviction with an
injected clock."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.fetch_sessions import FetchSessionCache


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fp(index: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20,
                           current_leader_epoch=3, log_start_offset=-1)


def req(session_id: int, epoch: int, topics: dict[str, list[SimpleNamespace]],
        forgotten: dict[str, list[int]] | None = None) -> SimpleNamespace:
    return SimpleNamespace(session_id=session_id, session_epoch=epoch,
                           topics=[SimpleNamespace(topic=t, partitions=ps) for t, ps in topics.items()],
                           forgotten_topics_data=[SimpleNamespace(topic=t, partitions=ps)
                                                  for t, ps in (forgotten or {}).items()])


def entry(index: int, hw: int, records: bytes = b"", error: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": 0, "records": records}


def read(topics: list[SimpleNamespace], hws: dict[tuple[str, int], int],
         data: set[tuple[str, int]] = frozenset()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    """What the fetch handler would answer for these partitions."""
    return [{"topic": t.topic, "partitions": [entry(p.partition, hws[(t.topic, p.partition)],
                                                    b"x" if (t.topic, p.partition) in data else b"")
                                              for p in t.partitions]} for t in topics]


def names(responses: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(t["topic"], p["partition_index"]) for t in responses for p in t["partitions"]]


def test_sessionless_fetch_is_answered_whole_with_session_zero() -> None:
    cache = FetchSessionCache()
    plan = cache.plan(req(0, -1, {"t": [fp(0, 5), fp(1, 7)]}), privileged=True)
    assert plan.error == ErrorCode.NONE and plan.session_id == 0 and len(cache) == 0
    hws = {("t", 0): 5, ("t", 1): 7}
    assert names(plan.answer(read(plan.topics, hws))) == [("t", 0), ("t", 1)]


def test_a_session_answers_only_what_changed_and_remembers_positions() -> None:
    cache = FetchSessionCache()
    hws = {("t", p): 10 for p in range(3)}
    full = cache.plan(req(0, 0, {"t": [fp(0, 10), fp(1, 10), fp(2, 10)]}), privileged=True)
    sid = full.session_id
    assert sid > 0
    assert names(full.answer(read(full.topics, hws))) == [("t", 0), ("t", 1), ("t", 2)]

    # Nothing changed: the fetcher names no partition, the leader reads all three, answers none.
    inc = cache.plan(req(sid, 1, {}), privileged=True)
    assert inc.incremental and [(p.partition, p.fetch_offset) for p in inc.topics[0].partitions] == [
        (0, 10), (1, 10), (2, 10)]
    assert inc.answer(read(inc.topics, hws)) == []

    # Partition 1 got a record; partition 2's high watermark moved.
    hws[("t", 2)] = 11
    inc = cache.plan(req(sid, 2, {}), privileged=True)
    assert names(inc.answer(read(inc.topics, hws, {("t", 1)}))) == [("t", 1), ("t", 2)]

    # The fetcher appended partition 1's record: it sends its new position only.
    inc = cache.plan(req(sid, 3, {"t": [fp(1, 11)]}), privileged=True)
    assert [(p.partition, p.fetch_offset) for p in inc.topics[0].partitions] == [(0, 10), (1, 11), (2, 10)]
    assert inc.answer(read(inc.topics, hws)) == []

    # An error is always answered (and told again after it clears).
    inc = cache.plan(req(sid, 4, {}), privileged=True)
    errs = read(inc.topics, hws)
    errs[0]["partitions"][0] = entry(0, -1, error=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert names(inc.answer(errs)) == [("t", 0)]
    inc = cache.plan(req(sid, 5, {}), privileged=True)
    assert names(inc.answer(read(inc.topics, hws))) == [("t", 0)]

    # Forgotten partitions leave the session; new ones join it.
    inc = cache.plan(req(sid, 6, {"u": [fp(0, 0)]}, forgotten={"t": [0, 2]}), privileged=True)
    assert [(t.topic, [p.partition for p in t.partitions]) for t in inc.topics] == [("t", [1]), ("u", [0])]


def test_wrong_epoch_unknown_session_and_close() -> None:
    cache = FetchSessionCache()
    sid = cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=False).session_id
    assert cache.plan(req(sid, 2, {}), privileged=False).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.plan(req(sid + 100, 1, {}), privileged=False).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.plan(req(sid, 1, {}), privileged=False).error == ErrorCode.NONE  # the right one still works
    closed = cache.plan(req(sid, -1, {"t": [fp(0, 0)]}), privileged=False)
    assert closed.session_id == 0 and cache.get(sid) is None
    again = cache.plan(req(sid, 0, {"t": [fp(0, 0)]}), privileged=False)  # close and open a new one
    assert again.session_id not in (0, sid)


def test_a_full_cache_evicts_only_idle_sessions_and_keeps_followers_from_consumers() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_slots=2, eviction_ms=120_000, clock=clock)
    follower = cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=True).session_id
    clock.now = 1
    consumer = cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=False).session_id
    assert follower and consumer
    assert cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=False).session_id == 0  # full, none idle
    clock.now = 200
    # A consumer may not take a follower's slot: it takes the idle consumer's.
    third = cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=False).session_id
    assert third and cache.get(consumer) is None and cache.get(follower) is not None
    clock.now = 400
    fourth = cache.plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=True).session_id  # a follower may
    assert fourth and cache.get(follower) is None
    assert FetchSessionCache(max_slots=0).plan(req(0, 0, {"t": [fp(0, 0)]}), privileged=True).session_id == 0


def test_the_fetcher_side_names_only_what_changed() -> None:
    from samsa.server.replica_fetcher import FetchSessionState

    s = FetchSessionState()
    wanted = {("t", 0): (10, 3, 0, 1 << 20), ("t", 1): (20, 3, 0, 1 << 20)}
    sid, epoch, named, forgotten = s.request(wanted)
    assert (sid, epoch, named, forgotten) == (0, 0, wanted, [])
    s.answered(42, epoch, named, forgotten)  # the leader opened session 42
    assert s.request(wanted) == (42, 1, {}, [])
    wanted[("t", 1)] = (25, 3, 0, 1 << 20)  # appended what partition 1 brought
    wanted[("u", 0)] = (0, 1, 0, 1 << 20)  # a partition joins
    del wanted[("t", 0)]  # one leaves (paused, truncating, unfollowed)
    sid, epoch, named, forgotten = s.request(wanted)
    assert (sid, epoch, sorted(named), forgotten) == (42, 1, [("t", 1), ("u", 0)], [("t", 0)])
    s.answered(42, epoch, named, forgotten)
    assert s.request(wanted) == (42, 2, {}, [])
    s.reset()  # a new connection, or the leader lost the session
    assert s.request(wanted)[:2] == (42, 0)  # closes session 42, opens a new one, names everything
    s.answered(0, 0, wanted, [])  # a leader with a full cache keeps no session: full fetches go on
    assert s.request(wanted) == (0, 0, wanted, [])


def test_a_session_opened_with_topic_ids_is_keyed_by_id_and_refuses_names() -> None:
    """Fetch v13+ (KIP-516): the session's partitions are (topic id, partition); an incremental
    fetch that names topics the other way than the session was opened is
    FETCH_SESSION_TOPIC_ID_ERROR, as in Kafka."""
    cache = FetchSessionCache()
    tid = bytes(range(16))
    plan = cache.plan(req(0, 0, {tid: [fp(0, 5)]}), privileged=False, uses_ids=True)  # type: ignore[dict-item]
    sid = plan.session_id
    assert sid and list(plan.session.partitions) == [(tid, 0)]  # type: ignore[union-attr]
    assert cache.plan(req(sid, 1, {"t": [fp(0, 6)]}), privileged=False).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # (the session was not advanced by the refused fetch)
    again = cache.plan(req(sid, 1, {tid: [fp(0, 6)]}), privileged=False, uses_ids=True)  # type: ignore[dict-item]
    assert again.error == ErrorCode.NONE and [t.topic for t in again.topics] == [tid]
    named = cache.plan(req(0, 0, {"t": [fp(0, 5)]}), privileged=False).session_id
    assert cache.plan(req(named, 1, {}), privileged=False, uses_ids=True).error == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
