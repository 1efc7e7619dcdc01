"""The proxy's Prometheus endpoint: `GET /metrics` on metrics.host:metrics.port, served by the broker's bounded
HTTP code (server/metrics_http.py), with the per-client counters of proxy/filters/client_metrics.py."""

from __future__ import annotations

import trio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from logway.server.metrics_http import serve_scrapes


async def serve_registry(registry: CollectorRegistry, listeners: list[trio.SocketListener],
                         task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer scrapes of ``registry`` until cancelled; the text is formatted in a worker thread."""

    async def body(limiter: trio.CapacityLimiter) -> bytes:
        return await trio.to_thread.run_sync(generate_latest, registry, limiter=limiter)

    await serve_scrapes(body, listeners, task_status=task_status)
