"""Named deadlines for a sans-IO state machine: set, replace, cancel, and run the due ones for a given clock."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable

__all__ = ["Timers"]


class Timers:
    """A heap of deadlines keyed by name; setting a key again replaces its deadline (stale heap entries are skipped)."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, tuple[int, int, Callable[[int], None]]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._live

    def set(self, key: Hashable, deadline_ms: int, action: Callable[[int], None]) -> None:
        """Run ``action(deadline_ms)`` once a tick reaches ``deadline_ms``, replacing any timer under ``key``."""
        self._seq += 1
        self._live[key] = (deadline_ms, self._seq, action)
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        """Forget the timer under ``key`` if there is one."""
        self._live.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        """The deadline under ``key``, or None."""
        entry = self._live.get(key)
        return entry[0] if entry else None

    def run_due(self, now_ms: int) -> None:
        """Run every timer due at ``now_ms`` in deadline order, including ones that due timers set.

        Each action gets its own deadline as the time, so a late ``tick`` behaves like a punctual one.
        """
        while self._heap and self._heap[0][0] <= now_ms:
            deadline, seq, key = heapq.heappop(self._heap)
            entry = self._live.get(key)
            if entry is None or entry[1] != seq:
                continue
            del self._live[key]
            entry[2](deadline)

    def next_deadline(self) -> int | None:
        """The earliest live deadline, or None when nothing is scheduled."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._live.get(key)
            if entry is not None and entry[1] == seq:
                return deadline
            heapq.heappop(self._heap)
        return None
