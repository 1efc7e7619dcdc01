"""A traced librdkafka consume (issue 15's investigation): per-fetch request/response log lines and statistics.

Runs like rdkafka_load.consume, with `debug=fetch,protocol` routed to a Python logger and
`statistics.interval.ms`, and returns, beside the throughput, a summary of what the client did: how many Fetch
requests it sent, the response sizes and round trips it saw, how often and why it backed off a partition
(librdkafka's "Fetch backoff ... queued.min.messages exceeded" lines), and its prefetch queue from the stats.
"""

from __future__ import annotations

import json
import logging
import os
import re
import statistics
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench.loadgen import ready

_SENT = re.compile(r"Sent FetchRequest \(v(\d+), (\d+) bytes")
_RECEIVED = re.compile(r"Received FetchResponse \(v(\d+), (\d+) bytes, CorrId \d+, rtt ([\d.]+)ms\)")
_BACKOFF = re.compile(r"(?:Fetch backoff|backoff) for (\d+)ms:? ?(.*)$")
_MSGSET = re.compile(r"MessageSet size (\d+)")


class _Collector(logging.Handler):
    """Counts librdkafka's debug lines of interest, with their monotonic times."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[float, int, int]] = []
        self.received: list[tuple[float, int, float]] = []
        self.backoffs: dict[str, int] = {}
        self.backoff_ms: list[int] = []
        self.partition_sizes: list[int] = []
        self.samples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        now = time.monotonic()
        if m := _SENT.search(text):
            self.sent.append((now, int(m[1]), int(m[2])))
        elif m := _RECEIVED.search(text):
            self.received.append((now, int(m[2]), float(m[3])))
        elif m := _MSGSET.search(text):
            self.partition_sizes.append(int(m[1]))
        elif "backoff" in text.lower() and (m := _BACKOFF.search(text)):
            reason = re.sub(r"\d+", "N", m[2])[:80]
            self.backoffs[reason] = self.backoffs.get(reason, 0) + 1
            self.backoff_ms.append(int(m[1]))
        if len(self.samples) < 60 and ("Fetch" in text or "fetch" in text):
            self.samples.append(text[:240])


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    values = sorted(values)
    n = len(values)
    return {"n": n, "min": values[0], "p50": values[(n - 1) // 2], "p90": values[int(0.9 * (n - 1))],
            "max": values[-1], "mean": statistics.fmean(values)}


def consume(spec: dict) -> dict:
    """Read the `assign` partitions from earliest to their `ends`, tracing fetches; extra client settings in
    spec["config"]."""
    collector = _Collector()
    logger = logging.getLogger(f"rdkafka-{os.getpid()}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(collector)
    logger.propagate = False
    stats: list[dict] = []
    progress = [0]  # messages the application has taken so far (read by the stats callback)

    def on_stats(raw: str) -> None:
        data = json.loads(raw)
        row = {"t": time.monotonic(), "got": progress[0], "partitions": {}, "brokers": {}}
        for name, b in data.get("brokers", {}).items():
            if b.get("nodeid", -1) >= 0:
                row["brokers"][name] = {"rtt_avg_us": b["rtt"]["avg"], "fetch_req": b["req"].get("Fetch", 0),
                                        "rx": b["rx"], "rxbytes": b["rxbytes"]}
        for t in data.get("topics", {}).values():
            for p, s in t["partitions"].items():
                if p != "-1":
                    row["partitions"][p] = {"fetch_state": s["fetch_state"], "fetchq_cnt": s["fetchq_cnt"],
                                            "fetchq_size": s["fetchq_size"]}
        stats.append(row)

    config = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": f"bench-{os.getpid()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.wait.max.ms": spec.get("fetch_wait_ms", 500),
        "statistics.interval.ms": 250,
        "stats_cb": on_stats,
        "logger": logger,
        **spec.get("config", {}),
    }
    if spec.get("debug", True):
        config["debug"] = "fetch,protocol"
    consumer = Consumer(config)
    consumer.list_topics(spec["topic"], timeout=30)
    topic, ends = spec["topic"], spec["ends"]
    partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in spec["assign"]]
    count = sum(ends)
    ready()
    start = time.monotonic()
    deadline = start + spec.get("timeout", 300)
    consumer.assign(partitions)
    got = 0
    while time.monotonic() < deadline:
        got += len(consumer.consume(10000, 0.5))
        progress[0] = got
        if got >= count and all(tp.offset >= e for tp, e in zip(consumer.position(partitions), ends, strict=True)):
            break
    end = time.monotonic()
    done = sum(min(max(tp.offset, 0), e) for tp, e in zip(consumer.position(partitions), ends, strict=True))
    consumer.close()
    window = [s for s in stats if start <= s["t"] <= end]
    queued = [max((p["fetchq_size"] for p in s["partitions"].values()), default=0) for s in window]
    states: dict[str, int] = {}
    for s in window:
        for p in s["partitions"].values():
            states[p["fetch_state"]] = states.get(p["fetch_state"], 0) + 1
    sent = [x for x in collector.sent if start <= x[0] <= end]
    received = [x for x in collector.received if start <= x[0] <= end]
    fetches = [sum(b["fetch_req"] for b in s["brokers"].values()) for s in window]
    rtts = [b["rtt_avg_us"] / 1000 for s in window for b in s["brokers"].values() if b["rtt_avg_us"]]
    return {
        "start": start, "end": end, "messages": done, "bytes": done * spec["size"], "errors": count - done,
        "trace": {
            "fetch_requests": len(sent),
            "fetch_requests_per_s": len(sent) / (end - start),
            "request_bytes": _quantiles([x[2] for x in sent]),
            "request_version": sorted({x[1] for x in sent}),
            "response_bytes": _quantiles([x[1] for x in received]),
            "rtt_ms": _quantiles([x[2] for x in received]),
            "partition_msgset_bytes": _quantiles(collector.partition_sizes),
            "backoffs": collector.backoffs,
            "backoff_ms": _quantiles(collector.backoff_ms),
            "fetchq_total_bytes": _quantiles(queued),
            "fetch_states": states,
            "stats_fetch_requests": fetches[-1] - fetches[0] if fetches else None,
            "stats_rtt_avg_ms": _quantiles(rtts),
            "samples": collector.samples[:40],
            # Per stats interval: seconds since start, MB taken by the application, MB queued in the client
            # (one partition's fetchq_size: with the high-level consumer every partition queue forwards to the
            # one consumer queue, so each reports the same total), Fetch requests sent.
            "timeline": [(round(s["t"] - start, 2), round((s["got"] - w["got"]) * spec["size"] / 1e6, 1),
                          round(max((p["fetchq_size"] for p in s["partitions"].values()), default=0) / 1e6, 1),
                          sum(b["fetch_req"] for b in s["brokers"].values())
                          - sum(b["fetch_req"] for b in w["brokers"].values()))
                         for w, s in zip(window, window[1:], strict=False)],
        },
    }
