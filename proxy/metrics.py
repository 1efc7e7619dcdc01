"""The proxy's Prometheus endpoint: `GET /metrics` on metrics.host:metrics.port, served by the broker's bounded
HTTP code (server/metrics_http.py), with the per-client counters of proxy/filters/client_metrics.py and the client quotas' (proxy/quotas.py)."""

from __future__ import annotations

from collections.abc import Callable

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from logway.server.metrics_http import serve_scrapes


async def serve_registry(registry: CollectorRegistry, listeners: list[trio.SocketListener],
                         task_status=trio.TASK_STATUS_IGNORED, refresh: Callable[[], None] | None = None) -> None:
    """Answer scrapes of ``registry`` until cancelled; the text is formatted in a worker thread, after ``refresh``
    copied on the event loop what changes there (the client quotas' sensors)."""

    async def body(limiter: trio.CapacityLimiter) -> bytes:
        if refresh is not None:
            refresh()
        return await trio.to_thread.run_sync(generate_latest, registry, limiter=limiter)

    await serve_scrapes(body, listeners, task_status=task_status)
