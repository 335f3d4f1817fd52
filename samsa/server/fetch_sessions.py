"""Fetch sessions (KIP-227): a fetcher sends only what changed, the leader answers only what changed.

Without a session, every fetch names every partition it wants and every answer carries an
entry for each, data or not. A follower of 3,000 partitions then encodes, sends and decodes
3,000 entries per round trip, and so does its leader, even when one partition got a record.

How it works. A fetch says which session it belongs to (`session_id`, `session_epoch`):

    session_id  epoch    meaning
    0           -1       no session: a full fetch, as before (answered with session id 0)
    0            0       a full fetch that opens a session: every partition is answered,
                         and the answer's session id names the new session
    N            0       the same, after closing session N
    N           -1       close session N; a full fetch without a session
    N           k > 0    an incremental fetch in session N, the k-th since it opened: the
                         request names only the partitions whose fetch position changed or
                         that join the session (`forgotten_topics_data` leave it); the
                         others keep the position the session remembers

An incremental answer names only the partitions with something new: records, an error, or a
high watermark, last stable offset or log start offset other than what the session last
sent. An unknown session is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
INVALID_FETCH_SESSION_EPOCH (top-level errors); the fetcher then starts a new session.

From Fetch v13 (KIP-516) requests name topics by id, and a session opened so keys its
partitions by (topic id, partition), as Kafka's do: a topic deleted and created again under the
same name is another topic to it. An incremental fetch must use topic ids exactly when the
session does (a fetcher that changed versions mid-session): FETCH_SESSION_TOPIC_ID_ERROR
otherwise, as in Kafka. (`topic` below is the key: a name, or a topic id's 16 bytes.)

The cache holds `max.incremental.fetch.session.cache.slots` sessions. A new session that finds
it full may take the slot of the least recently used one, if that one has been idle for two
minutes (Kafka's fixed eviction time; a follower's session may only be taken by another
follower's), else it is not cached: the answer's session id is 0 and the fetcher goes on
with full fetches. This module is the cache and the bookkeeping; `handlers/fetch.py`
reads the partitions it names and hands the answer back to be filtered.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from samsa.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1

TP = tuple[str | bytes, int]  # (topic name, or topic id from Fetch v13, partition)


@dataclass
class CachedPartition:
    """What the session knows of one partition: the fetcher's position, and what it was last told."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's (a follower's)
    sent_hw: int | None = None
    sent_lso: int | None = None
    sent_log_start: int | None = None

    def request_view(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(partition=index, fetch_offset=self.fetch_offset,
                               partition_max_bytes=self.partition_max_bytes,
                               current_leader_epoch=self.current_leader_epoch, log_start_offset=self.log_start_offset,
                               last_fetched_epoch=-1)


@dataclass
class FetchSession:
    id: int
    privileged: bool  # a follower's (replica fetches are never evicted for a consumer's)
    partitions: OrderedDict[TP, CachedPartition]
    epoch: int = 1  # the epoch the next incremental fetch must carry
    last_used: float = 0.0
    created: float = 0.0
    uses_ids: bool = False  # opened by a Fetch v13+: its partitions are keyed by topic id


@dataclass
class FetchPlan:
    """What to read for one fetch, and how to answer it."""

    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None  # None: answer with session id 0, every partition
    incremental: bool = False
    topics: list[SimpleNamespace] = field(default_factory=list)  # the request's shape: t.topic, t.partitions

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID

    def answer(self, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The entries to send: all of them, or in an incremental fetch the ones with news;
        the session remembers what was sent."""
        session = self.session
        if session is None:
            return responses
        out = []
        for t in responses:
            parts = []
            for p in t["partitions"]:
                cached = session.partitions.get((t["topic"], p["partition_index"]))
                if cached is None:
                    parts.append(p)
                    continue
                news = (not self.incremental or p["error_code"] != 0 or p.get("records")
                        or cached.sent_hw != p["high_watermark"] or cached.sent_lso != p["last_stable_offset"]
                        or cached.sent_log_start != p["log_start_offset"])
                if p["error_code"] == 0:
                    cached.sent_hw, cached.sent_lso = p["high_watermark"], p["last_stable_offset"]
                    cached.sent_log_start = p["log_start_offset"]
                else:  # told again next time, whatever it is then
                    cached.sent_hw = cached.sent_lso = cached.sent_log_start = None
                if news:
                    parts.append(p)
            if parts:
                out.append({**t, "partitions": parts})
        return out


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_slots = max_slots
        self.eviction_s = eviction_ms / 1000
        self._clock = clock
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def _touch(self, s: FetchSession) -> None:
        s.last_used = self._clock()
        self._sessions.move_to_end(s.id)

    def _new(self, privileged: bool, partitions: OrderedDict[TP, CachedPartition],
             uses_ids: bool = False) -> FetchSession | None:
        now = self._clock()
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots:
            victim = next((s for s in self._sessions.values()
                           if now - s.last_used >= self.eviction_s and (privileged or not s.privileged)), None)
            if victim is None:
                return None
            del self._sessions[victim.id]
        sid = next(self._ids)
        while sid in self._sessions or sid == INVALID_SESSION_ID or sid > 0x7FFFFFFF:
            if sid > 0x7FFFFFFF:
                self._ids = itertools.count(1)
            sid = next(self._ids)
        s = FetchSession(sid, privileged, partitions, epoch=1, last_used=now, created=now, uses_ids=uses_ids)
        self._sessions[sid] = s
        return s

    def plan(self, req: Any, privileged: bool, uses_ids: bool = False) -> FetchPlan:
        """Work out a fetch request's session (see the module docstring); `uses_ids`: the
        request names topics by id (v13+), its topics' `topic` being the id."""
        session_id = getattr(req, "session_id", INVALID_SESSION_ID) or INVALID_SESSION_ID
        epoch = getattr(req, "session_epoch", FINAL_EPOCH)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch, maybe closing a session first
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            plan = FetchPlan(topics=list(req.topics))
            if epoch == INITIAL_EPOCH:
                parts: OrderedDict[TP, CachedPartition] = OrderedDict()
                for t in req.topics:
                    for fp in t.partitions:
                        parts[(t.topic, fp.partition)] = _cached(fp)
                plan.session = self._new(privileged, parts, uses_ids)
            return plan
        s = self._sessions.get(session_id)
        if s is None:
            return FetchPlan(error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != s.epoch:
            return FetchPlan(error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if s.uses_ids != uses_ids:
            return FetchPlan(error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        for t in req.topics:
            for fp in t.partitions:
                key = (t.topic, fp.partition)
                old = s.partitions.get(key)
                new = _cached(fp)
                if old is not None:  # what the fetcher was told still stands
                    new.sent_hw, new.sent_lso, new.sent_log_start = old.sent_hw, old.sent_lso, old.sent_log_start
                s.partitions[key] = new
        for t in getattr(req, "forgotten_topics_data", None) or []:
            for index in t.partitions:
                s.partitions.pop((t.topic, index), None)
        s.epoch = s.epoch + 1 if s.epoch < 0x7FFFFFFF else 1
        self._touch(s)
        return FetchPlan(session=s, incremental=True, topics=_as_topics(s.partitions.items()))


def _cached(fp: Any) -> CachedPartition:
    return CachedPartition(fp.fetch_offset, fp.partition_max_bytes, getattr(fp, "current_leader_epoch", -1),
                           getattr(fp, "log_start_offset", -1))


def _as_topics(items: Iterable[tuple[TP, CachedPartition]]) -> list[SimpleNamespace]:
    by_topic: dict[str | bytes, list[SimpleNamespace]] = {}
    for (topic, index), c in items:
        by_topic.setdefault(topic, []).append(c.request_view(index))
    return [SimpleNamespace(topic=t, partitions=ps) for t, ps in by_topic.items()]
