"""Synthetic page-view events (JSON) and the plain-Python counts the Spark job must reproduce."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import confluent_kafka as ck

MINUTE_MS = 60_000
# Starts three minutes before midnight UTC, so the Parquet output spans two date partitions.
DEFAULT_START_MS = int(datetime(2024, 3, 1, 23, 57, tzinfo=UTC).timestamp() * 1000)


@dataclass(frozen=True)
class PageView:
    """One event: who viewed which page, when (epoch milliseconds, event time)."""

    page: str
    user: str
    ts: int

    def to_json(self) -> bytes:
        return json.dumps({"page": self.page, "user": self.user, "ts": self.ts}).encode()


def generate(count: int, pages: int = 5, users: int = 50, start_ms: int = DEFAULT_START_MS, minutes: int = 6,
             max_disorder_ms: int = 20_000, seed: int = 7) -> list[PageView]:
    """Events in roughly increasing time, each at most max_disorder_ms earlier than the newest before it."""
    rng = random.Random(seed)
    span = minutes * MINUTE_MS
    events = []
    for i in range(count):
        base = start_ms + span * i // max(count, 1)
        ts = max(start_ms, base - rng.randrange(0, max_disorder_ms + 1))
        page = f"/page/{min(int(rng.expovariate(0.6)), pages - 1)}"  # a few popular pages, a long tail
        events.append(PageView(page, f"user-{rng.randrange(users)}", ts))
    return events


def produce(bootstrap: str, topic: str, events: Iterable[PageView], extra_config: Mapping[str, str] = ()) -> int:
    """Send events keyed by user, with the Kafka timestamp set to the event time; returns the count acknowledged."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", **dict(extra_config)})
    failures: list[ck.KafkaError] = []
    sent = 0
    for event in events:
        while True:
            try:
                producer.produce(topic, key=event.user.encode(), value=event.to_json(), timestamp=event.ts,
                                 on_delivery=lambda err, _msg: err is not None and failures.append(err))
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
    if producer.flush(60) != 0 or failures:
        raise RuntimeError(f"producing events failed: {failures[:3] or 'flush timed out'}")
    return sent


def minute_of(ts_ms: int) -> datetime:
    """The start of the one-minute tumbling window holding ts_ms (UTC)."""
    return datetime.fromtimestamp(ts_ms // MINUTE_MS * MINUTE_MS / 1000, tz=UTC)


def expected_counts(events: Iterable[PageView]) -> dict[tuple[str, datetime], int]:
    """Views per (page, minute): what the streaming job computes, in plain Python."""
    return dict(Counter((e.page, minute_of(e.ts)) for e in events))


def closed_windows(counts: Mapping[tuple[str, datetime], int], events: list[PageView],
                   watermark_delay_ms: int) -> dict[tuple[str, datetime], int]:
    """The windows an append-mode query has emitted once all events are in: end <= max event time - delay."""
    watermark = max(e.ts for e in events) - watermark_delay_ms
    return {k: v for k, v in counts.items() if k[1].timestamp() * 1000 + MINUTE_MS <= watermark}
