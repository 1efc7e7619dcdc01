"""Cold reads off the event loop (DESIGN.md principle 5): record data not in the page cache is read in by a
worker thread before the loop touches it.

Fetch reads batch headers with os.pread and sends record data with os.sendfile on the event loop. Both are
cheap on cached pages and block the whole loop, every connection with it, while the kernel reads a cold page
from disk (a consumer catching up on old segments). So a Fetch first probes the ranges it will read
(storage.residency.cached: one cachestat call per partition that has data, none for a partition at its log
end), and pages the cold ones in from a worker thread; the loop serves the other connections meanwhile, then
reads and sends from the page cache as before. Kafka does the read side on its request-handler threads
(num.io.threads) and sendfile on its network threads, where a cold page stalls only that thread's connections;
here one loop serves them all, hence the probe.
"""

from __future__ import annotations

import trio

from logway.storage import residency

# Worker threads paging in at once, for the whole broker: enough to keep a disk busy, few enough that
# cold readers cannot take every thread trio has (Kafka's num.io.threads default is 8, its cores' share here).
PAGE_IN_THREADS = 4

_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("cold_read_limiter")


def _limiter() -> trio.CapacityLimiter:
    """The broker's page-in limiter (one per trio run: tests run several gateways in one process)."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(PAGE_IN_THREADS)
        _LIMITER.set(limiter)
        return limiter


def _page_in_all(extents: list[tuple[int, int, int]]) -> None:
    for fd, position, size in extents:
        residency.page_in(fd, position, size)


async def page_in(extents: list[tuple[int, int, int]]) -> None:
    """Read the (fd, position, size) ranges into the page cache in a worker thread; the loop runs meanwhile."""
    await trio.to_thread.run_sync(_page_in_all, extents, limiter=_limiter())
