"""The proxy's Prometheus endpoint: `GET /metrics` on metrics.host:metrics.port, as the broker's
(gateway/metrics/http.py: the same bounded HTTP handling), serving the per-client counters of
proxy/filters/client_metrics.py."""

from __future__ import annotations

from functools import partial

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from logway.gateway.metrics.http import CONTENT_TYPE, MAX_CONNECTIONS, PATHS, _read_head, _send


async def serve_registry(registry: CollectorRegistry, listeners: list[trio.SocketListener],
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer scrapes of ``registry`` until cancelled; one rendering at a time, in a worker thread."""
    slots = trio.Semaphore(MAX_CONNECTIONS)
    render_limiter = trio.CapacityLimiter(1)

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            if slots.value == 0:
                return  # too many scrapers at once: close
            async with slots:
                try:
                    await _answer(registry, stream, render_limiter)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [listener], handler_nursery=nursery))
        task_status.started()


async def _answer(registry: CollectorRegistry, stream: trio.SocketStream, limiter: trio.CapacityLimiter) -> None:
    head = await _read_head(stream)
    if head is None:
        return
    method, _, rest = head.partition(b" ")
    target = rest.split(b" ", 1)[0].split(b"?", 1)[0].decode("latin-1")
    if method not in (b"GET", b"HEAD"):
        await _send(stream, "405 Method Not Allowed", b"only GET\n", "text/plain", extra="Allow: GET, HEAD\r\n")
        return
    if target not in PATHS:
        await _send(stream, "404 Not Found", b"metrics are at /metrics\n", "text/plain")
        return
    body = await trio.to_thread.run_sync(generate_latest, registry, limiter=limiter)
    await _send(stream, "200 OK", body, CONTENT_TYPE, head_only=method == b"HEAD")
