"""Kafka's metric stats that client quotas are measured with, sans-IO (times are milliseconds passed in).

`Rate` is Kafka's ``Rate`` over a ``WindowedSum`` (org.apache.kafka.common.metrics.stats): values are summed into
``quota.window.num`` samples of ``quota.window.size.seconds`` each (one extra sample overlaps the oldest edge), and
the rate is their sum over the time they span, counted as at least ``num - 1`` whole windows: so a new client may
send ``(num - 1) x window x quota`` bytes at once before it is throttled (Kafka's burst), and a sample falls out
``num`` windows after its last value. `Avg` is the same sampling averaging the values (the throttle-time metric);
`TokenBucket` is KIP-599's bucket for controller mutations (burst ``num x window x quota``).

``throttle_ms`` is Kafka's QuotaUtils.throttleTime: the delay X after which the observed rate O falls back to the
quota T over the window W, ``O x W / (W + X) = T``, so ``X = (O - T) / T x W``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Windows:
    """How a rate is sampled: ``num`` samples of ``size_ms`` (Kafka's quota.window.num and .size.seconds)."""

    num: int = 11
    size_ms: int = 1000


class _Sample:
    __slots__ = ("start", "last", "value", "count")

    def __init__(self, now: int) -> None:
        self.reset(now)

    def reset(self, now: int) -> None:
        self.start = self.last = now
        self.value = 0.0
        self.count = 0


class _SampledStat:
    """Kafka's SampledStat: values recorded into the current sample, which rolls over every window."""

    __slots__ = ("samples", "current")

    def __init__(self) -> None:
        self.samples: list[_Sample] = []
        self.current = 0

    def record(self, windows: Windows, value: float, now: int) -> None:
        sample = self._current(now)
        if now - sample.start >= windows.size_ms:
            sample = self._advance(windows, now)
        sample.value += value
        sample.count += 1
        sample.last = now

    def _current(self, now: int) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now))
        return self.samples[self.current]

    def _advance(self, windows: Windows, now: int) -> _Sample:
        # One sample more than the windows: the one overlapping the oldest edge of the monitored time.
        self.current = (self.current + 1) % (windows.num + 1)
        if self.current >= len(self.samples):
            sample = _Sample(now)
            self.samples.append(sample)
            return sample
        sample = self.samples[self.current]
        sample.reset(now)
        return sample

    def purge(self, windows: Windows, now: int) -> None:
        """Reset the samples without a value in the last ``num`` windows (Kafka's purgeObsoleteSamples)."""
        expire_age = windows.num * windows.size_ms
        for sample in self.samples:
            if now - sample.last >= expire_age:
                sample.reset(now)

    def total(self) -> float:
        return sum(sample.value for sample in self.samples)


class _Sampled:
    """A stat over sample windows: values are recorded into the current sample."""

    __slots__ = ("stat",)

    def __init__(self) -> None:
        self.stat = _SampledStat()

    def record(self, windows: Windows, value: float, now: int) -> None:
        self.stat.record(windows, value, now)


class Rate(_Sampled):
    """Kafka's Rate(WindowedSum): the sum of the recent values per second."""

    __slots__ = ()

    def measure(self, windows: Windows, now: int) -> float:
        """The rate per second now."""
        total, window_ms = self.total_and_window(windows, now)
        return total / (window_ms / 1000)

    def total_and_window(self, windows: Windows, now: int) -> tuple[float, int]:
        """The recent values' sum and the time it is measured over, in one pass (the quota check of every request):
        since the oldest sample, at least ``num - 1`` whole windows (Rate.windowSize: a young sensor does not measure
        a burst over its few milliseconds), at least 1 ms."""
        samples = self.stat.samples
        if not samples:
            samples.append(_Sample(now))
        size = windows.size_ms
        expire = windows.num * size
        total = 0.0
        oldest = now
        for sample in samples:  # purgeObsoleteSamples, combine and oldest, together
            if now - sample.last >= expire:
                sample.reset(now)
            total += sample.value
            if sample.start < oldest:
                oldest = sample.start
        elapsed = now - oldest
        full = elapsed // size
        if full < windows.num - 1:
            elapsed += (windows.num - 1 - full) * size
        return total, max(elapsed, 1)


class Avg(_Sampled):
    """Kafka's Avg: the mean of the recent values (NaN with none, as Kafka reports it)."""

    __slots__ = ()

    def measure(self, windows: Windows, now: int) -> float:
        self.stat.purge(windows, now)
        count = sum(sample.count for sample in self.stat.samples)
        return self.stat.total() / count if count else math.nan


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): ``quota`` tokens a second up to a burst of ``num x window x quota``; a
    mutation takes its tokens, and the bucket may go negative (the next mutation then waits for the refill)."""

    __slots__ = ("tokens", "updated")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.updated = 0  # Kafka starts at time 0: the first refill fills the bucket

    def measure(self, windows: Windows, quota: float, now: int) -> float:
        self._refill(windows, quota, now)
        return self.tokens

    def record(self, windows: Windows, quota: float, value: float, now: int) -> None:
        self._refill(windows, quota, now)
        self.tokens = min(_burst(windows, quota), self.tokens - value)

    def _refill(self, windows: Windows, quota: float, now: int) -> None:
        self.tokens = min(_burst(windows, quota), self.tokens + quota * (now - self.updated) / 1000)
        self.updated = now


def _burst(windows: Windows, quota: float) -> float:
    return windows.num * windows.size_ms / 1000 * quota


def java_round(value: float) -> int:
    """Java's Math.round: half up (Python's round is half to even)."""
    return math.floor(value + 0.5)


def throttle_ms(observed: float, bound: float, window_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime: how long until ``observed`` falls back to ``bound`` over ``window_ms``."""
    return java_round((observed - bound) / bound * window_ms)
