"""The audit log's writer: events (server/audit.py) queued by the event loop, written as JSON lines by a worker
thread to a file that rotates by size, or to stderr.

The event loop never waits on the disk: ``record`` puts the event in a bounded queue and returns. When the
queue is full (the disk is slower than the events, or stalled), the event is dropped and counted, never
waited for: a warning is logged (at most every WARN_EVERY_S seconds), and once the writer catches up it
writes a line saying how many were lost ({"event": "audit", "outcome": "dropped", "dropped": n}), so a gap
in the log is visible in the log itself. ``written``, ``dropped`` and ``failed`` (lines a write error lost)
are the metrics.

Rotation is log4j's RollingFileAppender's, which Kafka's own logs use: when the next line would take the file
past ``max_bytes`` it becomes ``<file>.1``, ``<file>.1`` becomes ``<file>.2``, ..., and the oldest beyond
``backups`` is deleted; the log never takes more than (backups + 1) x max_bytes. A line is never split.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Metric
from prometheus_client.core import CounterMetricFamily

from logway.server.audit import Audit, Event, bounded

log = logging.getLogger(__name__)

STDERR = "-"
WARN_EVERY_S = 10.0
_BATCH = 1000  # events written per write call, at most
_STOP = object()

# The settings' keys under a prefix (the broker's audit.log., a proxy filter's proxy.filter.<name>.), and
# their defaults: 100 MiB files, 9 rotated ones kept (1 GB at most), 10,000 events queued.
KEYS: dict[str, str] = {"file": "", "file.max.bytes": "104857600", "file.backups": "9", "queue.max.events": "10000"}


@dataclass(frozen=True)
class AuditSettings:
    """Where and how the audit log is written: ``file`` a path, or "-" for stderr (no rotation)."""

    file: str
    max_bytes: int = 104857600
    backups: int = 9
    queue_events: int = 10000

    @classmethod
    def read(cls, values: Mapping[str, str], key: Callable[[str], str], error: type[Exception]) -> AuditSettings:
        """From ``values`` (KEYS' suffixes to strings); ``key`` names a suffix's full property for ``error``."""
        def number(suffix: str, low: int) -> int:
            try:
                value = int(values[suffix].strip())
            except ValueError:
                raise error(f"{key(suffix)}={values[suffix]!r}: expected an integer") from None
            if value < low:
                raise error(f"{key(suffix)}={value}: must be at least {low}")
            return value
        return cls(values["file"].strip(), number("file.max.bytes", 1024), number("file.backups", 0),
                   number("queue.max.events", 1))


class AuditLog(Audit):
    """Events written as JSON lines by a worker thread, from a bounded queue (see the module's docstring)."""

    enabled = True

    def __init__(self, settings: AuditSettings) -> None:
        self.settings = settings
        self.written = 0  # lines written (the worker's count)
        self.failed = 0  # lines a write error lost (the worker's count)
        self.dropped = 0  # events dropped with the queue full (the event loop's count)
        self._reported = 0  # of ``dropped``, how many a "dropped" line has told (the worker's)
        self._warned_at = float("-inf")
        self._closed = False
        # Opened here, so a path that cannot be written stops start-up (OSError) instead of losing every event.
        self._out = _Stderr() if settings.file == STDERR else _RotatingFile(Path(settings.file), settings.max_bytes,
                                                                             settings.backups)
        self._queue: queue.Queue = queue.Queue(settings.queue_events)
        self._thread = threading.Thread(target=self._run, name="audit-log", daemon=True)
        self._thread.start()

    def record(self, event: Event) -> None:
        if self._closed:
            return
        try:
            self._queue.put_nowait((time.time(), event))
        except queue.Full:
            self.dropped += 1
            now = time.monotonic()
            if now - self._warned_at >= WARN_EVERY_S:
                self._warned_at = now
                log.warning("audit log %s: its queue is full (%d events, queue.max.events): events are dropped "
                            "(%d so far) until the writer catches up", self.settings.file,
                            self.settings.queue_events, self.dropped)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking events, write the queued ones (within ``timeout`` seconds) and close the file."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return  # the writer is stuck on the disk: it is a daemon thread, the process may exit
        self._thread.join(timeout)

    # --- the worker thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < _BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(e is _STOP for e in batch)
            lines = [_line(*e) for e in batch if e is not _STOP]
            dropped = self.dropped
            if dropped > self._reported:
                lines.append(_line(time.time(), {"event": "audit", "outcome": "dropped",
                                                 "dropped": dropped - self._reported,
                                                 "message": "events dropped: the audit log's queue was full"}))
                self._reported = dropped
            self._write(lines)
        self._out.close()

    def _write(self, lines: list[str]) -> None:
        try:
            self._out.write(lines)
            self.written += len(lines)
        except OSError as exc:
            self.failed += len(lines)
            log.warning("audit log %s: %d lines lost: %s", self.settings.file, len(lines), exc)


def audit_families(logs: Sequence[tuple[Mapping[str, str], AuditLog]]) -> list[Metric]:
    """The writers' counters as Prometheus families (both processes' /metrics), each log with its labels."""
    out = []
    for name, doc, value in (
            ("logway_audit_events_written", "Audit log lines written", lambda a: a.written),
            ("logway_audit_events_dropped", "Audit events dropped because the audit log's queue was full",
             lambda a: a.dropped),
            ("logway_audit_events_failed", "Audit log lines lost to a write error", lambda a: a.failed)):
        family = CounterMetricFamily(name, doc, labels=list(logs[0][0]) if logs else [])
        for labels, audit in logs:
            family.add_metric(list(labels.values()), value(audit))
        out.append(family)
    return out


def _line(when: float, event: Event) -> str:
    stamp = datetime.datetime.fromtimestamp(when, datetime.UTC)
    out = {"time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"), **event}
    return json.dumps(bounded(out), ensure_ascii=False, separators=(",", ":"), default=str)


class _Stderr:
    def write(self, lines: list[str]) -> None:
        data = "".join(line + "\n" for line in lines).encode()
        while data:
            data = data[os.write(2, data):]

    def close(self) -> None:
        pass


class _RotatingFile:
    """An append-only file rotated by size, log4j's way (see the module's docstring)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.fd = -1
        self._open()

    def _open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        self.size = os.fstat(self.fd).st_size

    def write(self, lines: list[str]) -> None:
        if self.fd < 0:
            self._open()  # after a failed rotation
        chunk: list[bytes] = []
        pending = 0
        for line in lines:
            data = line.encode() + b"\n"
            if self.size + pending + len(data) > self.max_bytes and self.size + pending > 0:
                self._append(b"".join(chunk))
                chunk, pending = [], 0
                self._rotate()
            chunk.append(data)
            pending += len(data)
        self._append(b"".join(chunk))

    def _append(self, data: bytes) -> None:
        while data:
            n = os.write(self.fd, data)
            self.size += n
            data = data[n:]

    def _rotate(self) -> None:
        os.close(self.fd)
        self.fd = -1
        name = str(self.path)
        if self.backups == 0:
            os.unlink(name)
        else:
            for i in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{name}.{i}"):
                    os.replace(f"{name}.{i}", f"{name}.{i + 1}")
            os.replace(name, f"{name}.1")
        self._open()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
