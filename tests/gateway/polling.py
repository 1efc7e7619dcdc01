"""Waiting in tests for what the broker does in the background (retention, rolls), bounded in time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> None:
    """Return once ``check()`` is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
