"""Limits on connections, as Kafka's SocketServer applies them: max.connections, max.connections.per.ip
(with max.connections.per.ip.overrides) and connections.max.idle.ms.

Kafka's ConnectionQuotas: when the broker holds max.connections connections, its acceptor blocks
(waitForConnectionSlot) until one closes, so further clients wait in the listen backlog rather than being
refused; a new connection from an address that already has max.connections.per.ip (or its override) is
closed at once ("Rejected connection from ..."). Both default to Int.MaxValue. Kafka's listener-prefixed
limits (listener.name.X.max.connections) and connection creation rates are not implemented.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol

import trio

from logway.server.config import ServerConfig

log = logging.getLogger(__name__)


class ConnectionQuotas:
    """Connection counts, broker-wide and per client address."""

    def __init__(self, max_connections: int, max_per_ip: int, per_ip_overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = per_ip_overrides
        self.total = 0
        self.counts: dict[str, int] = {}
        self._closed = trio.lowlevel.ParkingLot()

    @classmethod
    def from_config(cls, config: ServerConfig) -> ConnectionQuotas:
        return cls(config.max_connections, config.max_connections_per_ip, config.max_connections_per_ip_overrides)

    async def admit(self, ip: str) -> bool:
        """Count a connection just accepted from ``ip``: first wait for a free broker-wide slot (Kafka's
        acceptor blocks there), then False, uncounted, if ``ip`` is at its own limit (the caller closes it)."""
        while self.total >= self.max_connections:
            await self._closed.park()
        count = self.counts.get(ip, 0)
        limit = self.per_ip_overrides.get(ip, self.max_per_ip)
        if count >= limit:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     ip, limit)
            return False
        self.counts[ip] = count + 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        """A counted connection closed: free its slots and wake an acceptor waiting for one."""
        count = self.counts.pop(ip) - 1
        if count:
            self.counts[ip] = count
        self.total -= 1
        self._closed.unpark(count=1)


class Idleable(Protocol):
    io_bytes: int  # bytes received and sent so far
    busy: bool  # the server is working for it (waiting for memory, handling a request)

    def expire(self) -> None: ...


async def expire_idle_connections(connections: Iterable[Idleable], max_idle_ms: int) -> None:
    """Kafka's connections.max.idle.ms (default 10 minutes; negative disables it): close a connection that
    has moved no bytes either way (a client that stops reading its responses included) while the server was
    not working for it, for that long.

    Kafka's Selector measures idleness from a channel's last network activity and closes expired channels
    as it polls; here a sweep every max_idle_ms/10 (between 10 ms and 1 s) notices connections whose byte
    count has not moved, so a close comes within one sweep of the deadline.
    """
    if max_idle_ms < 0:
        await trio.sleep_forever()
    max_idle = max_idle_ms / 1000
    interval = min(1.0, max(0.01, max_idle / 10))
    seen: dict[Idleable, tuple[int, float]] = {}
    while True:
        await trio.sleep(interval)
        now = trio.current_time()
        current = {}
        for conn in connections:
            io_bytes, since = seen.get(conn, (-1, now))
            if conn.busy or conn.io_bytes != io_bytes:
                io_bytes, since = conn.io_bytes, now
            elif now - since >= max_idle:
                conn.expire()
            current[conn] = (io_bytes, since)
        seen = current
