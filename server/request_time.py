"""The event-loop time each connection takes, for Kafka's request_percentage quota.

Kafka measures a request's time on its request handler thread (and its network thread), and a
``request_percentage`` quota of 50 lets a client use half of one thread's time. Logway serves every connection on
one event loop; a request's time is what the connection's tasks run of it: the steps of its task (and of the tasks
it starts, which inherit its context) between two of its requests, so a request waiting (a long poll, a join, an
fsync) costs nothing while it waits, as in Kafka. A trio Instrument times the task steps; it is installed once a
request_percentage quota exists (`enable`), so without one the loop pays nothing.
"""

from __future__ import annotations

import contextvars
from time import perf_counter
from typing import Protocol

import trio

# The connection the running task works for (set by Connection.run in its task; inherited by tasks it starts).
CURRENT: contextvars.ContextVar[Metered | None] = contextvars.ContextVar("logway_connection", default=None)
_INSTRUMENT: trio.lowlevel.RunVar = trio.lowlevel.RunVar("logway_request_times", default=None)


class Metered(Protocol):
    """What a connection holds for this: its tasks' running time (s), and the part already charged to requests."""

    loop_s: float
    loop_charged_s: float


class RequestTimes(trio.abc.Instrument):
    """Adds each task step's duration to the connection the task works for."""

    def __init__(self) -> None:
        self.began = perf_counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.began = perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        metered = task.context.get(CURRENT)
        if metered is not None:
            metered.loop_s += perf_counter() - self.began


def enable() -> None:
    """Start timing task steps in this trio run (idempotent): a request_percentage quota was set."""
    if _INSTRUMENT.get() is None:
        instrument = RequestTimes()
        trio.lowlevel.add_instrument(instrument)
        _INSTRUMENT.set(instrument)


def take(metered: Metered) -> float:
    """The event-loop seconds the connection has used since the last call (the current step so far included):
    one request's time, charged once. 0 while timing is off."""
    instrument = _INSTRUMENT.get()
    if instrument is None:
        return 0.0
    total = metered.loop_s + (perf_counter() - instrument.began)
    used = total - metered.loop_charged_s
    metered.loop_charged_s = total
    return max(used, 0.0)
