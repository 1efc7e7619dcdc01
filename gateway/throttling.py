"""Client quotas applied to the broker's requests, as KafkaApis applies them (KIP-219): one accounting call per
request, its throttle time put in the answer's ``throttle_time_ms`` and the connection muted for it
(server.connection.Connection.throttle).

- Produce: the request's size against ``producer_byte_rate``, its time against ``request_percentage`` (not for
  acks=0, which has no answer; its connection is still muted for the byte rate); the longer throttle wins.
- Fetch (consumers): the answer's size against ``consumer_byte_rate``, and its time; a throttled Fetch answers no
  data (the size taken back, as Kafka's unrecordQuotaSensor), and max_bytes is capped at what the quota allows
  over its windows (getMaxValueInQuotaWindow), so a fetch is never throttled for its size alone.
- ShareFetch (KIP-932 share consumers): as a Fetch (Kafka 4.3's processShareFetchResponse), but a throttled answer
  still carries the records it acquired (gateway/apis/share_fetch.py says why).
- Every other API: its time against ``request_percentage``, and for CreateTopics, CreatePartitions and
  DeleteTopics the ``controller_mutation_rate`` throttle they set on the context (the longer one wins).
Nothing is measured while no quota of a kind was ever set (the broker's quota managers say so in one test).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from typing import TYPE_CHECKING, Any

from logway.server import request_time
from logway.server.quota_entities import user_of
from logway.server.quotas import ClientQuotaManager
from logway.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from logway.gateway.context import RequestContext


def monotonic_ms() -> int:
    """The quota clock: milliseconds that never go back."""
    return int(time.monotonic() * 1000)


def client(ctx: RequestContext) -> tuple[str, str]:
    """(user, client id) of the request, as quotas name clients."""
    return user_of(ctx.principal), ctx.header.client_id or ""


def _request_throttle(ctx: RequestContext, user: str, client_id: str, now: int, exempt: bool = False) -> int:
    """The request's time (percent of a second of the event loop) against request_percentage; an ``exempt``
    request's time is taken and not recorded (Kafka's maybeRecordExempt: an acks=0 Produce)."""
    quotas = ctx.broker.quotas
    if not quotas.request.enabled:
        return 0
    seconds = request_time.take(ctx.connection)
    return 0 if exempt else quotas.request.record(user, client_id, seconds * 100, now)


def _apply(ctx: RequestContext, manager: ClientQuotaManager, user: str, client_id: str, delay: int, now: int) -> None:
    """Mute the connection for ``delay`` and count it in the throttle-time metric of the quota that set it."""
    if delay > 0:
        manager.note_throttle(user, client_id, delay, now)
        ctx.connection.throttle(delay)


def throttle_answer(ctx: RequestContext, response: Any) -> Any:
    """A kio answer with the request's throttle time (request_percentage, or a mutation quota's) set, and the
    connection muted for it (Kafka's sendResponseMaybeThrottle)."""
    quotas = ctx.broker.quotas
    user, client_id = client(ctx)
    now = monotonic_ms()
    requested = _request_throttle(ctx, user, client_id, now)
    delay = max(requested, ctx.throttle_ms)
    if not delay:
        return response
    manager = quotas.request if requested >= ctx.throttle_ms else quotas.controller_mutation
    _apply(ctx, manager, user, client_id, delay, now)
    if not any(f.name == "throttle_time" for f in dataclasses.fields(response)):
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=delay))


def produce_throttle(ctx: RequestContext, acks: int) -> int:
    """Record a Produce (its size, and its time unless acks=0): the throttle time for its answer."""
    quotas = ctx.broker.quotas
    if not (quotas.produce.enabled or quotas.request.enabled):
        return 0
    user, client_id = client(ctx)
    now = monotonic_ms()
    bandwidth = quotas.produce.record(user, client_id, len(ctx.frame), now)
    requested = _request_throttle(ctx, user, client_id, now, exempt=acks == 0)
    delay = max(bandwidth, requested)
    _apply(ctx, quotas.produce if bandwidth > requested else quotas.request, user, client_id, delay, now)
    return delay


def fetch_max_bytes(ctx: RequestContext, max_bytes: int) -> int:
    """A consumer's max_bytes, capped at what its consumer_byte_rate allows over the quota's windows."""
    quotas = ctx.broker.quotas
    if not quotas.fetch.enabled:
        return max_bytes
    user, client_id = client(ctx)
    cap = quotas.fetch.max_in_window(user, client_id, monotonic_ms())
    return max_bytes if cap >= max_bytes else max(int(cap), 1)


def fetch_throttle(ctx: RequestContext, size: int, delivered: bool = False) -> int:
    """Record a consumer's Fetch answer of ``size`` bytes (and the request's time): its throttle time. When it
    is throttled, the caller answers no data instead, and the size is taken back; unless the answer is
    ``delivered`` all the same (a ShareFetch's acquired records), when the size stays counted."""
    quotas = ctx.broker.quotas
    if not (quotas.fetch.enabled or quotas.request.enabled):
        return 0
    user, client_id = client(ctx)
    now = monotonic_ms()
    requested = _request_throttle(ctx, user, client_id, now)
    bandwidth = quotas.fetch.record(user, client_id, size, now)
    delay = max(bandwidth, requested)
    if delay:
        if not delivered:
            quotas.fetch.unrecord(user, client_id, size, now)
        _apply(ctx, quotas.fetch if bandwidth > requested else quotas.request, user, client_id, delay, now)
    return delay


def take_mutations(ctx: RequestContext, partitions: int, strict_from: int) -> None:
    """controller_mutation_rate (KIP-599): ``partitions`` created or deleted by one topic of the request. From
    version ``strict_from`` the quota is strict: an empty bucket refuses the topic (THROTTLING_QUOTA_EXCEEDED,
    KafkaError); before, it is permissive (taken, then throttled). The throttle time goes in the answer."""
    manager = ctx.broker.quotas.controller_mutation
    if not manager.enabled:
        return
    user, client_id = client(ctx)
    strict = ctx.version >= strict_from
    delay = manager.mutate(user, client_id, partitions, monotonic_ms(), strict)
    if delay:
        ctx.throttle_ms = max(ctx.throttle_ms, delay)
        if strict:
            raise KafkaError("The throttling quota has been exceeded.", ErrorCode.throttling_quota_exceeded)
