"""Progress lines for long storage work (recovery at start-up, compaction): at most one per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# The operator promise: a long recovery or compaction says how far it got at least this often.
PROGRESS_INTERVAL_S = 10.0


class Progress:
    """Call ``update(...)`` as work advances; it logs ``message % args`` when the interval has passed since the
    start or the last line. The clock and interval are read at each call, so tests can shorten them."""

    def __init__(self, logger: logging.Logger, message: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._message = message
        self._clock = clock
        self._last = clock()

    def update(self, *args: object) -> None:
        now = self._clock()
        if now - self._last >= PROGRESS_INTERVAL_S:
            self._last = now
            self._log.info(self._message, *args)
