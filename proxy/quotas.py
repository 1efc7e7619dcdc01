"""Client quotas the proxy enforces itself, in front of any upstream (one with quotas of its own, or none): Kafka's
byte-rate and request quotas (server/quotas.py), per principal and per virtual cluster.

Settings, with Kafka's quota names:

- ``proxy.quota.producer_byte_rate``, ``proxy.quota.consumer_byte_rate``, ``proxy.quota.request_percentage``: the
  quota of each principal, on every listener (Kafka's ``<default>`` user entity: every user has its own budget).
- ``proxy.virtual.cluster.<name>.quota.<same keys>``: the quota of the virtual cluster's clients, each principal
  its own budget; with ``proxy.virtual.cluster.<name>.quota.shared=true`` one budget the tenant's clients share.

A client both hold is throttled for the longer time. As Kafka (KafkaApis, KIP-219), with one accounting call per
request: a Produce by its size when it arrives, a Fetch (or a share consumer's ShareFetch) by the size of its answer
when the upstream gives it, every request by the proxy's own time for it; a consumer's Fetch max_bytes is first
capped at what its quota allows over the quota's windows (getMaxValueInQuotaWindow), so a fetch that would be over
it brings less data. The throttle time goes in the answer's ``throttle_time_ms`` (the longer of the upstream's and
the proxy's), and the client connection is muted for it (server.connection.Connection.throttle): the requests it
sends meanwhile wait in its socket. A throttled Fetch or ShareFetch answer still carries the data the upstream gave
(Kafka's own broker answers one without data; the proxy has already taken the bytes from the upstream, and the mute
holds the client to its rate all the same).
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass

import trio

from logway.proxy.frames import decode_response, encode_response_frame, response_body_offset, response_correlation_id
from logway.server import request_time
from logway.server.connection import Connection
from logway.server.quota_entities import USER, make_entity, user_of
from logway.server.quota_metrics import QuotaCollector
from logway.server.quota_sensors import Windows
from logway.server.quotas import ClientQuotas
from logway.wire.protocol import RequestHeader, is_flexible

PRODUCE, FETCH, SHARE_FETCH = 0, 1, 78
# Answers counted against consumer_byte_rate: Fetch, and a share consumer's ShareFetch (Kafka 4.3's
# processShareFetchResponse; its max_bytes is not capped here, the answer is counted when it comes back).
CONSUMED = (FETCH, SHARE_FETCH)
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
_I32 = struct.Struct(">i")
_ALL_USERS = make_entity([(USER, None)])


@dataclass(frozen=True)
class QuotaSettings:
    """The quotas of one scope (keys of KEYS, bytes or percent a second) and whether its clients share them."""

    values: Mapping[str, float]
    shared: bool = False


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class _Scope:
    """One set of budgets: the quotas, and the user every client is measured as when they share one."""

    def __init__(self, settings: QuotaSettings, windows: Windows, tenant: str | None) -> None:
        self.quotas = ClientQuotas(windows)
        for key, value in settings.values.items():
            self.quotas.set(_ALL_USERS, key, value)
        # A shared budget measures every client as the tenant's name.
        self.shared_as = tenant if settings.shared else None
        self.collector = QuotaCollector(self.quotas, {"virtualCluster": tenant} if tenant is not None else None)

    def user(self, principal: str) -> str:
        return self.shared_as if self.shared_as is not None else user_of(principal)


class ProxyQuotas:
    """The proxy's quotas: every principal's (``everyone``) and each virtual cluster's, by listener."""

    def __init__(self, everyone: QuotaSettings | None, tenants: Mapping[str, tuple[str, QuotaSettings]],
                 windows: Windows) -> None:
        self.everyone = _Scope(everyone, windows, None) if everyone is not None and everyone.values else None
        self.tenants = {listener: _Scope(settings, windows, name)
                        for listener, (name, settings) in tenants.items() if settings.values}
        self.timed = any(s.quotas.request.enabled for s in self.scopes())

    def scopes(self) -> list[_Scope]:
        return [s for s in (self.everyone, *self.tenants.values()) if s is not None]

    def for_listener(self, listener: str) -> SessionQuota | None:
        """What a client connection on ``listener`` is held to; None: nothing."""
        scopes = [s for s in (self.everyone, self.tenants.get(listener)) if s is not None]
        return SessionQuota(scopes) if scopes else None

    def collectors(self) -> list[QuotaCollector]:
        """Each scope's metrics (a virtual cluster's with its name as ``virtualCluster``)."""
        return [scope.collector for scope in self.scopes()]

    def refresh_metrics(self) -> None:
        """Copy the numbers for a scrape (on the event loop, where they change)."""
        now = _monotonic_ms()
        for scope in self.scopes():
            scope.collector.refresh(now)


class SessionQuota:
    """The quotas one client connection is held to; the session calls it once per request and per answer."""

    def __init__(self, scopes: list[_Scope]) -> None:
        self.scopes = scopes
        self.fetch = any(s.quotas.fetch.enabled for s in scopes)  # answers are measured (read whole, not spliced)

    async def request(self, conn: Connection, header: RequestHeader, frame: memoryview, pos: int, size: int,
                      answered: bool) -> int:
        """Account one request of ``size`` bytes (its frame's head in ``frame``, the body at ``pos``; ``answered``:
        False for an acks=0 Produce): wait out a throttle the client was given meanwhile, cap a Fetch's max_bytes (in
        place), record a Produce's size and the request's time (not an acks=0 Produce's, as Kafka). The throttle
        time its answer must carry (the connection is muted for it)."""
        if conn.mute_until > trio.current_time():  # read while the answer that throttled it was on its way
            await trio.sleep_until(conn.mute_until)
        now = _monotonic_ms()
        client_id = header.client_id or ""
        seconds = request_time.take(conn)
        delay = 0
        for scope in self.scopes:
            quotas, user = scope.quotas, scope.user(conn.principal)
            if header.api_key == FETCH and quotas.fetch.enabled:
                _cap_max_bytes(frame, pos, header.api_version, quotas.fetch.max_in_window(user, client_id, now))
            if header.api_key == PRODUCE:
                delay = max(delay, _record(quotas.produce, user, client_id, size, now))
            if quotas.request.enabled and answered:
                delay = max(delay, _record(quotas.request, user, client_id, seconds * 100, now))
        conn.throttle(delay)
        return delay

    def answer(self, conn: Connection, api_key: int, version: int, frame: bytearray | bytes,
               throttle_ms: int, client_id: str) -> bytearray | bytes:
        """An upstream answer on its way to the client: a Fetch's size recorded, and the throttle time (its
        request's, or the Fetch's or ShareFetch's) set in it; the connection muted for it."""
        delay = throttle_ms
        if api_key in CONSUMED:
            now = _monotonic_ms()
            for scope in self.scopes:
                quotas = scope.quotas
                if quotas.fetch.enabled:
                    delay = max(delay, _record(quotas.fetch, scope.user(conn.principal), client_id, len(frame), now))
            conn.throttle(delay)
        return with_throttle_time(api_key, version, frame, delay) if delay else frame


def _record(manager, user: str, client_id: str, value: float, now: int) -> int:
    delay = manager.record(user, client_id, value, now)
    manager.note_throttle(user, client_id, delay, now)
    return delay


def _cap_max_bytes(frame: memoryview, pos: int, version: int, cap: float) -> None:
    """Lower a Fetch request's max_bytes to ``cap`` in place: after replica_id (up to v14), max_wait, min_bytes."""
    at = pos + (12 if version < 15 else 8)
    if at + 4 > len(frame) or cap == float("inf"):
        return
    (max_bytes,) = _I32.unpack_from(frame, at)
    if max_bytes > cap:
        _I32.pack_into(frame, at, max(int(cap), 1))


def with_throttle_time(api_key: int, version: int, frame: bytearray | bytes, delay: int) -> bytearray | bytes:
    """The answer frame (no size prefix) with its throttle_time_ms at least ``delay``. A Fetch's is its first field
    and a Produce's its last before any tagged fields: changed in place; any other answer is decoded and encoded."""
    if api_key == FETCH:
        at = response_body_offset(api_key, version, frame)
    elif api_key == PRODUCE and (not is_flexible(api_key, version) or frame[-1] == 0):
        at = len(frame) - (5 if is_flexible(api_key, version) else 4)
    else:
        response = decode_response(api_key, version, bytes(frame))
        if not any(f.name == "throttle_time" for f in dataclasses.fields(response)):
            return frame
        current = int(response.throttle_time.total_seconds() * 1000)
        response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=max(current, delay)))
        return encode_response_frame(api_key, version, response_correlation_id(frame), response)
    frame = frame if isinstance(frame, bytearray) else bytearray(frame)
    if _I32.unpack_from(frame, at)[0] < delay:
        _I32.pack_into(frame, at, delay)
    return frame
