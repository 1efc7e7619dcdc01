"""Per-log-dir offset checkpoint files in Kafka's format (OffsetCheckpointFile).

Used for ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from logway.storage import fs

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

log = logging.getLogger(__name__)


def write_atomically(path: Path, data: str | bytes, *, mode: int = 0o666, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash or a power loss leaves the old or the new file whole:
    a temp file, fsync, rename, then an fsync of the directory, which makes the rename itself durable (Kafka
    writes its checkpoint and meta.properties files so). ``mode`` is for a new file (0o600: owner only);
    ``sync_dir=False``: the caller fsyncs the directory itself, once for several files."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(path.name + ".tmp")
    fd = fs.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        view = memoryview(raw)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])
        fs.fsync(fd)
    finally:
        os.close(fd)
    fs.replace(tmp, path)
    if sync_dir:
        fs.sync_dir(path.parent)


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Replace the file atomically and durably (`write_atomically`), as Kafka's CheckpointFile does."""
    lines = ["0", str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(path, "\n".join(lines) + "\n")


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; empty when missing or malformed (then everything is recovered)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    try:
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or entry count")
        result = {}
        for line in lines[2:]:
            topic, partition, offset = line.split()
            result[(topic, int(partition))] = int(offset)
        return result
    except (IndexError, ValueError) as e:
        log.warning("ignoring malformed checkpoint file %s: %s", path, e)
        return {}
