"""Descriptors opened on first use, and the process-wide bound on open segment files (DESIGN.md principle 4).

Segment and index files are opened on first use (`LazyFile`), so idle partitions hold no descriptors.
Segments register here when they open their files; when more than ``max_open`` segments hold
descriptors, the least recently opened one not used since it was last looked at (the CLOCK second-chance
rule) gives its descriptors up and reopens them when next used. An evicted descriptor is closed only after
``grace_s``: a sendfile or fsync that read the number just before the eviction keeps a valid descriptor of
the same file (the rule Kafka's file.delete.delay.ms gives deleted segments). Kafka itself leaves this to the
OS limit; the bound is per process, like that limit.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from logway.storage import fs

log = logging.getLogger(__name__)

DEFAULT_MAX_OPEN_SEGMENTS = 2048  # broker property log.max.open.segments
GRACE_S = 30.0
OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class LazyFile:
    """A file's descriptor, opened on first use and closed until the next use or for good.

    The loop and a flush or compaction thread may both get to it first: opening and closing hold ``_open_lock``.
    """

    def __init__(self) -> None:
        self._fd = -1
        self._closed = False
        self._open_lock = threading.Lock()

    def _open_fd(self, path: Path) -> tuple[int, bool]:
        """The descriptor of ``path`` (-1 once closed for good), and whether this call opened it."""
        with self._open_lock:
            opened = self._fd < 0 and not self._closed
            if opened:
                self._fd = fs.open(path, OPEN_FLAGS, 0o644)
            return self._fd, opened

    def _close_fd(self, *, final: bool = False) -> None:
        """Close the descriptor if one is open; ``final``: never open it again."""
        with self._open_lock:
            if final:
                self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class Evictable(Protocol):
    """What the registry needs of a segment: give up its descriptors, and a flag set on each use."""

    recently_used: bool

    def evict_files(self) -> list[int]: ...


class OpenFiles:
    """Segments holding descriptors, oldest first, and the evicted descriptors waiting to be closed."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_SEGMENTS, grace_s: float = GRACE_S) -> None:
        self.max_open = max_open
        self.grace_s = grace_s
        self._open: OrderedDict[int, Evictable] = OrderedDict()
        self._closing: list[tuple[float, int]] = []  # a heap of (close after, descriptor)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, segment: Evictable) -> None:
        """``segment`` just opened a descriptor: register it and evict others over the bound."""
        now = time.monotonic()
        with self._lock:
            self._open[id(segment)] = segment
            self._open.move_to_end(id(segment))
            looked = 0
            while len(self._open) > self.max_open:
                key, victim = self._open.popitem(last=False)
                if victim is segment or (victim.recently_used and looked < len(self._open)):
                    victim.recently_used = victim is segment  # second chance; the one just opened always stays
                    self._open[key] = victim
                    looked += 1
                    continue
                for fd in victim.evict_files():
                    heapq.heappush(self._closing, (now + self.grace_s, fd))
            self._close_due(now)

    def forget(self, segment: Evictable) -> None:
        """``segment`` closed or released its descriptors itself."""
        with self._lock:
            self._open.pop(id(segment), None)

    def close_expired(self) -> None:
        """Close evicted descriptors whose grace period is over (called from log maintenance too)."""
        with self._lock:
            self._close_due(time.monotonic())

    def _close_due(self, now: float) -> None:
        # Past the hard cap the oldest evicted descriptors close early: the bound wins over the grace period.
        cap = 3 * self.max_open
        while self._closing and (self._closing[0][0] <= now or len(self._closing) > cap):
            if self._closing[0][0] > now:
                log.warning("closing an evicted segment descriptor before its grace period: raise log.max.open.segments")
            os.close(heapq.heappop(self._closing)[1])


OPEN_SEGMENTS = OpenFiles()
