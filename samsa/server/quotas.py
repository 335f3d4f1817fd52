"""Client quotas: Kafka's ClientQuotaManager, one per kind (produce bytes, fetch bytes, request time).

Quotas are users' and client-ids' configs (`entity_configs.py`, Kafka's ZooKeeper layout):

    key                  kind                  unit
    producer_byte_rate   produce               bytes/s of Produce requests (whole request size)
    consumer_byte_rate   fetch                 bytes/s of records in Fetch responses
    request_percentage   request               % of one event loop: handling time of every request
    controller_mutation_rate                   refused (see below)

Which quota applies to a request of user U (the principal's name) and client-id C: the first
set among, in Kafka's order,

    /config/users/U/clients/C         /config/users/<default>/clients/C
    /config/users/U/clients/<default> /config/users/<default>/clients/<default>
    /config/users/U                   /config/users/<default>
                                      /config/clients/C, then /config/clients/<default>

(left column first, top to bottom). The level that matched also says who shares the measured
rate: a user quota is one rate for every client-id of that user, a client-id quota one rate for
that client-id across users, a user+client-id quota one per pair; a default entity gives each
user (or client-id) a rate of its own. A rate is a `Sensor`, keyed by (user, client-id) with ""
for the part that is shared, made on first use and dropped after an hour unused (Kafka's
InactiveSensorExpirationTimeSeconds).

Measurement is Kafka's `Rate` over a `SampledStat`: `quota.window.num` samples of
`quota.window.size.seconds` each (11 x 1 s); the rate is the samples' sum over the time they
span, counted as at least (num - 1) whole windows so that a quiet client's first burst is not
measured over a few milliseconds. A recording that takes the rate over the bound returns the
throttle time that brings it back, X = (rate - bound) / bound * window span (Kafka's
QuotaUtils.throttleTime); the request quota's is capped at one window, as Kafka's is.

`controller_mutation_rate` (KIP-599: a token bucket on topic and partition creations and
deletions) is not implemented: AlterClientQuotas refuses it with INVALID_REQUEST, and a value
written to ZooKeeper by another tool is logged as having no effect.

Nothing here does I/O; the dispatcher (`dispatch.py`) records and throttles, the connection
(`network.Connection.throttle`) mutes. With no quota of a kind configured its manager is
disabled and the request path does not touch it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from samsa.config_defs import CLIENT_QUOTA_REFUSED
from samsa.metadata import zkdata

log = logging.getLogger("samsa.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
DEFAULT = zkdata.DEFAULT_ENTITY
INACTIVE_SENSOR_EXPIRY_S = 3600.0  # Kafka's InactiveSensorExpirationTimeSeconds
_PURGE_EVERY_S = 60.0

# Kafka's `shouldClientThrottle`: from which version a response's throttle_time_ms makes the
# client itself hold back (KIP-219). Older versions, and APIs missing here, get their response
# delayed by the broker instead.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    0: 6, 1: 8, 2: 3, 3: 6, 8: 4, 9: 4, 10: 2, 11: 3, 12: 2, 13: 2, 14: 2, 15: 2, 16: 2, 18: 2, 19: 3, 20: 2,
    21: 1, 22: 1, 24: 1, 25: 1, 26: 1, 28: 1, 29: 1, 30: 1, 31: 1, 32: 2, 33: 1, 34: 1, 35: 1, 37: 1, 38: 1,
    39: 1, 40: 1, 41: 1, 42: 1, 43: 0, 44: 0, 45: 0, 46: 0, 47: 0, 50: 0, 51: 0, 75: 0,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client reading this response version throttles itself (KIP-219)."""
    since = CLIENT_THROTTLES_FROM.get(api_key)
    return since is not None and version >= since


def quota_user(principal: str) -> str:
    """Kafka's quota user: the principal's name ("User:alice" -> "alice")."""
    kind, sep, name = principal.partition(":")
    return name if sep else kind


class Rate:
    """Kafka's `Rate` over a windowed sum (`SampledStat`): `samples` windows of `window_ms`,
    plus the one being filled. Times are milliseconds."""

    __slots__ = ("current", "samples", "starts", "lasts", "values", "window_ms")

    def __init__(self, samples: int, window_ms: float) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.starts: list[float] = []
        self.lasts: list[float] = []
        self.values: list[float] = []
        self.current = 0

    def record(self, value: float, now: float) -> None:
        if not self.starts:
            self._new(now)
        i = self.current
        if now - self.starts[i] >= self.window_ms:
            i = self.current = (i + 1) % (self.samples + 1)
            if i >= len(self.starts):
                self._new(now)
            else:
                self.starts[i] = self.lasts[i] = now
                self.values[i] = 0.0
        self.values[i] += value
        self.lasts[i] = now

    def _new(self, now: float) -> None:
        self.starts.append(now)
        self.lasts.append(now)
        self.values.append(0.0)

    def _purge(self, now: float) -> None:
        """Samples with no event within the monitored span start over (Kafka's purgeObsoleteSamples)."""
        expire = self.samples * self.window_ms
        lasts = self.lasts
        for i in range(len(lasts)):
            if now - lasts[i] >= expire:
                self.starts[i] = lasts[i] = now
                self.values[i] = 0.0

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, the span it was measured over in ms)."""
        if not self.starts:
            self._new(now)
        self._purge(now)
        elapsed = now - min(self.starts)
        full = int(elapsed / self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        span = max(elapsed, 1.0)
        return sum(self.values) / (span / 1000.0), span


class Sensor:
    """One measured rate and its bound (Kafka's quota Sensor with its Rate metric)."""

    __slots__ = ("bound", "last_used", "rate")  # (last_used in ms, as the rate's times)

    def __init__(self, bound: float, samples: int, window_ms: float, now: float) -> None:
        self.bound = bound
        self.rate = Rate(samples, window_ms)
        self.last_used = now

    def record(self, value: float, now: float) -> float:
        """Record `value`; the throttle time in ms when the rate is now over the bound, else 0."""
        self.rate.record(value, now)
        self.last_used = now
        rate, span = self.rate.measure(now)
        if rate <= self.bound:
            return 0.0
        return (rate - self.bound) / self.bound * span


Entity = tuple[str | None, str | None]  # (sanitized user or <default> or None, client-id or <default> or None)


class ClientQuotaManager:
    """One kind of quota (see the module doc): the configured bounds by entity, and a sensor per
    quota entity in use."""

    def __init__(self, kind: str, key: str, samples: int = 11, window_s: float = 1.0,
                 max_throttle_ms: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000.0
        self.max_throttle_ms = max_throttle_ms
        self.clock = clock
        self.overrides: dict[Entity, float] = {}
        self.sensors: dict[tuple[str, str], Sensor] = {}
        # (principal, client-id) -> the sensor key and bound that apply (None: no quota);
        # cleared whenever a bound changes.
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}
        self._last_purge = clock()

    @property
    def enabled(self) -> bool:
        return bool(self.overrides)

    # -- configuration ---------------------------------------------------------------------------

    def update(self, user: str | None, client_id: str | None, bound: float | None) -> None:
        """Set (or with None remove) the quota of an entity: sanitized user, client-id, `<default>`."""
        entity = (user, client_id)
        if bound is None:
            if self.overrides.pop(entity, None) is None:
                return
            log.info("Removed %s quota of %s", self.key, _describe(entity))
        else:
            if self.overrides.get(entity) == bound:
                return
            self.overrides[entity] = bound
            log.info("%s quota of %s is now %s", self.key, _describe(entity), _number(bound))
        self._resolved.clear()
        # Existing sensors take their new bound; one whose level no longer applies is dropped
        # (its client's next request makes the right one).
        for tags in list(self.sensors):
            new = self._bound(tags)
            if new is None:
                del self.sensors[tags]
            else:
                self.sensors[tags].bound = new

    def quota(self, principal: str, client_id: str) -> float | None:
        """The bound that applies to this client (None: none)."""
        return self._resolve(principal, client_id)[1]

    def _resolve(self, principal: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        got = self._resolved.get((principal, client_id))
        if got is None:
            tags = self._tags(zkdata.sanitize(quota_user(principal)), client_id)
            got = self._resolved[(principal, client_id)] = (tags, self._bound(tags))
            if len(self._resolved) > 100_000:  # (client-ids are the clients' choice: keep it bounded)
                self._resolved.clear()
        return got

    def _tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Who shares the rate: Kafka's metric tags for the level that applies."""
        o = self.overrides
        if (user, client_id) in o or (user, DEFAULT) in o:
            return user, client_id
        if (user, None) in o:
            return user, ""
        if (DEFAULT, client_id) in o or (DEFAULT, DEFAULT) in o:
            return user, client_id
        if (DEFAULT, None) in o:
            return user, ""
        return "", client_id

    def _bound(self, tags: tuple[str, str]) -> float | None:
        """Kafka's DefaultQuotaCallback.quotaLimit for a sensor's tags."""
        user, client_id = tags
        o = self.overrides
        if user and client_id:
            order: tuple[Entity, ...] = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client_id:
            order = ((None, client_id), (None, DEFAULT))
        else:
            order = ()
        for entity in order:
            bound = o.get(entity)
            if bound is not None:
                return bound
        return None

    # -- measurement -------------------------------------------------------------------------------

    def _sensor(self, principal: str, client_id: str) -> Sensor | None:
        tags, bound = self._resolve(principal, client_id)
        if bound is None:
            return None
        sensor = self.sensors.get(tags)
        if sensor is None:
            now = self.clock()
            if now - self._last_purge >= _PURGE_EVERY_S:
                self.expire(now)
            sensor = self.sensors[tags] = Sensor(bound, self.samples, self.window_ms, now * 1000.0)
        return sensor

    def record(self, principal: str, client_id: str | None, value: float) -> int:
        """Record `value` for this client; the throttle time in ms (0: within its quota)."""
        sensor = self._sensor(principal, client_id or "")
        if sensor is None:
            return 0
        ms = sensor.record(value, self.clock() * 1000.0)
        if ms <= 0.0:
            return 0
        if self.max_throttle_ms is not None and ms > self.max_throttle_ms:
            ms = self.max_throttle_ms
        return round(ms)

    def unrecord(self, principal: str, client_id: str | None, value: float) -> None:
        """Take back a recorded value (a throttled fetch sends no data: Kafka's unrecordQuotaSensor)."""
        sensor = self._sensor(principal, client_id or "")
        if sensor is not None:
            sensor.rate.record(-value, self.clock() * 1000.0)

    def max_value_in_window(self, principal: str, client_id: str | None) -> float:
        """The most that can be recorded at once without certain throttling (Kafka caps a
        consumer's fetch max bytes at this)."""
        bound = self.quota(principal, client_id or "")
        if bound is None:
            return float("inf")
        return bound * (self.samples - 1) * self.window_ms / 1000.0

    def expire(self, now: float | None = None) -> int:
        """Drop sensors unused for an hour; returns how many."""
        now = self.clock() if now is None else now
        self._last_purge = now
        idle = [k for k, s in self.sensors.items() if now * 1000.0 - s.last_used >= INACTIVE_SENSOR_EXPIRY_S * 1000.0]
        for k in idle:
            del self.sensors[k]
        return len(idle)


class ClientQuotas:
    """The broker's three quota managers, kept current from users' and client-ids' configs
    (`on_entity_config` is an `EntityConfigs` listener)."""

    def __init__(self, samples: int = 11, window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.produce = ClientQuotaManager("Produce", PRODUCER_BYTE_RATE, samples, window_s, clock=clock)
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, samples, window_s, clock=clock)
        self.request = ClientQuotaManager("Request", REQUEST_PERCENTAGE, samples, window_s,
                                          max_throttle_ms=window_s * 1000.0, clock=clock)
        self.managers = (self.produce, self.fetch, self.request)
        self.enabled = False  # any quota configured: the dispatcher's one check per request

    def on_entity_config(self, entity_path: str, config: dict[str, str]) -> None:
        """An entity's config as it is now ({} when removed): its quotas replace the old ones."""
        entity = _entity(entity_path)
        for m in self.managers:
            raw = config.get(m.key)
            bound = None
            if raw is not None:
                try:
                    bound = float(raw)
                except ValueError:
                    log.warning("Ignoring %s=%r of %s: not a number", m.key, raw, entity_path)
                if bound is not None and not bound > 0:
                    log.warning("Ignoring %s=%r of %s: not above 0", m.key, raw, entity_path)
                    bound = None
            m.update(*entity, bound)
        for key, why in CLIENT_QUOTA_REFUSED.items():
            if key in config:
                log.warning("%s=%s of %s has no effect: %s", key, config[key], entity_path, why)
        self.enabled = any(m.enabled for m in self.managers)


def _entity(entity_path: str) -> Entity:
    """"users/alice/clients/app" -> ("alice", "app"), names as stored (sanitized), `<default>` kept."""
    parts = entity_path.split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return parts[1], zkdata.desanitize(parts[3]) if parts[3] != DEFAULT else DEFAULT
    if len(parts) == 2 and parts[0] == "users":
        return parts[1], None
    if len(parts) == 2 and parts[0] == "clients":
        return None, zkdata.desanitize(parts[1]) if parts[1] != DEFAULT else DEFAULT
    raise ValueError(f"not a user or client-id entity path: {entity_path!r}")


def _describe(entity: Entity) -> str:
    user, client = entity
    parts = []
    if user is not None:
        parts.append("default user" if user == DEFAULT else f"user {zkdata.desanitize(user)}")
    if client is not None:
        parts.append("default client-id" if client == DEFAULT else f"client-id {client}")
    return " ".join(parts)


def _number(v: float) -> str:
    return str(int(v)) if v == int(v) else str(v)
