"""Fault injection (filter type ``fault``), for teams that test their clients against Logway: a failing Kafka,
on purpose, for the requests it targets.

    proxy.filters=chaos
    proxy.filter.chaos.type=fault
    proxy.filter.chaos.apis=Produce,Fetch            # Kafka's API names ("*": every API); the default
    proxy.filter.chaos.topics=orders-.*              # a regex over client-visible topic names ("": any request)
    proxy.filter.chaos.client.id=.*-test             # a regex over client ids ("": any client)
    proxy.filter.chaos.error=NOT_LEADER_OR_FOLLOWER  # a Kafka error name
    proxy.filter.chaos.error.rate=0.2                # of the targeted requests (every rate defaults to 1)
    proxy.filter.chaos.error.after.upstream=false    # true: forwarded, then the answer fails (a lost ack)
    proxy.filter.chaos.latency.ms=200                # held back this long (that connection only)
    proxy.filter.chaos.latency.rate=1
    proxy.filter.chaos.throttle.ms=500               # throttle_time_ms in the answer (KIP-219: the client waits)
    proxy.filter.chaos.throttle.rate=1
    proxy.filter.chaos.disconnect.rate=0.01          # the connection closed instead (a network error)
    proxy.filter.chaos.drop.rate=0                   # the connection goes silent until the client gives up
    proxy.filter.chaos.seed=42                       # the draws repeat run after run ("": a new seed each start)

A request is targeted when its API is one of ``apis``, its client id matches ``client.id`` and, with
``topics``, it names a matching topic. For each targeted request the faults are drawn in this order, each at
its rate from one random generator per filter (seeded: the same requests in the same order get the same
faults): disconnect, drop, latency, throttle, error. An error refuses the targeted topics (every partition of
each, with the error) and forwards the rest; without ``topics``, the whole request (its groups, transactional
ids, ...): proxy/error_injection.py gives each API's answer the ACL rules' shapes. What cannot be refused entry
by entry before the upstream (topics named by id: Fetch v13+, a listing) fails the upstream's answer instead,
as ``error.after.upstream`` does for every request. Off unless configured: a fault filter with nothing to
inject is a ConfigError. Counted on /metrics (``logway_proxy_faults_injected_total{filter,fault,api}``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import random
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter

from logway.proxy.error_injection import fail_answer, names_target, refuse
from logway.proxy.filter_config import FilterSettings, filter_type
from logway.proxy.filters.base import EVERY_VERSION, Answer, ClientInfo, Disconnect, Filter
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.server.config import ConfigError
from logway.server.stats import request_label
from logway.wire.batch import CorruptBatch, parse_header
from logway.wire.errors import ErrorCode

log = logging.getLogger(__name__)

PRODUCE, METADATA = 0, 3
KEYS = {"apis": "Produce,Fetch", "topics": "", "client.id": "", "error": "", "error.rate": "1",
        "error.after.upstream": "false", "latency.ms": "0", "latency.rate": "1", "throttle.ms": "0",
        "throttle.rate": "1", "disconnect.rate": "0", "drop.rate": "0", "seed": ""}
API_KEYS = {request_label(key): key for key in api_key_map}  # Kafka's API names: Produce -> 0


@dataclass(frozen=True)
class FaultSettings:
    """One fault filter's settings, checked."""

    api_keys: frozenset[int]
    topics: re.Pattern[str] | None
    client_id: re.Pattern[str] | None
    error: ErrorCode | None = None
    error_rate: float = 1.0
    error_after_upstream: bool = False
    latency_s: float = 0.0
    latency_rate: float = 1.0
    throttle_ms: int = 0
    throttle_rate: float = 1.0
    disconnect_rate: float = 0.0
    drop_rate: float = 0.0

    @classmethod
    def read(cls, s: FilterSettings) -> FaultSettings:
        names = [n.strip() for n in s.get("apis").split(",") if n.strip()]
        unknown = [n for n in names if n != "*" and n not in API_KEYS]
        if unknown or not names:
            raise ConfigError(f"{s.key('apis')}={s.get('apis')!r}: expected Kafka API names (Produce, Fetch, ...) "
                              "or *")
        keys = frozenset(api_key_map) if "*" in names else frozenset(API_KEYS[n] for n in names)
        error = None
        if s.get("error"):
            try:
                error = ErrorCode[s.get("error").lower()]
            except KeyError:
                raise ConfigError(f"{s.key('error')}={s.get('error')!r}: not a Kafka error name "
                                  "(NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, ...)") from None
            if error == ErrorCode.none:
                raise ConfigError(f"{s.key('error')}=NONE: not an error")
        return cls(keys, s.pattern("topics") if s.get("topics") else None,
                   s.pattern("client.id") if s.get("client.id") else None,
                   error, s.float("error.rate", 0.0, 1.0), s.bool("error.after.upstream"),
                   s.int("latency.ms", 0) / 1000, s.float("latency.rate", 0.0, 1.0), s.int("throttle.ms", 0),
                   s.float("throttle.rate", 0.0, 1.0), s.float("disconnect.rate", 0.0, 1.0),
                   s.float("drop.rate", 0.0, 1.0))

    @property
    def injects(self) -> bool:
        return bool((self.error and self.error_rate) or (self.latency_s and self.latency_rate) or
                    (self.throttle_ms and self.throttle_rate) or self.disconnect_rate or self.drop_rate)


class Faults:
    """What every connection of one fault filter shares: its settings, its seeded random generator, the topic
    ids Metadata answers taught it, its counter."""

    def __init__(self, name: str, settings: FaultSettings, seed: int | None, counter: Counter | None) -> None:
        self.name, self.settings = name, settings
        self.random = random.Random(seed)  # faults, not secrets: reproducible on purpose
        self.topic_ids = TopicIdDirectory()
        self._counter = counter

    def draw(self, rate: float) -> bool:
        """One draw at ``rate``: always at 1, never at 0 (neither takes a number from the generator)."""
        return rate >= 1.0 or (rate > 0.0 and self.random.random() < rate)

    def count(self, fault: str, api_key: int) -> None:
        if self._counter is not None:
            self._counter.labels(self.name, fault, request_label(api_key)).inc()


@dataclass
class _Pending:
    """What a forwarded request's answer must get."""

    throttle_ms: int = 0
    finish: Any = None  # a refusal's: the refused entries added to the answer
    fail: bool = False  # the answer's targeted entries failed


class FaultFilter(Filter):
    """One client connection's faults."""

    delays = True

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        s = faults.settings
        self.requests = dict.fromkeys(s.api_keys, EVERY_VERSION)
        self.responses = {**self.requests, **({METADATA: EVERY_VERSION} if s.topics is not None else {})}
        self._hold = 0.0
        self._pending: dict[int, _Pending] = {}  # by the id of the request object forwarded
        # (producer id, topic, partition) -> the lowest sequence of its batches refused and not yet sent again
        self._refused: dict[tuple[int, str, int], int] = {}

    def request_delay(self) -> float:
        hold, self._hold = self._hold, 0.0
        return hold

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        if not self._targeted(client, request):
            return request
        faults, s = self.faults, self.faults.settings
        for rate, fault in ((s.disconnect_rate, "disconnect"), (s.drop_rate, "drop")):
            if faults.draw(rate):
                faults.count(fault, api_key)
                raise Disconnect(silent=fault == "drop")
        if s.latency_s and faults.draw(s.latency_rate):
            faults.count("latency", api_key)
            self._hold = s.latency_s
        pending = _Pending()
        if s.throttle_ms and faults.draw(s.throttle_rate):
            pending.throttle_ms = s.throttle_ms
        if s.error is not None:
            request = self._maybe_error(client, api_key, api_version, request, pending)
        if (pending.throttle_ms or pending.finish or pending.fail) and not (
                api_key == PRODUCE and request.acks == 0):
            self._pending[id(request)] = pending
        return request

    def _maybe_error(self, client: ClientInfo, api_key: int, api_version: int, request: Any,
                     pending: _Pending) -> Any:
        """The error, if drawn (or still owed to an idempotent producer's later batches: ``_still_refused``):
        before the upstream (raises Answer, or returns what to forward) or, failing that or asked to, on the
        upstream's answer."""
        s = self.faults.settings
        before = not s.error_after_upstream
        owed = self._still_refused(request) if api_key == PRODUCE and before else frozenset()
        drawn = self.faults.draw(s.error_rate)
        if not (drawn or owed):
            return request
        targets = self._targets(client) if drawn else (lambda name: False)
        if owed and targets is not None:
            drawn_targets = targets
            targets = lambda name: name in owed or drawn_targets(name)  # noqa: E731
        decision = refuse(api_key, api_version, request, targets, s.error) if before else None
        if decision is None:  # after the upstream
            pending.fail = True
            return request
        if decision.request is request:
            return request  # nothing targeted in it
        self.faults.count("error", api_key)
        if api_key == PRODUCE:
            self._remember_refused(request, decision.request)
        if decision.request is None:
            raise Answer(_throttled(decision.response, pending.throttle_ms, self.faults, api_key))
        pending.finish = decision.finish
        return decision.request

    def _still_refused(self, request: Any) -> frozenset[str]:
        """Kafka refuses every batch for a partition whose leader moved, not one at random: while a batch of an
        idempotent producer refused here has not been sent again (its retry: that sequence or a lower one, or a
        new epoch's), that producer's later batches for the partition are refused too. Else the upstream would
        take them ahead of it, answer its retry OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer would be stuck,
        as it never is against Kafka. The topics owing a refusal, so."""
        owed = set()
        for topic, partition, producer_id, sequence in _sequences(request):
            refused = self._refused.get((producer_id, topic, partition))
            if refused is None:
                continue
            if sequence > refused:  # (sequences wrap at 2**31, after two billion records: not considered)
                owed.add(topic)
            else:
                del self._refused[(producer_id, topic, partition)]
        return frozenset(owed)

    def _remember_refused(self, request: Any, forwarded: Any) -> None:
        """The idempotent batches of the topics refused (not in ``forwarded``), for ``_still_refused``."""
        kept = {t.name for t in forwarded.topic_data} if forwarded is not None else set()
        for topic, partition, producer_id, sequence in _sequences(request):
            if topic not in kept:
                key = (producer_id, topic, partition)
                self._refused[key] = min(self._refused.get(key, sequence), sequence)

    def _targeted(self, client: ClientInfo, request: Any) -> bool:
        s = self.faults.settings
        if s.client_id is not None and not s.client_id.fullmatch(client.client_id or ""):
            return False
        return s.topics is None or names_target(request, self._targets(client), self.faults.topic_ids.name_of)

    def _targets(self, client: ClientInfo):
        """Whether an upstream topic name is targeted (``topics`` matches its client-visible name)."""
        pattern = self.faults.settings.topics
        if pattern is None:
            return None
        return lambda name: (visible := client.visible(name)) is not None and pattern.fullmatch(visible) is not None

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return id(request) in self._pending or (api_key == METADATA and self.faults.settings.topics is not None)

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA and self.faults.settings.topics is not None:
            for topic in response.topics:
                topic_id = getattr(topic, "topic_id", None)
                if topic.name and topic_id is not None:
                    self.faults.topic_ids.learn(topic_id, topic.name)
        pending = self._pending.pop(id(request), None)
        if pending is None:
            return response
        if pending.finish is not None:
            response = pending.finish(response)
        if pending.fail:
            response, failed = fail_answer(response, self._targets(client), self.faults.settings.error,
                                           self.faults.topic_ids.name_of)
            if failed:
                self.faults.count("error", api_key)
        return _throttled(response, pending.throttle_ms, self.faults, api_key)


def _sequences(request: Any) -> Iterator[tuple[str, int, int, int]]:
    """(topic, partition, producer id, base sequence) of each idempotent batch of a Produce request."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            try:
                header = parse_header(partition.records or b"")
            except CorruptBatch:
                continue  # (the upstream refuses it)
            if header.producer_id >= 0 and header.base_sequence >= 0:
                yield topic.name, partition.index, header.producer_id, header.base_sequence


def _throttled(response: Any, throttle_ms: int, faults: Faults, api_key: int) -> Any:
    """``response`` with throttle_time_ms (KIP-219: a client waits that long before its next request)."""
    if not throttle_ms or not hasattr(response, "throttle_time"):
        return response
    faults.count("throttle", api_key)
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))


@filter_type("fault", KEYS)
def build(settings: FilterSettings):
    options = FaultSettings.read(settings)
    if not options.injects:
        raise ConfigError(f"proxy.filter.{settings.name}: a fault filter with nothing to inject (set error, "
                          "latency.ms, throttle.ms, disconnect.rate or drop.rate)")
    seed = settings.get("seed")
    try:
        seed_value = int(seed) if seed else None
    except ValueError:
        raise ConfigError(f"{settings.key('seed')}={seed!r}: expected an integer") from None
    counter = None
    if settings.registry is not None:
        counter = _counter(settings.registry)
    faults = Faults(settings.name, options, seed_value, counter)
    log.warning("fault injection on (proxy.filter.%s): %s", settings.name, options)
    return lambda client: FaultFilter(faults)


_COUNTERS: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def _counter(registry: CollectorRegistry) -> Counter:
    """The proxy's one fault counter (every fault filter's, by its ``filter`` label)."""
    counter = _COUNTERS.get(registry)
    if counter is None:
        counter = _COUNTERS[registry] = Counter(
            "logway_proxy_faults_injected", "Faults injected by the proxy's fault filters",
            ("filter", "fault", "api"), registry=registry)
    return counter
