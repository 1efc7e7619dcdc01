"""A benchmark case's outcome: per-broker runs of named metrics, summarised as median and min/max."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

BROKERS = ("logway", "tansu", "kafka")
PEERS = BROKERS[1:]


@dataclass
class Metric:
    """A figure shown in the table: its key in each run's dict, label, and which direction is better."""

    key: str
    label: str
    higher_is_better: bool = True


@dataclass
class CaseOutcome:
    """All runs of one case: `runs[broker]` is a list of {metric key: value} dicts, one per run."""

    section: str
    name: str
    params: dict
    metrics: list[Metric]
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def values(self, broker: str, key: str) -> list[float]:
        return [run[key] for run in self.runs.get(broker, []) if run.get(key) is not None]

    def summary(self, broker: str, key: str) -> dict[str, float] | None:
        """Median, min and max over the runs, or None when the broker has no value for the metric."""
        values = self.values(broker, key)
        if not values:
            return None
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}

    def ratio(self, key: str, peer: str = "tansu") -> float | None:
        """Logway median / the peer's median (None when either is missing or the peer's is zero)."""
        ours, theirs = self.summary("logway", key), self.summary(peer, key)
        if ours is None or theirs is None or theirs["median"] == 0:
            return None
        return ours["median"] / theirs["median"]

    def to_json(self) -> dict:
        return {
            "section": self.section, "name": self.name, "params": self.params, "note": self.note,
            "metrics": [m.__dict__ for m in self.metrics], "runs": self.runs, "peak_rss_mb": self.peak_rss_mb,
            "summary": {b: {m.key: self.summary(b, m.key) for m in self.metrics + [CPU]} for b in self.runs},
            "ratios": {m.key: self.ratio(m.key) for m in self.metrics + [CPU]},
            "ratios_by_peer": {peer: {m.key: self.ratio(m.key, peer) for m in self.metrics + [CPU]}
                               for peer in PEERS if peer in self.runs},
        }


CPU = Metric("cpu_s_per_gb", "broker CPU s/GB", higher_is_better=False)
