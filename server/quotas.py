"""Kafka's client quotas, sans-IO: what is configured for which entity, and each client's rate against it.

The model is Kafka's (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599, KIP-612). Quotas are set on entities: a user, a
client id, or a (user, client id) pair, each name possibly ``<default>`` (None here), with the keys
``producer_byte_rate``, ``consumer_byte_rate`` (bytes a second), ``request_percentage`` (percent of one request
thread's time a second) and ``controller_mutation_rate`` (partitions created or deleted a second); and on IPs (a
named IP or the ``<default>`` one) with ``connection_creation_rate``. A client (its principal's user name and its
client id) is held to the most specific quota that matches it, in Kafka's order (ClientQuotaManager):

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

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logway.server.config import canonical_ip
from logway.server.quota_sensors import Avg, Rate, TokenBucket, Windows, java_round, throttle_ms
from logway.wire.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Kafka's QuotaType names: the JMX ``type`` of a quota's metrics.
PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION = "Produce", "Fetch", "Request", "ControllerMutation"
# QuotaConfig.userAndClientQuotaConfigs: each key's Kafka type and the quota it sets.
CLIENT_KEYS: dict[str, tuple[str, str]] = {
    "producer_byte_rate": ("LONG", PRODUCE),
    "consumer_byte_rate": ("LONG", FETCH),
    "request_percentage": ("DOUBLE", REQUEST),
    "controller_mutation_rate": ("DOUBLE", CONTROLLER_MUTATION),
}
IP_KEYS: dict[str, str] = {"connection_creation_rate": "INT"}
_LIMITS = {"INT": 2**31 - 1, "LONG": 2**63 - 1}
# Kafka purges a client's sensors after an hour without a request (ClientQuotaManager.InactiveSensorExpirationTime).
SENSOR_EXPIRY_MS = 3600 * 1000
# At most this many clients are measured at once (client ids are chosen by clients): past it, the tenth idle
# longest is forgotten (it starts a new budget if it comes back, as after Kafka's expiry).
MAX_SENSORS = 10_000
_SWEEP_EVERY_MS = 60_000
# The throttle-time metric's sampling: Kafka's default MetricConfig (2 samples of 30 s).
THROTTLE_METRIC_WINDOWS = Windows(2, 30_000)

# An entity: ((type, name), ...) sorted by type; a None name is the <default> entity of that type.
Entity = tuple[tuple[str, str | None], ...]
# A manager's view of an entity: (user, client id), each "" when the entity has no such part, None for <default>.
_Key = tuple[str | None, str | None]

_NO_QUOTAS, _CLIENT_ID_QUOTAS, _USER_QUOTAS, _USER_CLIENT_ID_QUOTAS = 0, 1, 2, 4


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from its (type, name) pairs, in a canonical order."""
    return tuple(sorted(pairs))


def user_of(principal: str) -> str:
    """The user name quotas see for a principal (``User:alice`` -> ``alice``; KafkaPrincipal.getName)."""
    return principal.partition(":")[2] or principal


def describe_entity(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString, for error messages."""
    return "ClientQuotaEntity(entries=" + "{" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


# --- what may be set (Kafka's ClientQuotaControlManager) ------------------------------------------------------

def check_entity(entity: Entity) -> dict[str, str]:
    """The configs the entity may have; KafkaError INVALID_REQUEST for an entity Kafka refuses."""
    if not entity:
        raise KafkaError("Invalid empty client quota entity", ErrorCode.invalid_request)
    seen: set[str] = set()
    for kind, name in entity:
        if kind in seen:
            raise KafkaError(f"Invalid client quota entity, duplicate entity entry {kind}", ErrorCode.invalid_request)
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(f"Unhandled client quota entity type: {kind}", ErrorCode.invalid_request)
        if name is not None and not name:
            raise KafkaError(f"Empty {kind} not supported", ErrorCode.invalid_request)
        seen.add(kind)
    if IP not in seen:
        return {key: kind for key, (kind, _) in CLIENT_KEYS.items()}
    if len(seen) > 1:
        raise KafkaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
                         ErrorCode.invalid_request)
    name = dict(entity)[IP]
    if name is not None and not _is_ip(name):
        # Kafka also takes a resolvable host name here; Logway takes IP addresses (KAFKA_DIFFERENCES.md).
        raise KafkaError(f"{name} is not a valid IP or resolvable host.", ErrorCode.invalid_request)
    return dict(IP_KEYS)


def check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue: a known key, a positive value that fits its type."""
    kind = keys.get(key)
    if kind is None:
        raise KafkaError(f"Invalid configuration key {key}", ErrorCode.invalid_request)
    if not value > 0.0:
        raise KafkaError(f"Quota {key} must be greater than 0", ErrorCode.invalid_request)
    if kind == "DOUBLE":
        return
    if value > _LIMITS[kind]:
        article = "an" if kind == "INT" else "a"
        raise KafkaError(f"Proposed value for {key} is too large for {article} {kind}.", ErrorCode.invalid_request)
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise KafkaError(f"{key} cannot be a fractional value.", ErrorCode.invalid_request)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


# --- which entities a DescribeClientQuotas filter matches (Kafka's ClientQuotasImage.describe) -----------------

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass
class QuotaFilter:
    """A DescribeClientQuotas filter: exact names (None: the default entity) and types that must be present."""

    exact: dict[str, str | None] = field(default_factory=dict)
    specified: set[str] = field(default_factory=set)
    strict: bool = False

    @classmethod
    def of(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        """From the request's (entity_type, match_type, match) components; KafkaError as Kafka refuses them."""
        out = cls(strict=strict)
        for kind, match_type, match in components:
            if not kind:
                raise KafkaError("Invalid empty entity type.", ErrorCode.invalid_request)
            if kind in out.exact or kind in out.specified:
                raise KafkaError(f"Entity type {kind} cannot appear more than once in the filter.",
                                 ErrorCode.invalid_request)
            if kind not in (IP, USER, CLIENT_ID):
                raise KafkaError(f"Unsupported entity type {kind}", ErrorCode.unsupported_version)
            out._add(kind, match_type, match)
        ip = IP in out.exact or IP in out.specified
        if ip and ({USER, CLIENT_ID} & (set(out.exact) | out.specified)):
            raise KafkaError("Invalid entity filter component combination. IP filter component should not be used "
                             "with user or clientId filter component.", ErrorCode.invalid_request)
        return out

    def _add(self, kind: str, match_type: int, match: str | None) -> None:
        if match_type == MATCH_EXACT:
            if match is None:
                raise KafkaError("Request specified MATCH_TYPE_EXACT, but set match string to null.",
                                 ErrorCode.invalid_request)
            self.exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise KafkaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                                 ErrorCode.invalid_request)
            self.exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise KafkaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                                 ErrorCode.invalid_request)
            self.specified.add(kind)
        else:
            raise KafkaError(f"Unknown match type {match_type}", ErrorCode.invalid_request)

    def matches(self, entity: Entity) -> bool:
        names = dict(entity)
        if self.strict and len(names) != len(self.exact) + len(self.specified):
            return False
        return (all(kind in names and names[kind] == name for kind, name in self.exact.items())
                and all(kind in names for kind in self.specified))


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
        tags = self.tags(user, client_id)
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
        observed = sensor.rate.measure(self.windows, now)
        if observed <= bound:
            return 0
        delay = throttle_ms(observed, bound, sensor.rate.window_ms(self.windows, now))
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
        observed = rate.measure(self.windows, now)
        if observed <= bound:
            return 0
        rate.record(self.windows, -1, now)
        return min(throttle_ms(observed, bound, rate.window_ms(self.windows, now)), self.windows.size_ms)

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
