"""Kafka's client quotas, sans-IO: what is configured for which entity (server/quota_entities.py), and each
client's rate against it.

The model is Kafka's (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599, KIP-612). A client (its principal's user name and
its client id) is held to the most specific quota that matches it, in Kafka's order (ClientQuotaManager):

    1. user + client id   2. user + <default> client id   3. user
    4. <default> user + client id   5. <default> user + <default> client id   6. <default> user
    7. client id   8. <default> client id

Clients matched by the same entity share one budget (a sensor): all the client ids of a user with a user quota,
every (user, client id) of a ``<default>`` pair separately, as Kafka's metric tags decide. One manager per quota
(`ClientQuotaManager`) records what a request used (bytes, request time, mutations), once per request, and answers
the throttle time: the delay that brings the client's rate back to its quota, which the server sends as
``throttle_time_ms`` and for which it mutes the connection (KIP-219). Times are milliseconds passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from logway.server.config import canonical_ip
from logway.server.quota_entities import (
    CLIENT_ID,
    CLIENT_KEYS,
    CONTROLLER_MUTATION,
    FETCH,
    IP,
    PRODUCE,
    REQUEST,
    USER,
    Entity,
    QuotaFilter,
)
from logway.server.quota_sensors import Avg, Rate, TokenBucket, Windows, java_round, throttle_ms

# Kafka purges a client's sensors after an hour without a request (ClientQuotaManager.InactiveSensorExpirationTime).
SENSOR_EXPIRY_MS = 3600 * 1000
# At most this many clients are measured at once (client ids are chosen by clients): past it, the tenth idle
# longest is forgotten (it starts a new budget if it comes back, as after Kafka's expiry).
MAX_SENSORS = 10_000
_SWEEP_EVERY_MS = 60_000
# The throttle-time metric's sampling: Kafka's default MetricConfig (2 samples of 30 s).
THROTTLE_METRIC_WINDOWS = Windows(2, 30_000)

# A manager's view of an entity: (user, client id), each "" when the entity has no such part, None for <default>.
_Key = tuple[str | None, str | None]

_NO_QUOTAS, _CLIENT_ID_QUOTAS, _USER_QUOTAS, _USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4


# --- enforcement -----------------------------------------------------------------------------------------------

class _Sensor:
    """One budget: the rate it is measured at, its quota (inf: none), its throttle times, when it was last used."""

    __slots__ = ("tags", "rate", "bound", "throttle", "bucket", "last")

    def __init__(self, tags: tuple[str, str], bound: float, now: int) -> None:
        self.tags = tags  # (user, client id) as Kafka's metric tags name the budget
        self.rate = Rate()
        self.bound = bound
        self.throttle = Avg()
        self.bucket: TokenBucket | None = None
        self.last = now


class ClientQuotaManager:
    """One quota (Produce, Fetch, Request or ControllerMutation): the configured values by entity, and a sensor per
    budget. Kafka's ClientQuotaManager with its DefaultQuotaCallback."""

    def __init__(self, quota_type: str, windows: Windows, max_throttle_ms: int | None = None) -> None:
        self.quota_type = quota_type
        self.windows = windows
        self.max_throttle_ms = max_throttle_ms  # the Request quota throttles for at most one window
        self.overrides: dict[_Key, float] = {}
        # Which levels have ever had a quota (Kafka's quotaTypesEnabled: it stays on until a restart, so
        # the metrics of the clients keep their names).
        self.levels = _NO_QUOTAS
        # Whether any quota of this type was ever set: if not, nothing is recorded (Kafka's quotasEnabled). A plain
        # attribute: the hot paths test it on every request.
        self.enabled = False
        self.sensors: dict[tuple[str, str], _Sensor] = {}
        self._budgets: dict[tuple[str, str], tuple[str, str]] = {}  # (user, client id) -> tags, until a change
        self._swept = 0

    def update(self, user: str | None, client_id: str | None, value: float | None) -> None:
        """Set (or, with None, remove) the quota of an entity: ``user`` / ``client_id`` "" when the entity has no
        such part, None for <default>. Every sensor takes its (possibly new) quota at once."""
        key = (user, client_id)
        if user != "":
            self.levels |= _USER_CLIENT_ID_QUOTAS if client_id != "" else _USER_QUOTAS
        elif client_id != "":
            self.levels |= _CLIENT_ID_QUOTAS
        self.enabled = self.levels != _NO_QUOTAS
        if value is None:
            self.overrides.pop(key, None)
        else:
            self.overrides[key] = value
        self._budgets.clear()
        # Every budget takes its quota anew (a client the change moves to another budget starts a sensor there, as
        # under Kafka's new metric tags; the old one expires).
        for sensor in self.sensors.values():
            sensor.bound = self.limit(sensor.tags)

    def tags(self, user: str, client_id: str) -> tuple[str, str]:
        """The budget a client is measured in: Kafka's quotaMetricTags, (user, client id) with "" for a part the
        matching entity does not name."""
        levels = self.levels
        if levels in (_NO_QUOTAS, _CLIENT_ID_QUOTAS):
            return "", client_id
        if levels == _USER_QUOTAS:
            return user, ""
        if levels == _USER_CLIENT_ID_QUOTAS:
            return user, client_id
        has = self.overrides.__contains__
        if has((user, client_id)) or has((user, None)):  # 1, 2
            return user, client_id
        if has((user, "")):  # 3
            return user, ""
        if has((None, client_id)) or has((None, None)):  # 4, 5
            return user, client_id
        if has((None, "")):  # 6
            return user, ""
        return "", client_id  # 7, 8

    def limit(self, tags: tuple[str, str]) -> float:
        """The quota of a budget (inf: none): Kafka's quotaLimit, most specific entity first."""
        user, client_id = tags
        get = self.overrides.get
        if user and client_id:
            candidates: tuple[_Key, ...] = ((user, client_id), (user, None), (None, client_id), (None, None))
        elif user:
            candidates = ((user, ""), (None, ""))
        elif client_id:
            candidates = (("", client_id), ("", None))
        else:
            return math.inf
        for key in candidates:
            value = get(key)
            if value is not None:
                return value
        return math.inf

    def sensor(self, user: str, client_id: str, now: int) -> _Sensor:
        """The sensor of the client's budget, made on first use."""
        client = (user, client_id)
        tags = self._budgets.get(client)
        if tags is None:
            if len(self._budgets) >= MAX_SENSORS:
                self._budgets.clear()
            tags = self._budgets[client] = self.tags(user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            if now - self._swept >= _SWEEP_EVERY_MS or len(self.sensors) >= MAX_SENSORS:
                self._sweep(now)
            sensor = self.sensors[tags] = _Sensor(tags, self.limit(tags), now)
        sensor.last = now
        return sensor

    def _sweep(self, now: int) -> None:
        """Forget the sensors idle for an hour, and past MAX_SENSORS the tenth idle longest."""
        self._swept = now
        self.sensors = {tags: s for tags, s in self.sensors.items() if now - s.last < SENSOR_EXPIRY_MS}
        if len(self.sensors) >= MAX_SENSORS:
            idle = sorted(self.sensors.values(), key=lambda s: s.last)[: MAX_SENSORS // 10]
            for sensor in idle:
                del self.sensors[sensor.tags]

    def record(self, user: str, client_id: str, value: float, now: int) -> int:
        """Record what a request used and return its throttle time in ms (0: within the quota). Nothing at all
        while no quota of this type was ever set."""
        if not self.enabled:
            return 0
        sensor = self.sensor(user, client_id, now)
        sensor.rate.record(self.windows, value, now)
        return self._over(sensor, now)

    def _over(self, sensor: _Sensor, now: int) -> int:
        bound = sensor.bound
        if bound == math.inf:
            return 0
        total, window_ms = sensor.rate.total_and_window(self.windows, now)
        observed = total / (window_ms / 1000)
        if observed <= bound:
            return 0
        delay = throttle_ms(observed, bound, window_ms)
        return delay if self.max_throttle_ms is None else min(delay, self.max_throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float, now: int) -> None:
        """Take back a recorded value (a throttled Fetch answers no data: Kafka's unrecordQuotaSensor)."""
        if self.enabled:
            self.sensor(user, client_id, now).rate.record(self.windows, -value, now)

    def max_in_window(self, user: str, client_id: str, now: int) -> float:
        """The most one request may take without being throttled for sure: quota x (num - 1) windows (Kafka's
        getMaxValueInQuotaWindow, which caps a Fetch's max_bytes); inf without a quota."""
        if not self.enabled:
            return math.inf
        bound = self.sensor(user, client_id, now).bound
        return bound * (self.windows.num - 1) * self.windows.size_ms / 1000

    def note_throttle(self, user: str, client_id: str, delay_ms: int, now: int) -> None:
        """Record a throttle the client was given (the throttle-time metric: Kafka's throttleTimeSensor)."""
        if delay_ms > 0 and self.enabled:
            self.sensor(user, client_id, now).throttle.record(THROTTLE_METRIC_WINDOWS, delay_ms, now)

    def metrics(self, now: int) -> list[tuple[str, str, float, float]]:
        """(user, client id, rate, average throttle time) of every measured budget, for the metrics endpoint."""
        return [(s.tags[0], s.tags[1], s.rate.measure(self.windows, now),
                 s.throttle.measure(THROTTLE_METRIC_WINDOWS, now)) for s in self.sensors.values()]


class ControllerMutationQuotaManager(ClientQuotaManager):
    """controller_mutation_rate (KIP-599): partitions created or deleted, taken from a token bucket. A strict quota
    (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+) refuses a mutation while the bucket is empty
    (THROTTLING_QUOTA_EXCEEDED) and never throttles one it accepts; a permissive one (older versions) accepts every
    mutation and throttles once the bucket is empty."""

    def mutate(self, user: str, client_id: str, permits: int, now: int, strict: bool) -> int:
        """Take ``permits`` (partitions) from the client's bucket: 0, or the throttle time (ms) of a violation.
        A strict quota takes nothing when it answers a throttle time: the mutation is refused."""
        if not self.enabled:
            return 0
        sensor = self.sensor(user, client_id, now)
        bound = sensor.bound
        sensor.rate.record(self.windows, permits, now)
        if bound == math.inf:
            return 0
        bucket = sensor.bucket
        if bucket is None:
            bucket = sensor.bucket = TokenBucket()
        if strict:
            tokens = bucket.measure(self.windows, bound, now)
            if tokens < 0:
                sensor.rate.record(self.windows, -permits, now)
                return java_round(-tokens / bound * 1000)
            bucket.record(self.windows, bound, permits, now)
            return 0
        bucket.record(self.windows, bound, permits, now)
        tokens = bucket.measure(self.windows, bound, now)
        return java_round(-tokens / bound * 1000) if tokens < 0 else 0


class IpConnectionRates:
    """connection_creation_rate per IP (KIP-612): a connection over its IP's rate is not served; Kafka closes it
    after the throttle time (at most one window)."""

    def __init__(self, windows: Windows) -> None:
        self.windows = windows
        self.rates: dict[str | None, float] = {}  # IP (None: <default>) -> connections a second
        self.sensors: dict[str, Rate] = {}
        self._swept = 0

    def update(self, ip: str | None, value: float | None) -> None:
        if value is None:
            self.rates.pop(ip, None)
        else:
            self.rates[ip] = value

    def record(self, ip: str, now: int) -> int:
        """Count a new connection from ``ip``: 0 to serve it, else the ms to hold it before closing it (then it
        is not counted, as Kafka unrecords it)."""
        rates = self.rates
        if not rates:
            return 0
        bound = rates.get(ip, rates.get(None))
        if bound is None:
            return 0
        rate = self.sensors.get(ip)
        if rate is None:
            if now - self._swept >= _SWEEP_EVERY_MS or len(self.sensors) >= MAX_SENSORS:
                self._sweep(now)
            rate = self.sensors[ip] = Rate()
        rate.record(self.windows, 1, now)
        total, window_ms = rate.total_and_window(self.windows, now)
        observed = total / (window_ms / 1000)
        if observed <= bound:
            return 0
        rate.record(self.windows, -1, now)
        return min(throttle_ms(observed, bound, window_ms), self.windows.size_ms)

    def _sweep(self, now: int) -> None:
        self._swept = now
        expire = self.windows.num * self.windows.size_ms
        self.sensors = {ip: r for ip, r in self.sensors.items()
                        if r.stat.samples and now - max(s.last for s in r.stat.samples) < expire}
        if len(self.sensors) >= MAX_SENSORS:
            self.sensors.clear()


class ClientQuotas:
    """Every configured quota (by entity) and the managers enforcing them: what the broker's DescribeClientQuotas
    and AlterClientQuotas read and change, and what every request is measured against."""

    def __init__(self, windows: Windows | None = None, controller_windows: Windows | None = None) -> None:
        windows = windows or Windows()
        self.configs: dict[Entity, dict[str, float]] = {}
        self.produce = ClientQuotaManager(PRODUCE, windows)
        self.fetch = ClientQuotaManager(FETCH, windows)
        self.request = ClientQuotaManager(REQUEST, windows, max_throttle_ms=windows.size_ms)
        self.controller_mutation = ControllerMutationQuotaManager(CONTROLLER_MUTATION, controller_windows or Windows())
        self.connections = IpConnectionRates(windows)
        self.managers = {PRODUCE: self.produce, FETCH: self.fetch, REQUEST: self.request,
                         CONTROLLER_MUTATION: self.controller_mutation}

    def set(self, entity: Entity, key: str, value: float | None) -> None:
        """Set one quota of an entity (None: remove it); the entity and value are already checked."""
        values = self.configs.setdefault(entity, {})
        if value is None:
            values.pop(key, None)
            if not values:
                del self.configs[entity]
        else:
            values[key] = value
        names = dict(entity)
        if IP in names:
            ip = names[IP]
            self.connections.update(None if ip is None else canonical_ip(ip), value)
            return
        self.managers[CLIENT_KEYS[key][1]].update(names.get(USER, ""), names.get(CLIENT_ID, ""), value)

    def load(self, configs: Mapping[Entity, Mapping[str, float]]) -> None:
        """Apply stored quotas (at start-up)."""
        for entity, values in configs.items():
            for key, value in values.items():
                self.set(entity, key, value)

    def describe(self, quota_filter: QuotaFilter) -> list[tuple[Entity, dict[str, float]]]:
        """The entities the filter matches, with their quotas."""
        return [(entity, dict(values)) for entity, values in self.configs.items() if quota_filter.matches(entity)]
