"""The broker's counters that are not partition state: the server's (requests per API, connections) plus
waiting fetches, failed requests, storage errors and the cleaner's work. Plain ints, as server/stats.py says why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from logway.server.stats import ServerStats


@dataclass
class BrokerStats(ServerStats):
    """Counters and live values of the whole broker that the metrics collector reads (no partition state)."""

    fetches_waiting: int = 0  # long-polling fetches (Kafka's Fetch purgatory)
    failed_produce_requests: int = 0  # partitions of produce requests answered with an error
    failed_fetch_requests: int = 0
    storage_errors: Counter[str] = field(default_factory=Counter)  # per operation: append, read, flush
    retention_runs: int = 0  # passes of retention over every log (log.retention.check.interval.ms, at most 5 s)
    compactions: int = 0
    compactions_failed: int = 0
    compaction_bytes_removed: int = 0
    compaction_segments_cleaned: int = 0
