"""The broker's own counters, kept where the work happens; `prometheus.py` reads them at a scrape.

How it works. Everything here is plain integers, bumped in place where the work is done, and
nothing is computed or allocated per record:

* `TopicStats`, one per topic (Kafka's BrokerTopicMetrics): a leader append adds its record
  count and bytes (two additions per batch, `Partition._appended`); a produce or fetch adds one
  per partition it names (`total`), one per partition that failed the way Kafka counts a
  failure, and a fetch its bytes served. A partition holds its topic's `TopicStats`
  (`Partition.stats`), so the hot path looks nothing up. The all-topics totals are sums taken at
  scrape time plus what deleted topics had counted (`retired`): a total is always the sum of
  its topics and never goes back.
* `RequestStats`, one per request name (Kafka's RequestMetrics: `Produce`, `Metadata`, and
  for a fetch `FetchConsumer` or `FetchFollower`, whose sum is `Fetch`): requests per version,
  errors per code, and six histograms of where each request's time went; kept only when the
  Prometheus endpoint is on (`RequestMetrics.enabled`; the dispatcher counts, and
  `network.Connection` takes the time stamps). The topic counters are always kept: two
  additions per batch.

Request time, split as Kafka splits it (`record`):

    read ─ queue ─ handler start ─ local ─ answer made ─ remote ─ ready ─ response queue ─
        written to the socket ─ response send ─ last byte sent;   total = the whole span

* request queue: from the read that brought the request to its handler's start (the requests
  before it in the same read ran meanwhile; Samsa has no handler pool to queue for);
* local: the handler's own run, decoding and encoding included;
* remote: waiting in the purgatory (acks=all, a long-poll fetch, a group write) or on the
  metadata store, until the answer is made;
* response queue: a ready answer waiting for the answers before it on its connection (they go
  out in request order);
* response send: from handing the answer to the socket until its last byte was accepted by the
  kernel (longer when the client reads slowly).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

from samsa.protocol.errors import ErrorCode

# Histogram bucket upper bounds, in milliseconds (Kafka's request times are in ms): 0.1 ms to 30 s.
BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
              10000.0, 30000.0)
# Event-loop lag bucket upper bounds, in seconds.
LAG_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

PRODUCE, FETCH = 0, 1

# Errors Kafka does not count as a failed produce or fetch (ReplicaManager: "it is supposed to
# indicate un-expected failures of a broker"): the client's mistakes and the cluster's moves.
# Authorization failures and unknown topics never reach Kafka's count either.
NOT_A_PRODUCE_FAILURE = frozenset(int(c) for c in (
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))


class TopicStats:
    """One topic's BrokerTopicMetrics on this broker (see the module doc)."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "fetch_requests", "messages_in",
                 "produce_requests", "replication_bytes_in", "replication_bytes_out")

    def __init__(self) -> None:
        self.messages_in = 0  # records appended as leader (each batch's offsets, markers included)
        self.bytes_in = 0  # batch bytes appended as leader
        self.bytes_out = 0  # record bytes served to consumers
        self.produce_requests = 0  # partitions named by produce requests
        self.fetch_requests = 0  # partitions read by fetch requests (consumers' and followers')
        self.failed_produce = 0
        self.failed_fetch = 0
        self.replication_bytes_in = 0  # appended as follower
        self.replication_bytes_out = 0  # served to followers

    def add(self, other: TopicStats) -> None:
        for name in TopicStats.__slots__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class BrokerTopicStats:
    """Every topic's `TopicStats`; a topic's are created at its first use and retired (added to
    the totals' base) when the topic is deleted here."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.retired = TopicStats()

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def remove(self, name: str) -> None:
        stats = self.topics.pop(name, None)
        if stats is not None:
            self.retired.add(stats)

    def totals(self) -> TopicStats:
        total = TopicStats()
        total.add(self.retired)
        for stats in self.topics.values():
            total.add(stats)
        return total

    def unexpected_failure(self, api_key: int, topics: Iterable[tuple[str, int]]) -> None:
        """A produce or fetch whose handler failed with a bug (its connection closes): a failure
        for each (topic, partitions) it named, as Kafka counts an unexpected exception."""
        for name, partitions in topics:
            stats = self.topics.get(name)
            if stats is None:
                continue
            if api_key == PRODUCE:
                stats.failed_produce += partitions
            else:
                stats.failed_fetch += partitions


class Histogram:
    """A Prometheus histogram: counts per bucket (not cumulative; the exposition sums them) and
    the sum of the values observed."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = BUCKETS_MS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value


# The six request-time histograms of a `RequestStats`, in the order of its flat arrays.
TIMES = ("queue", "local", "remote", "response_queue", "send", "total")
_B = len(BUCKETS_MS) + 1  # buckets per histogram, +Inf included


class RequestStats:
    """Kafka's RequestMetrics of one request name (see the module doc): requests per version,
    error codes and their counts, and the six time histograms, flat: `counts[i * _B + b]` is
    bucket b (not cumulative) of histogram `TIMES[i]`, `sums[i]` its sum (ms)."""

    __slots__ = ("counts", "errors", "name", "sums", "versions")

    def __init__(self, name: str, max_version: int) -> None:
        self.name = name
        self.versions = [0] * (max_version + 1)  # requests per version
        self.errors: dict[int, int] = {}  # error code (not NONE) -> count in responses
        self.counts = [0] * (len(TIMES) * _B)
        self.sums = [0.0] * len(TIMES)

    def count(self, version: int) -> None:
        self.versions[version] += 1

    def histogram(self, i: int) -> Histogram:
        """Histogram `TIMES[i]` (a copy)."""
        h = Histogram()
        h.counts = self.counts[i * _B:(i + 1) * _B]
        h.sum = self.sums[i]
        return h

    def record(self, t0: float, t1: float, t2: float, t3: float, t4: float, t5: float) -> None:
        """One request's time stamps (perf_counter seconds): read, handler start, handler done,
        answer ready, written to the socket, last byte sent. (It runs for every request: six
        observations written out, one bisect each, no call.)"""
        c, s, b = self.counts, self.sums, BUCKETS_MS
        v = (t1 - t0) * 1000.0
        c[bisect_left(b, v)] += 1
        s[0] += v
        v = (t2 - t1) * 1000.0
        c[_B + bisect_left(b, v)] += 1
        s[1] += v
        v = (t3 - t2) * 1000.0
        c[2 * _B + bisect_left(b, v)] += 1
        s[2] += v
        v = (t4 - t3) * 1000.0
        c[3 * _B + bisect_left(b, v)] += 1
        s[3] += v
        v = (t5 - t4) * 1000.0
        c[4 * _B + bisect_left(b, v)] += 1
        s[4] += v
        v = (t5 - t0) * 1000.0
        c[5 * _B + bisect_left(b, v)] += 1
        s[5] += v

    def record_no_response(self, t0: float, t1: float, t2: float) -> None:
        """A request that gets no response (acks=0): queue, local and total time only."""
        c, s, b = self.counts, self.sums, BUCKETS_MS
        for i, v in ((0, (t1 - t0) * 1000.0), (1, (t2 - t1) * 1000.0), (5, (t2 - t0) * 1000.0)):
            c[i * _B + bisect_left(b, v)] += 1
            s[i] += v

    def add_errors(self, found: dict[int, int]) -> None:
        """A response's error codes (other than NONE) and their counts (`StructCodec.count_errors`)."""
        errors = self.errors
        for code, n in found.items():
            errors[code] = errors.get(code, 0) + n

    def add(self, other: RequestStats) -> None:
        """Count `other`'s requests here too (Fetch: FetchConsumer's and FetchFollower's)."""
        for i, n in enumerate(other.versions):
            self.versions[i] += n
        for code, n in other.errors.items():
            self.errors[code] = self.errors.get(code, 0) + n
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.sums = [a + b for a, b in zip(self.sums, other.sums)]


class RequestMetrics:
    """The `RequestStats` of every API the broker serves, by api key. A fetch is counted as
    FetchConsumer or FetchFollower only; `all()` makes Fetch their sum (as Kafka counts a
    fetch under both names), so a request is recorded once."""

    def __init__(self, apis: Iterable[tuple[int, int, int]], names: dict[int, str]) -> None:
        self.by_key: dict[int, RequestStats] = {key: RequestStats(names.get(key, str(key)), hi)
                                                for key, _, hi in apis}
        fetch = self.by_key.get(FETCH)
        hi = len(fetch.versions) - 1 if fetch is not None else 0
        self.fetch_consumer = RequestStats("FetchConsumer", hi)
        self.fetch_follower = RequestStats("FetchFollower", hi)
        self.enabled = False  # requests are counted and timed (the Prometheus endpoint is on)

    def all(self) -> list[RequestStats]:
        """Every request name's stats, Fetch made up at the call."""
        out = []
        for key, stats in self.by_key.items():
            if key == FETCH:
                stats = RequestStats(stats.name, len(stats.versions) - 1)
                stats.add(self.fetch_consumer)
                stats.add(self.fetch_follower)
            out.append(stats)
        return [*out, self.fetch_consumer, self.fetch_follower]


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"
