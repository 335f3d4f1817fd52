"""The broker console's poller: one thread that asks the cluster what the console shows.

While someone watches the console (`Published.demanded()`: an open console stream, a
`wait_until`, an /api/console request in the last minute) it polls every `interval_s`:

* with a confluent-kafka AdminClient (whose futures block, hence this thread, never an HTTP
  thread): Metadata (brokers, controller, leaders, replicas, ISR), DescribeTopics once per new
  topic name (the internal flag), ListOffsets earliest and latest (log start offsets, high
  watermarks), DescribeConfigs of every topic, ListGroups;
* with Samsa's own client, per live broker: DescribeLogDirs (replica sizes) and, where the
  broker offers it, Samsa's DescribeLogCleaner (API 10000) (librdkafka has no call for them);
  and per group coordinator: FindCoordinator, DescribeGroups (classic groups) or
  ConsumerGroupDescribe (KIP-848 groups), OffsetFetch (librdkafka's own calls for these can
  abort the process when a coordinator's connection drops, confluentinc/librdkafka#4605).

The requests of one poll are sent together and awaited together, each with `request_timeout_s`.
The answers become an `Observation`, and `console.build_view` the published view. Metadata
failing means the cluster is unreachable: the view says so (with librdkafka's reason) and keeps
the last good poll's data for reference. Any other failed request leaves its part empty and adds
a line to the view's `errors`. Nothing escapes the thread: an unexpected exception is logged and
shown as the view's error.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import struct
import threading
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import (
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from samsa.pipeline.dashboard import console
from samsa.pipeline.dashboard.console import (
    CleanerLog,
    ConfigInfo,
    GroupInfo,
    LogDirInfo,
    MemberInfo,
    Observation,
    PartitionInfo,
    TopicInfo,
)
from samsa.pipeline.dashboard.live import Published, wall_ms
from samsa.protocol.client_security import ClientSecurity
from samsa.protocol.errors import ErrorCode
from samsa.protocol.samsa_apis import DESCRIBE_LOG_CLEANER_KEY
from samsa.spark.client import SECURITY_PREFIXES, ClientError, SamsaClient

log = logging.getLogger(__name__)

_LIBRDKAFKA_LOG = logging.getLogger("samsa.pipeline.dashboard.console.librdkafka")
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
_LIBRDKAFKA_LOG.propagate = False

API_VERSIONS, DESCRIBE_LOG_DIRS = 18, 35
FIND_COORDINATOR, DESCRIBE_GROUPS, OFFSET_FETCH, CONSUMER_GROUP_DESCRIBE = 10, 15, 9, 69
_DOWN_CODES = (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE)
# confluent-kafka's ConsumerGroupState names -> Kafka's
_SOURCES = {0: "UNKNOWN_CONFIG", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
            3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 8: "GROUP_CONFIG"}
# How long an /api/console request keeps the poller polling without a stream open.
WANTED_S = 60.0


class ConsolePoller:
    def __init__(
        self,
        bootstrap: str,
        published: Published,
        *,
        interval_s: float = 3.0,
        request_timeout_s: float = 5.0,
        client_config: dict[str, Any] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.published = published
        self.interval_s = interval_s
        self.request_timeout_s = request_timeout_s
        self.wanted_s = WANTED_S  # (for the HTTP side: web.Console)
        self.first_poll_s = 2 * request_timeout_s + 1.0
        self._extra_config = dict(client_config or {})
        self._known: dict[int, tuple[str, int] | None] = {}
        self._internal: dict[str, bool] = {}
        self._api_keys: dict[tuple[str, int], set[int]] = {}
        self._all_configs: dict[str, list[dict[str, Any]]] = {}
        self._last_ok: dict[str, Any] | None = None
        self._down_reason: str | None = None
        self._all_down = False  # librdkafka said so; until Metadata is answered again
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dashboard-console", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end and join it (within a fraction of a second: waits are sliced)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def all_configs(self, topic: str) -> list[dict[str, Any]] | None:
        """Every config of `topic` as of the last poll (None: not known)."""
        return self._all_configs.get(topic)

    # -- the loop ----------------------------------------------------------------------------

    def _admin_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "samsa-dashboard-console",
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": self._on_error,
            "logger": _LIBRDKAFKA_LOG,
        }
        conf.update({k: v for k, v in self._extra_config.items() if k not in ("group.id", "enable.auto.commit",
                                                                              "auto.offset.reset")})
        return conf

    def _on_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._all_down = True
        elif err.code() in _DOWN_CODES:
            self._down_reason = re.sub(r" \(after \d+ms in state \w+.*\)$", "", err.str())

    def _raw_client(self) -> SamsaClient | str:
        """Samsa's own client with the dashboard's security settings, or why there is none."""
        props = {k: str(v) for k, v in self._extra_config.items() if k.startswith(SECURITY_PREFIXES)}
        try:
            return SamsaClient(self.bootstrap, timeout=self.request_timeout_s, client_id="samsa-dashboard-console",
                               security=ClientSecurity.from_properties(props))
        except (ClientError, ValueError) as e:
            return f"log dirs and the cleaner are not shown: {e}"

    def _run(self) -> None:
        admin = AdminClient(self._admin_config())
        raw = self._raw_client()
        try:
            while not self._stop.is_set():
                if not self.published.wait_demand(0.5):
                    continue
                started = time.monotonic()
                try:
                    view = self.poll(admin, raw)
                except Exception as e:  # noqa: BLE001 - the console must outlive any bad surprise
                    log.exception("dashboard console: unexpected error; continuing")
                    view = console.unreachable_view(self._last_ok, f"unexpected {type(e).__name__}: {e}", wall_ms(),
                                                    self.interval_s)
                if not self._stop.is_set():
                    self.published.publish(view)
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
        finally:
            if isinstance(raw, SamsaClient):
                raw.close()

    # -- one poll ------------------------------------------------------------------------------

    def poll(self, admin: AdminClient, raw: SamsaClient | str) -> dict[str, Any]:
        polled_ms = wall_ms()
        started = time.monotonic()
        timeout = self.request_timeout_s
        try:
            md = self._metadata(admin)
        except KafkaException as e:
            return console.unreachable_view(self._last_ok, self._down_reason or _reason(e), polled_ms,
                                            self.interval_s)
        self._down_reason = None
        self._all_down = False
        obs = Observation(polled_ms, cluster_id=md.cluster_id, controller=md.controller_id,
                          brokers={b.id: (str(b.host), b.port) for b in md.brokers.values()})
        live_tps = []
        for name, tm in md.topics.items():
            parts = []
            for pm in tm.partitions.values():
                parts.append(PartitionInfo(pm.id, pm.leader, tuple(pm.replicas), tuple(pm.isrs),
                                           None if pm.error is None else pm.error.name()))
                if pm.leader >= 0:
                    live_tps.append(TopicPartition(name, pm.id))
            obs.topics[name] = TopicInfo(name, False, tuple(parts), None if tm.error is None else tm.error.name())
        names = sorted(obs.topics)

        # Everything at once; then gather.
        new_names = [n for n in names if n not in self._internal]
        f_internal = admin.describe_topics(TopicCollection(new_names), request_timeout=timeout) if new_names else {}
        f_start = admin.list_offsets({tp: OffsetSpec.earliest() for tp in live_tps},
                                     request_timeout=timeout) if live_tps else {}
        f_end = admin.list_offsets({tp: OffsetSpec.latest() for tp in live_tps},
                                   request_timeout=timeout) if live_tps else {}
        f_configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names],
                                           request_timeout=timeout) if names else {}
        f_groups = admin.list_consumer_groups(request_timeout=timeout)
        self._raw_requests(raw, obs)

        self._wait([f_groups])
        groups = self._group_ids(f_groups, obs)
        self._wait([*f_internal.values(), *f_start.values(), *f_end.values(), *f_configs.values()])
        self._groups_raw(raw, groups, obs)

        for name, f in f_internal.items():
            result = _result(f)
            if not isinstance(result, KafkaException):
                self._internal[name] = bool(result.is_internal)
        obs.topics = {n: TopicInfo(t.name, self._internal.get(n, n.startswith("__")), t.partitions, t.error)
                      for n, t in obs.topics.items()}
        obs.log_start_offsets = self._offsets(f_start, "log start offsets", obs)
        obs.high_watermarks = self._offsets(f_end, "high watermarks", obs)
        self._configs(f_configs, obs)

        for b, addr in obs.brokers.items():
            self._known[b] = addr
        for t in obs.topics.values():
            for p in t.partitions:
                for r in p.replicas:
                    self._known.setdefault(r, None)
        obs.poll_ms = round((time.monotonic() - started) * 1000)
        view = console.build_view(obs, self._known, self.interval_s)
        self._last_ok = view
        return view

    def _metadata(self, admin: AdminClient) -> Any:
        """Metadata, asked in half-second slices so that stop is heard, and given up early once
        librdkafka reports every broker down (a cluster that refuses connections is told at once)."""
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                return admin.list_topics(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
            except KafkaException:
                admin.poll(0)  # serves the error callback: the reason (e.g. "Connection refused")
                if self._all_down or self._stop.is_set() or time.monotonic() >= deadline:
                    raise

    def _wait(self, futures: Iterable[concurrent.futures.Future[Any]]) -> None:
        """Until every future is done, the request timeout (plus a second) passes or stop is asked."""
        pending = set(futures)
        deadline = time.monotonic() + self.request_timeout_s + 1.0
        while pending and not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            _, pending = concurrent.futures.wait(pending, timeout=min(0.25, remaining))

    def _offsets(self, futures: dict[TopicPartition, concurrent.futures.Future[Any]], what: str,
                 obs: Observation) -> dict[tuple[str, int], int]:
        out = {}
        failed = []
        for tp, f in futures.items():
            result = _result(f)
            if isinstance(result, KafkaException):
                failed.append(f"{tp.topic}-{tp.partition} ({_reason(result)})")
            else:
                out[(tp.topic, tp.partition)] = int(result.offset)
        if failed:
            obs.errors.append(f"ListOffsets ({what}) failed for {_some(failed)}")
        return out

    def _configs(self, futures: dict[ConfigResource, concurrent.futures.Future[Any]], obs: Observation) -> None:
        failed = []
        for resource, f in futures.items():
            result = _result(f)
            if isinstance(result, KafkaException):
                failed.append(f"{resource.name} ({_reason(result)})")
                continue
            entries = sorted(result.values(), key=lambda e: e.name)
            obs.configs[resource.name] = [
                ConfigInfo(e.name, e.value, _source(e.source), bool(e.is_sensitive), bool(e.is_read_only))
                for e in entries]
        if failed:
            obs.errors.append(f"DescribeConfigs failed for {_some(failed)}")
        self._all_configs = {t: [c.as_dict() for c in cs] for t, cs in obs.configs.items()}

    def _group_ids(self, f_groups: concurrent.futures.Future[Any], obs: Observation) -> list[tuple[str, str]]:
        """(group id, "classic" or "consumer") of every group ListGroups found."""
        result = _result(f_groups)
        if isinstance(result, KafkaException):
            obs.errors.append(f"ListGroups failed: {_reason(result)}")
            return []
        for err in result.errors:
            obs.errors.append(f"ListGroups: {_reason(err)}")
        out = []
        for g in result.valid:
            kind = getattr(g, "type", None)
            out.append((g.group_id, kind.name.lower() if kind is not None and kind.name != "UNKNOWN" else "classic"))
        return sorted(out)

    def _groups_raw(self, raw: SamsaClient | str, groups: list[tuple[str, str]], obs: Observation) -> None:
        """Each group's description and committed offsets, asked of its coordinator with Samsa's
        own client: FindCoordinator, then per coordinator DescribeGroups (classic groups) or
        ConsumerGroupDescribe (KIP-848 groups) and OffsetFetch. (Not librdkafka's
        describe_consumer_groups / list_consumer_group_offsets: a coordinator's connection
        dropping under them, as when a broker dies, can abort the whole process,
        confluentinc/librdkafka#4605.)"""
        if not groups:
            return
        if isinstance(raw, str):
            obs.groups.extend(GroupInfo(g, "Unknown", kind, "", -1, (), {}, raw) for g, kind in groups)
            return
        kinds = dict(groups)
        coordinators: dict[str, tuple[int, tuple[str, int]] | str] = {}
        try:
            resp = self._any_live(raw, obs, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": list(kinds)})
            for c in resp.coordinators:
                coordinators[c.key] = ((c.node_id, (c.host, c.port)) if not c.error_code
                                       else f"FindCoordinator: {ErrorCode(c.error_code).name}")
        except ClientError as e:
            coordinators = dict.fromkeys(kinds, f"FindCoordinator: {e}")
        by_coordinator: dict[tuple[int, tuple[str, int]], list[str]] = {}
        for g in kinds:
            where = coordinators.get(g, "FindCoordinator: no answer")
            if isinstance(where, str):
                obs.groups.append(GroupInfo(g, "Unknown", kinds[g], "", -1, (), {}, where))
            else:
                by_coordinator.setdefault(where, []).append(g)
        for (node, addr), ids in sorted(by_coordinator.items()):
            if self._stop.is_set():
                return
            obs.groups.extend(self._describe_at(raw, node, addr, ids, kinds))

    def _describe_at(self, raw: SamsaClient, node: int, addr: tuple[str, int], ids: list[str],
                     kinds: dict[str, str]) -> list[GroupInfo]:
        described: dict[str, tuple[str, str, tuple[MemberInfo, ...]] | str] = {}
        committed: dict[str, dict[tuple[str, int], int]] = {g: {} for g in ids}
        errors: dict[str, list[str]] = {g: [] for g in ids}
        classic = [g for g in ids if kinds[g] != "consumer"]
        consumer = [g for g in ids if kinds[g] == "consumer"]
        try:
            if classic:
                for d in raw.request(addr, DESCRIBE_GROUPS, 5, {"groups": classic,
                                                               "include_authorized_operations": False}).groups:
                    described[d.group_id] = (ErrorCode(d.error_code).name if d.error_code else (
                        d.group_state, d.protocol_data, tuple(
                            MemberInfo(m.member_id, m.client_id, m.client_host, _assignment(m.member_assignment),
                                       m.group_instance_id) for m in d.members)))
            if consumer:
                for d in raw.request(addr, CONSUMER_GROUP_DESCRIBE, 0, {
                        "group_ids": consumer, "include_authorized_operations": False}).groups:
                    described[d.group_id] = (ErrorCode(d.error_code).name if d.error_code else (
                        d.group_state, d.assignor_name, tuple(
                            MemberInfo(m.member_id, m.client_id, m.client_host,
                                       tuple((t.topic_name, p) for t in m.assignment.topic_partitions
                                             for p in t.partitions), m.instance_id) for m in d.members)))
            for o in raw.request(addr, OFFSET_FETCH, 8, {"groups": [{"group_id": g, "topics": None} for g in ids],
                                                         "require_stable": False}).groups:
                if o.error_code:
                    errors[o.group_id].append(f"OffsetFetch: {ErrorCode(o.error_code).name}")
                    continue
                committed[o.group_id] = {(t.name, p.partition_index): p.committed_offset for t in o.topics
                                         for p in t.partitions if not p.error_code and p.committed_offset >= 0}
        except ClientError as e:
            for g in ids:
                errors[g].append(str(e))
        out = []
        for g in ids:
            d = described.get(g)
            if isinstance(d, tuple):
                state, assignor, members = d
                out.append(GroupInfo(g, state, kinds[g], assignor, node, members, committed[g],
                                     "; ".join(errors[g]) or None))
            else:
                why = [f"DescribeGroups: {d}"] if d else []
                out.append(GroupInfo(g, "Unknown", kinds[g], "", node, (), committed[g],
                                     "; ".join(why + errors[g]) or "no description"))
        return out

    def _any_live(self, raw: SamsaClient, obs: Observation, api_key: int, version: int, body: dict[str, Any]) -> Any:
        errors = []
        for _, addr in sorted(obs.brokers.items()):
            try:
                return raw.request(addr, api_key, version, body)
            except ClientError as e:
                errors.append(str(e))
        raise ClientError("; ".join(errors) or "no live broker")

    def _raw_requests(self, raw: SamsaClient | str, obs: Observation) -> None:
        """DescribeLogDirs and DescribeLogCleaner of every live broker, one after the other."""
        if isinstance(raw, str):
            obs.errors.append(raw)
            return
        for b, addr in sorted(obs.brokers.items()):
            if self._stop.is_set():
                return
            try:
                keys = self._supported(raw, addr)
                resp = raw.request(addr, DESCRIBE_LOG_DIRS, 4, {"topics": None})
                if resp.error_code:
                    obs.errors.append(f"DescribeLogDirs on broker {b}: {ErrorCode(resp.error_code).name}")
                else:
                    obs.log_dirs[b] = [
                        LogDirInfo(d.log_dir, ErrorCode(d.error_code).name if d.error_code else None,
                                   {(t.name, p.partition_index): p.partition_size for t in d.topics
                                    for p in t.partitions})
                        for d in resp.results]
                if DESCRIBE_LOG_CLEANER_KEY in keys:
                    resp = raw.request(addr, DESCRIBE_LOG_CLEANER_KEY, 0, {"topics": None})
                    if not resp.error_code:
                        obs.cleaner[b] = [
                            CleanerLog(lg.topic, lg.partition, lg.first_dirty_offset, lg.dirty_ratio, lg.cleans,
                                       lg.last_clean_ms, lg.bytes_reclaimed, lg.in_progress, lg.uncleanable_reason)
                            for lg in resp.logs]
            except ClientError as e:
                self._api_keys.pop(addr, None)
                obs.errors.append(f"broker {b}: {e}")

    def _supported(self, raw: SamsaClient, addr: tuple[str, int]) -> set[int]:
        keys = self._api_keys.get(addr)
        if keys is None:
            resp = raw.request(addr, API_VERSIONS, 3, {"client_software_name": "samsa-dashboard",
                                                       "client_software_version": "1"})
            keys = self._api_keys[addr] = {k.api_key for k in resp.api_keys}
        return keys


def _result(f: concurrent.futures.Future[Any]) -> Any:
    """The future's result, or the KafkaException it failed with (a timeout counts as one)."""
    if not f.done():
        return KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer in time"))
    try:
        return f.result(0)
    except KafkaException as e:
        return e
    except Exception as e:  # noqa: BLE001 - a per-item failure is shown, never raised
        return KafkaException(KafkaError(KafkaError._FAIL, f"{type(e).__name__}: {e}"))


def _reason(e: KafkaException | KafkaError) -> str:
    err = e.args[0] if isinstance(e, KafkaException) and e.args else e
    return err.str() if isinstance(err, KafkaError) else str(err)


def _source(source: Any) -> str:
    value = int(source.value) if hasattr(source, "value") else int(source)
    return _SOURCES.get(value, str(value))


def _some(items: list[str], shown: int = 5) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _assignment(raw: bytes | None) -> tuple[tuple[str, int], ...]:
    """The partitions of a consumer-protocol assignment (DescribeGroups' member_assignment:
    version, [topic, [partition]], user data); () for another protocol's or a malformed one."""
    if not raw or len(raw) < 6:
        return ()
    try:
        pos, out = 2, []
        (topics,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        for _ in range(max(topics, 0)):
            (n,) = struct.unpack_from(">h", raw, pos)
            topic = bytes(raw[pos + 2:pos + 2 + n]).decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", raw, pos)
            out += [(topic, p) for p in struct.unpack_from(f">{max(count, 0)}i", raw, pos + 4)]
            pos += 4 + 4 * max(count, 0)
        return tuple(out)
    except (struct.error, UnicodeDecodeError):
        return ()
