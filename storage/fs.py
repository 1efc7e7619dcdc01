"""The file-system calls that change what survives a power loss, made by the storage layer and every
metadata writer through this one module.

Creating, truncating, fsyncing, renaming and removing files and directories go through the names
here, always looked up as ``fs.<name>`` at the call (never ``from logway.storage.fs import ...``),
so a test can replace them all at once: the power-loss test (tests/power_loss/) records what was
fsynced and rebuilds the directory a power loss would leave. In production they are the ``os``
and ``shutil`` functions themselves, so a call costs what ``os.fsync`` costs. Reads and appends
(``os.pread``, ``os.write``) stay plain ``os`` calls: what of them survives is decided by the
fsyncs and truncations recorded here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["fdatasync", "fsync", "ftruncate", "make_dirs", "mkdir", "open", "replace", "rmtree", "sync_dir", "unlink"]

open = os.open  # noqa: A001 - os.open's name, the call it is
ftruncate = os.ftruncate
fsync = os.fsync
# fdatasync(2) also writes the metadata a later read needs, such as the size of an appended file, and skips the
# rest (mtime): enough for an append-only file. Where the platform has none, fsync.
fdatasync = getattr(os, "fdatasync", os.fsync)
replace = os.replace
mkdir = os.mkdir
rmtree = shutil.rmtree


def unlink(path: str | Path, missing_ok: bool = False) -> None:
    """Remove a file (``missing_ok``: a file already gone is not an error, as Path.unlink)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise


def sync_dir(path: str | Path) -> None:
    """fsync a directory, so the names created, renamed or removed in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: str | Path) -> None:
    """Create a directory and its missing parents, each one durably (its parent fsynced after it is made)."""
    path = Path(path)
    if path.is_dir():
        return
    make_dirs(path.parent)
    try:
        mkdir(path)
    except FileExistsError:
        return
    sync_dir(path.parent)
