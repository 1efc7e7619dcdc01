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

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"

log = logging.getLogger(__name__)


def write_atomically(path: Path, text: str, *, mode: int = 0o666, sync_dir: bool = False) -> None:
    """Replace ``path`` with ``text`` atomically: a temp file, fsync, rename (and an fsync of the directory
    when the rename itself must survive a crash). ``mode`` is for a new file (0o600: owner only)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", opener=lambda name, flags: os.open(name, flags, mode)) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync_dir:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Replace the file atomically (write a temp file, fsync, rename), as Kafka's CheckpointFile does."""
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
