"""A broker's life in ZooKeeper: registration, losing the connection or the session, coming back.

How it works (the rules are the pure functions of `controller/session.py`):

- **Registering** creates the ephemeral `/brokers/ids/<id>`. A node already there that this
  broker's own session owns is ours (a watch may deliver a list from before we registered:
  that is no reason to register again, still less to wait). One held by our previous
  process's session is waited out; one held by another broker is an error. Registrations
  are serialized, and nothing here ever sleeps on the event loop.
- **Connection lost** (SUSPENDED): the broker keeps serving from its last known metadata.
  Once the session may have expired (`fence_deadline_s` after the loss), it stops acting as
  leader of every partition that another replica may lead by now: one
  whose other in-sync replicas stopped fetching from it (see `must_fence`). While ZooKeeper
  is down for every broker, nobody can be elected and the followers go on fetching, so the
  leaders go on leading.
- **Session lost**: it stops acting as controller at once, and as leader as above (a new
  controller may move leaders now; the followers tell: they stop fetching from it).
- **Back** (CONNECTED): on a new session it registers again; then it reads every partition
  state afresh and takes the role the controller wrote, which ends any fencing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from samsa.config import BrokerConfig
from samsa.controller.controller import Controller
from samsa.controller.session import (
    Registration,
    attest_window_s,
    fence_deadline_s,
    must_fence,
    registration_verdict,
)
from samsa.metadata import zkdata
from samsa.metadata.store import MetadataStore, NodeExists, StoreError
from samsa.ratelimit import RateLimitedLog
from samsa.server.cluster import ClusterView
from samsa.server.network import Listener
from samsa.server.replica_manager import Partition, ReplicaManager


class GuardedBroker(Protocol):
    """What the session guard uses of its broker."""

    node_id: int
    config: BrokerConfig
    store: MetadataStore | None
    closing: bool
    replicas: ReplicaManager
    listeners: list[Listener]

    @property
    def controller(self) -> Controller: ...

    @property
    def cluster(self) -> ClusterView: ...

    def endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]: ...
    def topic_config(self, topic: str, key: str) -> object: ...
    def on_coordinator_role(self, part: Partition) -> None: ...

log = logging.getLogger("samsa.session")


class SessionGuard:
    def __init__(self, broker: GuardedBroker) -> None:
        self.broker = broker
        self.session_timeout_ms = int(broker.config.get("zookeeper.session.timeout.ms"))
        self.deadline_s = fence_deadline_s(self.session_timeout_ms)  # until the store says what was granted
        self.attest_s = attest_window_s(int(broker.config.get("replica.fetch.wait.max.ms")))
        self.fenced_for_disconnection = False
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._warn = RateLimitedLog(log, interval_s=10.0)

    def install(self) -> None:
        assert self.broker.store is not None
        self.broker.store.add_session_listener(on_session_lost=self.on_session_lost,
                                               on_reconnected=self.on_reconnected,
                                               on_suspended=self.on_suspended)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch_connection(), name="session-guard")

    def stop(self) -> None:
        for t in [self._task, *self._pending]:
            if t is not None:
                t.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    # -- registration -----------------------------------------------------------------------

    def registration(self) -> tuple[list[str], bytes]:
        b = self.broker
        endpoints = [f"{name}://{host}:{port}" for name, _, _ in b.config.advertised_listeners()
                     for _, host, port, _ in b.endpoints(name)]
        doc = {"version": 5, "endpoints": endpoints, "rack": b.config.get("broker.rack"), "jmx_port": -1,
               "timestamp": str(int(time.time() * 1000)), "features": {},
               "listener_security_protocol_map": b.config.security_protocol_map()}
        if endpoints:
            first = endpoints[0].split("://", 1)[1]
            doc["host"], doc["port"] = first.rsplit(":", 1)[0], int(first.rsplit(":", 1)[1])
        return endpoints, zkdata.dumps(doc)

    async def register(self) -> None:
        """Create this broker's registration (see the module docstring); StoreError if another
        live broker holds the id."""
        store = self.broker.store
        assert store is not None
        async with self._lock:
            path = zkdata.broker_path(self.broker.node_id)
            endpoints, data = self.registration()
            t0 = time.monotonic()
            told = False
            while True:
                try:
                    await store.create(path, data, ephemeral=True)
                    log.info("Registered broker %d in %s", self.broker.node_id, zkdata.BROKER_IDS)
                    return
                except NodeExists:
                    pass
                owner = await store.owner(path)
                node = await store.get(path)
                if owner is None or node is None:
                    continue  # gone meanwhile: create it again
                theirs = zkdata.loads(node[0]).get("endpoints")
                verdict = registration_verdict(owner, store.session_id, theirs, endpoints, time.monotonic() - t0,
                                               self.session_timeout_ms / 1000)
                if verdict is Registration.OURS:
                    return
                if verdict is Registration.CONFLICT:
                    raise StoreError(f"broker.id {self.broker.node_id} is already registered by a live broker "
                                     f"({', '.join(theirs or [])}); give every broker its own broker.id")
                if not told:
                    log.info("Waiting for the previous session of broker %d to expire in ZooKeeper",
                             self.broker.node_id)
                    told = True
                await asyncio.sleep(0.25)

    def on_registration_missing(self) -> None:
        """The view saw the live brokers without this one."""
        b = self.broker
        if b.closing or b.store is None or not b.store.connected:
            return  # the reconnection registers, if the session was lost

        async def again() -> None:
            try:
                await self.register()
            except StoreError as e:
                log.error("Could not register broker %d again: %s", b.node_id, e)

        self._spawn(again(), "register")

    # -- connection and session events (on the loop) ----------------------------------------

    def on_suspended(self) -> None:
        log.warning("Lost the connection to ZooKeeper; serving from the last known metadata. After %.1f s, this "
                    "broker stops leading partitions whose followers stop fetching from it", self.deadline_s)

    def on_session_lost(self) -> None:
        b = self.broker
        log.warning("ZooKeeper session expired: this broker stops acting as controller, and as leader of what "
                    "other replicas may lead now, until it is registered again")
        b.controller.resign()
        self.fence_if_cut_off(float("inf"))

    def on_reconnected(self, new_session: bool) -> None:
        if self.broker.closing:
            return
        self._spawn(self._reconnected(new_session), "reconnected")

    async def _reconnected(self, new_session: bool) -> None:
        b = self.broker
        store = b.store
        assert store is not None
        try:
            if new_session:
                log.info("New ZooKeeper session: registering broker %d again", b.node_id)
                await self.register()
            n = await b.cluster.reread_states()
            was_fenced, self.fenced_for_disconnection = self.fenced_for_disconnection, False
            log.info("Back on ZooKeeper (%s session): took the roles of %d partitions as the controller wrote them%s",
                     "new" if new_session else "same", n, " (fencing over)" if was_fenced else "")
            if await store.owner(zkdata.CONTROLLER) is None:
                b.controller.controller_changed(-1)
        except StoreError as e:
            log.warning("Could not resume after reconnecting to ZooKeeper (%s); will retry on the next reconnection", e)

    # -- cut off for too long: stop acting as leader ----------------------------------------

    async def _watch_connection(self) -> None:
        store = self.broker.store
        assert store is not None
        granted = self.session_timeout_ms
        while True:
            await asyncio.sleep(0.1)
            try:
                granted = self._check_connection(store, granted)
            except Exception as e:  # noqa: BLE001 - this watch alone fences: it must outlive a bad turn
                self._warn.error("check", "The session guard's check failed (%r); it goes on checking", e)

    def _check_connection(self, store: MetadataStore, granted: int) -> int:
        """One turn of the watch: note the session timeout ZooKeeper granted (a server bounds
        what a client asks for), and fence when cut off past the deadline; returns the granted
        timeout in ms."""
        if store.connected and store.session_timeout != float("inf"):
            ms = int(store.session_timeout * 1000)
            if ms != granted:
                granted = ms
                if ms != self.session_timeout_ms:
                    log.info("ZooKeeper granted a session timeout of %d ms (zookeeper.session.timeout.ms=%d)",
                             ms, self.session_timeout_ms)
                self.deadline_s = fence_deadline_s(ms)
        gone = store.disconnected_for()
        if gone >= self.deadline_s and not self.broker.closing:
            self.fence_if_cut_off(gone)
        return granted

    def fence_if_cut_off(self, disconnected_s: float) -> int:
        """Stop leading what another replica may lead by now; returns how many partitions."""
        b = self.broker
        fenced = 0
        now_ms = time.time() * 1000
        for part in b.replicas.leaders():
            unclean = str(b.topic_config(part.topic, "unclean.leader.election.enable")).lower() == "true"
            since_fetch = {r: (now_ms - f.last_fetch_ms) / 1000 for r, f in part.followers.items() if f.last_fetch_ms}
            if must_fence(disconnected_s, self.deadline_s, b.node_id, part.replicas, part.isr, unclean, since_fetch,
                          self.attest_s):
                part.fence()
                fenced += 1
                b.on_coordinator_role(part)
        if fenced:
            self.fenced_for_disconnection = True
            # A client asks the brokers it is connected to where the leaders are, and this one
            # can only say "not here": drop the connections, so that clients reconnect and ask
            # the other brokers, which follow ZooKeeper and know the new leaders.
            dropped = sum(lst.close_connections() for lst in b.listeners)
            log.warning("Cut off from ZooKeeper for %.1f s (session timeout %d ms): its session may have expired "
                        "and other replicas may lead; stopped leading %d partitions until it is back, and closed "
                        "%d client connections so that their clients look the leaders up elsewhere",
                        disconnected_s, self.session_timeout_ms, fenced, dropped)
        return fenced
