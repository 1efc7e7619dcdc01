"""The server's request and connection counters, read by the metrics collectors: requests per API and
version with their total time, open and accepted connections per listener, the request memory budget.

Everything here is a plain int (or a list of ints) incremented on the event loop; the collector reads them at
scrape time. A prometheus_client ``Counter.labels(...).inc()`` per request costs a dict lookup under a lock
plus a float add under another lock (measured in bench/metrics_scrape.py); these cost an attribute and a
list index.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from logway.wire.protocol import api_name

if TYPE_CHECKING:
    from logway.server.request_memory import RequestMemory

# Upper bounds (ms) of the request latency buckets; one more bucket catches everything slower.
LATENCY_BOUNDS_MS: tuple[float, ...] = (
    0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
)
# Kafka's request-time histograms are Yammer histograms over an exponentially decaying reservoir (about the last
# five minutes); the percentiles here come from the requests of the current and the previous window.
QUANTILE_WINDOW_S = 60.0


def request_label(api_key: int) -> str:
    """Kafka's request name for the `request` label (ApiKeys.name): Produce, Fetch, ApiVersions, ..."""
    name = api_name(api_key) or str(api_key)
    return "".join(part.capitalize() for part in name.split("_"))


class ApiStats:
    """Requests of one API: counts per version, and their total time (receive to response sent) in buckets."""

    __slots__ = ("api_key", "versions", "buckets", "window", "previous_window", "window_start", "count", "total_ms")

    def __init__(self, api_key: int) -> None:
        self.api_key = api_key
        self.versions: list[int] = [0] * 32  # index = request version (Kafka's versions are far below 32)
        self.buckets: list[int] = [0] * (len(LATENCY_BOUNDS_MS) + 1)  # since start (the Prometheus histogram)
        self.window: list[int] = [0] * (len(LATENCY_BOUNDS_MS) + 1)  # this window (the Kafka-style percentiles)
        self.previous_window: list[int] = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        self.window_start = time.monotonic()
        self.count = 0
        self.total_ms = 0.0

    def record(self, version: int, elapsed_ms: float) -> None:
        if 0 <= version < 32:
            self.versions[version] += 1
        i = bisect_left(LATENCY_BOUNDS_MS, elapsed_ms)
        self.buckets[i] += 1
        self.window[i] += 1
        self.count += 1
        self.total_ms += elapsed_ms

    def recent_buckets(self, now: float) -> list[int]:
        """The buckets of the current and the previous window, rolling the window over when it is done."""
        if now - self.window_start >= QUANTILE_WINDOW_S:
            self.previous_window, self.window = self.window, [0] * len(self.window)
            self.window_start = now
        return [a + b for a, b in zip(self.window, self.previous_window, strict=True)]


class RequestStats:
    """ApiStats per API key, made on the first request of each."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiStats] = {}

    def record(self, api_key: int, version: int, elapsed_ms: float) -> None:
        stats = self.apis.get(api_key)
        if stats is None:
            stats = self.apis[api_key] = ApiStats(api_key)
        stats.record(version, elapsed_ms)


@dataclass
class ServerStats:
    """What the server layer counts: requests per API (Connection), connections per listener (Server) and the
    request memory budget in use."""

    requests: RequestStats = field(default_factory=RequestStats)
    connections: Counter[str] = field(default_factory=Counter)  # open connections per listener name
    connections_created: Counter[str] = field(default_factory=Counter)
    memory: RequestMemory | None = None  # request buffers (queued.max.request.bytes), set by the server
