"""The broker-wide budget for request bytes held in connection buffers (`queued.max.request.bytes`).

Kafka's SocketServer takes each request's buffer from a SimpleMemoryPool of queued.max.request.bytes in
non-strict mode: an allocation succeeds while any memory is left, so one request larger than what is left
is still read (no deadlock) and the pool overshoots by at most one request; a connection that gets no
memory is muted (the broker stops reading it: backpressure) until memory is released.

Here a connection's buffer grows as bytes arrive (a client gets memory only for bytes it has sent), so
memory is taken per growth step, not per declared frame. Growth steps are granted strictly within the
budget, except that one connection at a time may overdraw it: that connection can always finish its
frame, as with Kafka's non-strict pool, and the total stays under the budget plus one request. The
budget covers growth beyond each connection's small base buffer (whose number max.connections bounds).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio

from logway.gateway.config import ServerConfig

# queued.max.request.bytes <= 0 is Kafka's "unbounded"; here it means this many maximal requests
# (socket.request.max.bytes each: 400 MiB with the defaults), so memory is bounded out of the box.
UNBOUNDED_REQUESTS = 4


def budget_bytes(config: ServerConfig) -> int:
    """The effective budget: queued.max.request.bytes, or UNBOUNDED_REQUESTS maximal requests when it is <= 0."""
    if config.queued_max_request_bytes > 0:
        return config.queued_max_request_bytes
    return UNBOUNDED_REQUESTS * config.socket_request_max_bytes


class RequestMemory:
    """Grants buffer growth within the budget; a connection that gets none waits (it stops reading)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting = 0  # connections waiting for memory: holders of grown buffers give theirs back
        self._overdraft: object | None = None  # the one connection allowed over the limit, if any
        self._released = trio.lowlevel.ParkingLot()
        self._idle_holders: set[trio.CancelScope] = set()

    async def acquire(self, owner: object, n: int) -> None:
        """Take ``n`` bytes for ``owner``'s buffer, waiting while the budget is spent (and the overdraft taken)."""
        if self._grant(owner, n):
            return
        self.waiting += 1
        try:
            self._wake_idle_holders()
            while not self._grant(owner, n):
                await self._released.park()
        finally:
            self.waiting -= 1

    def release(self, owner: object, n: int) -> None:
        """Give back ``n`` bytes of ``owner``'s buffer and wake the connections waiting for memory."""
        self.used -= n
        if self.used <= self.limit:
            self._overdraft = None  # whatever the overdrawing connection still holds is within the budget now
        self._released.unpark_all()

    @contextmanager
    def idle_holder(self, scope: trio.CancelScope) -> Iterator[None]:
        """``with memory.idle_holder(scope):`` a connection waits for its next request with a grown buffer;
        the scope is cancelled as soon as another connection needs memory, so the buffer is given back."""
        self._idle_holders.add(scope)
        try:
            yield
        finally:
            self._idle_holders.discard(scope)

    def _grant(self, owner: object, n: int) -> bool:
        if self.used + n > self.limit:
            if self._overdraft is not None and self._overdraft is not owner:
                return False
            self._overdraft = owner
        self.used += n
        return True

    def _wake_idle_holders(self) -> None:
        for scope in self._idle_holders:
            scope.cancel()

