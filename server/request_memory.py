"""The broker-wide budget for request bytes held in connection buffers (`queued.max.request.bytes`).

Kafka's SocketServer takes each request's buffer from a SimpleMemoryPool of queued.max.request.bytes in
non-strict mode: an allocation succeeds while any memory is left, so one request larger than what is left
is still read (no deadlock) and the pool overshoots by at most one request; a connection that gets no
memory is muted (the broker stops reading it: backpressure) until memory is released.

Here a connection's buffer grows as bytes arrive (a client gets memory only for bytes it has sent), so
memory is taken per growth step, not per declared frame. Growth steps are granted strictly within the
budget, except that one connection at a time may overdraw it: that connection can always finish its
frame, as with Kafka's non-strict pool, and the total stays under the budget plus one connection's
buffer (at most 1.25 x socket.request.max.bytes). Connections that wait for memory make the others give
back what they do not hold a request in, as Kafka frees a request's buffer once it is handled. The
budget covers growth beyond each connection's small base buffer (whose number max.connections bounds).
"""

from __future__ import annotations

from typing import Protocol

import trio

from logway.server.config import ServerConfig

# queued.max.request.bytes <= 0 is Kafka's "unbounded"; here it means this many maximal requests
# (socket.request.max.bytes each: 400 MiB with the defaults), so memory is bounded out of the box.
UNBOUNDED_REQUESTS = 4
# A connection's grown buffer is sized down to its recent use this often, and given back after it has
# waited this long for a request.
RESIZE_AFTER_S = 2.0


def budget_bytes(config: ServerConfig) -> int:
    """The effective budget: queued.max.request.bytes, or UNBOUNDED_REQUESTS maximal requests when it is <= 0."""
    if config.queued_max_request_bytes > 0:
        return config.queued_max_request_bytes
    return UNBOUNDED_REQUESTS * config.socket_request_max_bytes


class BufferHolder(Protocol):
    def give_back_buffer(self) -> None: ...


class RequestMemory:
    """Grants buffer growth within the budget; a connection that gets none waits (it stops reading)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.waiting = 0  # connections waiting for memory: holders of grown buffers give theirs back
        self._overdraft: object | None = None  # the one connection allowed over the limit, if any
        self._released = trio.lowlevel.ParkingLot()
        self._idle: dict[BufferHolder, float] = {}  # connections waiting for a request with a grown buffer

    async def acquire(self, owner: object, n: int) -> None:
        """Take ``n`` bytes for ``owner``'s buffer, waiting while the budget is spent (and the overdraft taken)."""
        if self._grant(owner, n):
            return
        self.waiting += 1
        try:
            self._give_back_idle_buffers(0.0)
            while not self._grant(owner, n):
                await self._released.park()
        finally:
            self.waiting -= 1

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes if the budget has them now and nobody waits for memory (optional growth)."""
        if self.waiting or self.used + n > self.limit:
            return False
        self.used += n
        return True

    def release(self, n: int) -> None:
        """Give back ``n`` bytes of a connection's buffer and wake the connections waiting for memory."""
        self.used -= n
        if self.used <= self.limit:
            self._overdraft = None  # whatever the overdrawing connection still holds is within the budget now
        self._released.unpark_all()

    def hold_idle(self, holder: BufferHolder, since: float) -> None:
        """``holder`` waits for its next request with a grown buffer and nothing in it."""
        self._idle[holder] = since

    def unhold_idle(self, holder: BufferHolder) -> None:
        self._idle.pop(holder, None)

    async def give_back_idle_buffers_forever(self) -> None:
        """Every second, idle connections that have held a grown buffer for RESIZE_AFTER_S give it back."""
        while True:
            await trio.sleep(1.0)
            self._give_back_idle_buffers(RESIZE_AFTER_S)

    def _give_back_idle_buffers(self, idle_for: float) -> None:
        now = trio.current_time()
        for holder, since in list(self._idle.items()):
            if now - since >= idle_for:
                del self._idle[holder]
                holder.give_back_buffer()

    def _grant(self, owner: object, n: int) -> bool:
        if self.used + n > self.limit:
            if self._overdraft is not None and self._overdraft is not owner:
                return False
            self._overdraft = owner
        self.used += n
        return True
