"""The broker's metrics in Prometheus' text exposition format (0.0.4): what GET /metrics answers.

Names follow Kafka's JMX metrics as the Prometheus JMX exporter's common Kafka rules render
them (`kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t` is
`kafka_server_brokertopicmetrics_messagesin_total{topic="t"}`); consumer-group offsets and lag
take kafka_exporter's names; the event loop's are Samsa's own. docs/metrics.md has the table of
every family (a test checks the names served against it).

How it works: `render()` reads the counters where the work keeps them (`metrics.py`) and the
broker's state as it is (partitions, ISRs, groups, listeners), and writes the text in one list
of strings, joined once. Nothing is kept between scrapes. The per-partition and per-group
sections yield to the event loop every few thousand lines, so a scrape of 10,000 partitions
does not hold the loop for its whole length; a section whose numbers must agree with each other
(each topic's counters and their total) is written without yielding.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.controller.controller import Controller
from samsa.server.cluster import ClusterView
from samsa.server.group_manager import GroupManager
from samsa.server.isr_manager import IsrManager
from samsa.server.loop_monitor import LoopMonitor
from samsa.server.metrics import RequestMetrics, TopicStats, error_name
from samsa.server.network import Listener
from samsa.server.purgatory import Purgatory
from samsa.server.replica_manager import ReplicaManager
from samsa.server.topics import Topic

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
YIELD_EVERY = 2000  # partitions or group offsets written between two turns given to the loop

_BTM = "kafka_server_brokertopicmetrics_"
# BrokerTopicMetrics: (family, TopicStats field, help, per topic too)
_TOPIC_COUNTERS = (
    ("messagesin_total", "messages_in", "Records appended as leader (offsets taken, control records included)",
     True),
    ("bytesin_total", "bytes_in", "Record-batch bytes appended as leader", True),
    ("bytesout_total", "bytes_out", "Record-batch bytes sent to consumers", True),
    ("failedproducerequests_total", "failed_produce",
     "Partitions of produce requests that failed as Kafka counts a failure (not its known errors)", True),
    ("failedfetchrequests_total", "failed_fetch",
     "Partitions of fetch requests that failed as Kafka counts a failure (not its known errors)", True),
    ("totalproducerequests_total", "produce_requests", "Partitions named by produce requests", True),
    ("totalfetchrequests_total", "fetch_requests", "Partitions read by fetch requests (consumers and followers)",
     True),
    ("replicationbytesin_total", "replication_bytes_in", "Record-batch bytes appended as follower", False),
    ("replicationbytesout_total", "replication_bytes_out", "Record-batch bytes sent to followers", False),
)
_HISTOGRAMS = (  # in the order of metrics.TIMES
    ("requestqueuetimems", "From the read that brought the request to its handler's start (ms)"),
    ("localtimems", "The handler's own run, decoding and encoding included (ms)"),
    ("remotetimems", "Waiting in the purgatory (acks=all, long-poll fetch, group writes) or on the metadata store "
                     "(ms)"),
    ("responsequeuetimems", "A ready answer waiting for the answers before it on its connection (ms)"),
    ("responsesendtimems", "From handing the answer to the socket until its last byte was taken (ms)"),
    ("totaltimems", "From the read that brought the request to its answer's last byte sent (ms)"),
)
_CLASSIC_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Empty", "Dead")
_CONSUMER_STATES = ("empty", "assigning", "reconciling", "stable", "dead")


@dataclass
class ScrapeSources:
    """What a scrape reads of the broker (built once, when the broker's services exist)."""

    node_id: int
    replicas: ReplicaManager
    topics: dict[str, Topic]
    listeners: list[Listener]
    requests: RequestMetrics
    isr: IsrManager
    controller: Controller
    cluster: ClusterView
    groups: GroupManager
    purgatory: Purgatory
    loop_monitor: LoopMonitor | None


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    return str(v) if isinstance(v, int) else repr(float(v))


class _Text:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def family(self, name: str, kind: str, text: str) -> None:
        self.parts.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n")

    def one(self, name: str, kind: str, text: str, value: float, labels: str = "") -> None:
        self.parts.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n{name}{labels} {_num(value)}\n")

    def histogram(self, name: str, labels: str, bounds: Iterable[float], counts: list[int], total: float) -> None:
        """One histogram's samples (`labels`: its own, without braces, or empty)."""
        sep = "," if labels else ""
        out = self.parts
        n = 0
        for bound, c in zip(bounds, counts):
            n += c
            out.append(f'{name}_bucket{{{labels}{sep}le="{bound!r}"}} {n}\n')
        n += counts[-1]
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {n}\n')
        braces = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{braces} {total!r}\n{name}_count{braces} {n}\n")


class Exposition:
    def __init__(self, sources: ScrapeSources, clock: Callable[[], float] = time.time) -> None:
        self.s = sources
        self._start_time = _process_start_time(clock)
        self.last_render_s = 0.0  # how long the previous rendering took (wall time, its yields included)

    async def render(self) -> bytes:
        """The whole text, as bytes."""
        started = time.perf_counter()
        t = _Text()
        self._topic_metrics(t)
        self._request_metrics(t)
        self._replica_manager(t)
        self._controller(t)
        self._network(t)
        self._event_loop(t)
        self._process(t)
        await self._groups(t)
        await self._logs(t)
        t.one("samsa_metrics_render_seconds", "gauge", "How long the previous rendering of this text took (s)",
              self.last_render_s)
        text = "".join(t.parts).encode()
        self.last_render_s = time.perf_counter() - started
        return text

    # -- sections -----------------------------------------------------------------------------

    def _topic_metrics(self, t: _Text) -> None:
        stats = self.s.replicas.topic_stats
        topics = sorted(stats.topics.items())
        total = TopicStats()
        total.add(stats.retired)
        for _, st in topics:
            total.add(st)
        for family, field, text, per_topic in _TOPIC_COUNTERS:
            name = _BTM + family
            t.family(name, "counter", text + " (without a topic label: all topics)")
            parts = t.parts
            if per_topic:
                for topic, st in topics:
                    parts.append(f'{name}{{topic="{topic}"}} {getattr(st, field)}\n')
            parts.append(f"{name} {getattr(total, field)}\n")

    def _request_metrics(self, t: _Text) -> None:
        stats = [r for r in self.s.requests.all() if any(r.versions)]
        name = "kafka_network_requestmetrics_requests_total"
        t.family(name, "counter", "Requests served, per request and version (Fetch also counts as FetchConsumer "
                                  "or FetchFollower)")
        for r in stats:
            for version, n in enumerate(r.versions):
                if n:
                    t.parts.append(f'{name}{{request="{r.name}",version="{version}"}} {n}\n')
        name = "kafka_network_requestmetrics_errors_total"
        t.family(name, "counter", "Error codes in responses, per request and error (NONE not counted)")
        for r in stats:
            for code, n in sorted(r.errors.items()):
                t.parts.append(f'{name}{{request="{r.name}",error="{error_name(code)}"}} {n}\n')
        for i, (family, text) in enumerate(_HISTOGRAMS):
            name = "kafka_network_requestmetrics_" + family
            t.family(name, "histogram", text)
            for r in stats:
                h = r.histogram(i)
                t.histogram(name, f'request="{r.name}"', h.bounds, h.counts, h.sum)

    def _replica_manager(self, t: _Text) -> None:
        replicas, topics = self.s.replicas, self.s.topics
        leaders = under = under_min = at_min = 0
        for p in replicas.partitions.values():
            if not p.is_leader:
                continue
            leaders += 1
            isr = len(p.isr)
            if isr < len(p.replicas):
                under += 1
            topic = topics.get(p.topic)
            min_isr = topic.min_insync_replicas if topic is not None else 1
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
        rm = "kafka_server_replicamanager_"
        t.one(rm + "partitioncount", "gauge", "Partitions hosted here (leader or follower)", len(replicas.partitions))
        t.one(rm + "leadercount", "gauge", "Partitions led here", leaders)
        t.one(rm + "underreplicatedpartitions", "gauge", "Partitions led here whose ISR is smaller than their "
                                                          "replicas", under)
        t.one(rm + "underminisrpartitioncount", "gauge", "Partitions led here whose ISR is below "
                                                         "min.insync.replicas", under_min)
        t.one(rm + "atminisrpartitioncount", "gauge", "Partitions led here whose ISR is exactly "
                                                      "min.insync.replicas", at_min)
        t.one(rm + "offlinereplicacount", "gauge", "Replicas here whose log dir failed", len(replicas.offline))
        t.one(rm + "isrshrinks_total", "counter", "ISR changes written by this leader that removed followers",
              self.s.isr.shrinks)
        t.one(rm + "isrexpands_total", "counter", "ISR changes written by this leader that added followers",
              self.s.isr.expands)
        t.one("samsa_purgatory_delayed_operations", "gauge", "Requests waiting in the purgatory (acks=all, "
                                                             "long-poll fetches, group writes, ...)",
              self.s.purgatory.delayed)

    def _controller(self, t: _Text) -> None:
        c, view = self.s.controller, self.s.cluster
        offline = topics = partitions = 0
        if c.active:
            live = c.live or set()
            for name, a in c.assignments.items():
                topics += 1
                for p in a.partitions:
                    partitions += 1
                    st = view.state(name, p)
                    if st is None or st.leader < 0 or st.leader not in live:
                        offline += 1
        kc = "kafka_controller_kafkacontroller_"
        t.one(kc + "activecontrollercount", "gauge", "1 on the active controller, else 0", 1 if c.active else 0)
        t.one(kc + "offlinepartitionscount", "gauge", "Partitions without a live leader (active controller only)",
              offline)
        t.one(kc + "globaltopiccount", "gauge", "Topics in the cluster (active controller only)", topics)
        t.one(kc + "globalpartitioncount", "gauge", "Partitions in the cluster (active controller only)", partitions)
        cs = "kafka_controller_controllerstats_"
        t.one(cs + "leaderelectionrateandtimems_count", "counter", "Partitions whose leader this controller moved "
                                                                   "to another live broker", c.leader_elections)
        t.one(cs + "uncleanleaderelections_total", "counter", "Of those, leaders chosen outside the ISR",
              c.unclean_leader_elections)

    def _network(self, t: _Text) -> None:
        ss = "kafka_server_socket_server_metrics_"
        rows = [(lst, f'{{listener="{lst.name}",networkProcessor="0"}}') for lst in self.s.listeners]
        t.family(ss + "connection_count", "gauge", "Open client connections, per listener")
        t.parts += [f"{ss}connection_count{labels} {len(lst.connections)}\n" for lst, labels in rows]
        t.family(ss + "connection_creation_total", "counter", "Connections accepted, per listener")
        t.parts += [f"{ss}connection_creation_total{labels} {lst.accepted}\n" for lst, labels in rows]
        t.family(ss + "connection_close_total", "counter", "Connections closed, per listener")
        t.parts += [f"{ss}connection_close_total{labels} {lst.accepted - len(lst.connections)}\n"
                    for lst, labels in rows]

    def _event_loop(self, t: _Text) -> None:
        mon = self.s.loop_monitor
        if mon is None:
            return
        name = "samsa_eventloop_lag_seconds"
        t.family(name, "histogram", "How late the event loop ran a timer due every 20 ms (its lag)")
        t.histogram(name, "", mon.lags.bounds, mon.lags.counts, mon.lags.sum)
        t.one("samsa_eventloop_lag_max_seconds", "gauge", "The largest event-loop lag of the last 10 to 20 s",
              mon.recent_max_s)
        t.one("samsa_eventloop_stalls_total", "counter", f"Event-loop stalls over {mon.threshold_s * 1000:.0f} ms "
                                                         "(each logged with what ran)", mon.stalls)

    def _process(self, t: _Text) -> None:
        times = os.times()
        t.one("process_cpu_seconds_total", "counter", "User and system CPU time of the broker process (s)",
              times.user + times.system)
        try:
            with open("/proc/self/statm", "rb") as f:
                vm, rss = (int(x) for x in f.read().split()[:2])
            page = os.sysconf("SC_PAGE_SIZE")
            t.one("process_virtual_memory_bytes", "gauge", "Virtual memory size (bytes)", vm * page)
            t.one("process_resident_memory_bytes", "gauge", "Resident set size (bytes)", rss * page)
            # (Linux 6.2+ gives the count as the directory's size: listing 3,000 fds took a sixth of a scrape)
            fds = os.stat("/proc/self/fd").st_size or len(os.listdir("/proc/self/fd"))
            t.one("process_open_fds", "gauge", "Open file descriptors", fds)
        except OSError:  # (not Linux)
            pass
        t.one("process_max_fds", "gauge", "The limit of open file descriptors",
              resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        t.one("process_start_time_seconds", "gauge", "When the process started (Unix time, s)", self._start_time)

    async def _groups(self, t: _Text) -> None:
        shards = list(self.s.groups.shards.values())
        classic = dict.fromkeys(_CLASSIC_STATES, 0)
        consumer = dict.fromkeys(_CONSUMER_STATES, 0)
        offsets: list[str] = []
        lags: list[str] = []
        members: list[str] = []
        committed = 0
        replicas = self.s.replicas
        for shard in shards:  # (copies of the dicts: the loop runs between the yields below)
            for gid, cg in list(shard.consumer_groups.items()):
                consumer[cg.state.lower()] = consumer.get(cg.state.lower(), 0) + 1
                members.append(f'kafka_consumergroup_members{{consumergroup="{escape(gid)}"}} {len(cg.members)}\n')
            for gid, g in list(shard.groups.items()):
                label = escape(gid)
                if gid not in shard.consumer_groups:
                    classic[g.state.value] += 1
                    members.append(f'kafka_consumergroup_members{{consumergroup="{label}"}} {len(g.members)}\n')
                for (topic, index), v in sorted(g.offsets.items()):
                    committed += 1
                    labels = f'{{consumergroup="{label}",topic="{topic}",partition="{index}"}}'
                    offsets.append(f"kafka_consumergroup_current_offset{labels} {v.offset}\n")
                    p = replicas.get(topic, index)
                    if p is not None:
                        lags.append(f"kafka_consumergroup_lag{labels} {p.hw - v.offset}\n")
                    if committed % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
        gm = "kafka_server_groupmetadatamanager_"
        t.one(gm + "numgroups", "gauge", "Classic groups coordinated here", sum(classic.values()))
        for state in _CLASSIC_STATES:
            t.one(gm + "numgroups" + state.lower(), "gauge", f"Classic groups coordinated here in state {state}",
                  classic[state])
        t.one(gm + "numoffsets", "gauge", "Committed offsets held here (classic and consumer groups)", committed)
        gc = "kafka_server_group_coordinator_metrics_"
        t.family(gc + "group_count", "gauge", "Groups coordinated here, per protocol")
        t.parts.append(f'{gc}group_count{{protocol="classic"}} {sum(classic.values())}\n'
                       f'{gc}group_count{{protocol="consumer"}} {sum(consumer.values())}\n')
        t.family(gc + "consumer_group_count", "gauge", "Consumer groups (KIP-848) coordinated here, per state")
        t.parts += [f'{gc}consumer_group_count{{state="{s}"}} {n}\n' for s, n in consumer.items()]
        done_classic, done_consumer = self.s.groups.rebalances()
        t.one(gc + "group_completed_rebalance_count", "counter", "Rebalances of classic groups completed here",
              done_classic)
        t.one(gc + "consumer_group_rebalance_count", "counter", "Rebalances (group epoch bumps) of consumer "
                                                                "groups here", done_consumer)
        t.family("kafka_consumergroup_members", "gauge", "Members of each group coordinated here")
        t.parts += members
        t.family("kafka_consumergroup_current_offset", "gauge", "Committed offset, per group, topic and partition "
                                                                "(kafka_exporter's name)")
        t.parts += offsets
        t.family("kafka_consumergroup_lag", "gauge", "High watermark minus committed offset, per group, topic and "
                                                     "partition, where this broker hosts the partition "
                                                     "(kafka_exporter's name)")
        t.parts += lags

    async def _logs(self, t: _Text) -> None:
        sizes: list[str] = []
        starts: list[str] = []
        ends: list[str] = []
        segments: list[str] = []
        for i, ((topic, index), p) in enumerate(sorted(self.s.replicas.partitions.items())):
            log = p.log
            labels = f'{{topic="{topic}",partition="{index}"}}'
            sizes.append(f"kafka_log_log_size{labels} {log.size_in_bytes}\n")
            starts.append(f"kafka_log_log_logstartoffset{labels} {log.log_start_offset}\n")
            ends.append(f"kafka_log_log_logendoffset{labels} {log.log_end_offset}\n")
            segments.append(f"kafka_log_log_numlogsegments{labels} {log.segment_count}\n")
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        for name, text, lines in (
                ("kafka_log_log_size", "Bytes of the partition's log here (every segment)", sizes),
                ("kafka_log_log_logstartoffset", "The log's first offset", starts),
                ("kafka_log_log_logendoffset", "The offset the next record appended here takes", ends),
                ("kafka_log_log_numlogsegments", "Segments of the log", segments)):
            t.family(name, "gauge", text)
            t.parts += lines


def _process_start_time(clock: Callable[[], float]) -> float:
    """The process's start (Unix time): from /proc when there is one, else now."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(b")") + 2:].split()[19])  # field 22, starttime
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration, IndexError):
        return clock()
