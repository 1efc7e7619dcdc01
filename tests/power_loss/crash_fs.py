"""A simulated power loss without FUSE: record what the storage layer fsyncs, then rebuild what a disk would keep.

`Recorder.install` replaces the functions of ``logway.storage.fs`` (every create, truncate, fsync, rename,
unlink, mkdir and rmtree the storage layer and the metadata writers make) with wrappers that journal, for the
files and directories under one root:

- ``sync``: a file was fsynced; the bytes it had then are durable (its size is read before the fsync);
- ``dsync``: a directory was fsynced; the names it held then, and the inodes they named, are durable;
- ``new`` / ``trunc`` / ``newdir``: a file was created or truncated (durable bytes start again from 0, or are cut),
  a directory made (it holds nothing durable until it is fsynced);
- and, before a rename over a file, an unlink or an rmtree takes an inode's last name, a hard link to it in a
  stash directory, so its bytes are still there to be read when a durable directory still names it.

`power_loss` then rebuilds, from the journal, the stash and the files as the crashed process left them, the
tree a power loss at that moment leaves: from the root, each directory with the names of its last fsync, each
file cut to the bytes of its last fsync (``torn``: sometimes with some of the bytes written after it, as the
kernel's writeback may have saved them). Names created, renamed or removed after a directory's last fsync
are undone as a whole; that a journaling file system keeps them in order is not relied on.

The journal is a file of JSON lines, each written with one ``os.write`` to an ``O_APPEND`` descriptor, so a
process killed by SIGKILL (the crash point: `Recorder` kills at the n-th operation when asked) leaves whole
lines, and every line written before it answered a client. In-process tests pass ``crash`` to raise instead.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from logway.storage import fs

JOURNAL = "journal.jsonl"
STASH = "stash"
_REAL = {name: getattr(fs, name) for name in ("open", "ftruncate", "fsync", "fdatasync", "replace", "mkdir", "rmtree")}
_REAL_UNLINK = fs.unlink


class PowerLost(Exception):
    """Raised by an in-process Recorder at its crash point: the operation did not happen."""


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Recorder:
    """Journals the durability of the files under ``root`` (see the module docstring); crashes at operation
    ``crash_at`` (1-based: the first operation under the root is 1) by calling ``crash`` (default SIGKILL).
    Its fsyncs are journaled only (``real_syncs``: also made)."""

    def __init__(self, root: Path, workdir: Path, *, crash_at: int | None = None,
                 crash: Callable[[], None] = _kill_self, real_syncs: bool = False) -> None:
        self.root = str(Path(root).resolve())
        self.stash = Path(workdir) / STASH
        self.stash.mkdir(parents=True, exist_ok=True)
        self.crash_at = crash_at
        self.crash = crash
        # The simulation needs no real fsync (the power loss is rebuilt from the journal): skipped unless asked.
        self.real_syncs = real_syncs
        self.operations = 0
        self._lock = threading.Lock()
        self._journal = os.open(Path(workdir) / JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._saved: dict[str, object] = {}

    # -- installing ------------------------------------------------------------------------------------

    def install(self) -> Recorder:
        """Journal the tree under the root as it is (all of it durable), then wrap ``logway.storage.fs``."""
        self._baseline()
        wrappers = {"open": self._open, "ftruncate": self._ftruncate, "fsync": self._fsync,
                    "fdatasync": self._fdatasync, "replace": self._replace, "mkdir": self._mkdir,
                    "rmtree": self._rmtree, "unlink": self._unlink}
        for name, wrapper in wrappers.items():
            self._saved[name] = getattr(fs, name)
            setattr(fs, name, wrapper)
        return self

    def uninstall(self) -> None:
        for name, real in self._saved.items():
            setattr(fs, name, real)
        self._saved = {}
        os.close(self._journal)

    def _baseline(self) -> None:
        root = Path(self.root)
        self._write(["root", root.stat().st_ino, 0])
        for dirpath, _, filenames in os.walk(root, topdown=False):
            for name in filenames:
                st = os.lstat(os.path.join(dirpath, name))
                self._write(["sync", st.st_ino, st.st_size])
            self._write(["dsync", os.lstat(dirpath).st_ino, _listing(dirpath)])

    # -- the journal and the crash point -----------------------------------------------------------

    def _write(self, event: list) -> None:
        os.write(self._journal, (json.dumps(event, separators=(",", ":")) + "\n").encode())

    def _under_root(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    def _step(self, path: str) -> bool:
        """Count an operation on ``path``; crash here if it is the crash point. Whether it is under the root."""
        if not self._under_root(path):
            return False
        with self._lock:
            self.operations += 1
            if self.operations == self.crash_at:
                self.crash()
                raise PowerLost(f"power lost before operation {self.operations} ({path})")
        return True

    # -- the wrappers ------------------------------------------------------------------------------------

    def _open(self, path, flags, mode=0o777, *, dir_fd=None):
        full = os.path.abspath(os.fspath(path))
        creating = bool(flags & os.O_CREAT) and not os.path.lexists(full)
        if not (creating or flags & os.O_TRUNC) or not self._step(full):
            return _REAL["open"](path, flags, mode, dir_fd=dir_fd)
        fd = _REAL["open"](path, flags, mode, dir_fd=dir_fd)
        self._write(["new" if creating else "trunc", os.fstat(fd).st_ino, 0])
        return fd

    def _ftruncate(self, fd, length):
        if self._step(_fd_path(fd)):
            self._write(["trunc", os.fstat(fd).st_ino, length])
        return _REAL["ftruncate"](fd, length)

    def _sync(self, real: Callable[[int], None], fd: int) -> None:
        if self._step(_fd_path(fd)):
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                self._write(["dsync", st.st_ino, _listing(fd)])
            else:
                self._write(["sync", st.st_ino, st.st_size])
            if not self.real_syncs:
                return
        real(fd)

    def _fsync(self, fd):
        self._sync(_REAL["fsync"], fd)

    def _fdatasync(self, fd):
        self._sync(_REAL["fdatasync"], fd)

    def _replace(self, src, dst, **kwargs):
        if self._step(os.path.abspath(os.fspath(dst))):
            self._keep(dst)
        return _REAL["replace"](src, dst, **kwargs)

    def _unlink(self, path, missing_ok=False):
        if self._step(os.path.abspath(os.fspath(path))):
            self._keep(path)
        return _REAL_UNLINK(path, missing_ok)

    def _mkdir(self, path, mode=0o777, **kwargs):
        under = self._step(os.path.abspath(os.fspath(path)))
        _REAL["mkdir"](path, mode, **kwargs)
        if under:
            self._write(["newdir", os.lstat(path).st_ino, 0])

    def _rmtree(self, path, *args, **kwargs):
        if self._step(os.path.abspath(os.fspath(path))):
            for dirpath, _, filenames in os.walk(path):
                for name in filenames:
                    self._keep(os.path.join(dirpath, name))
        return _REAL["rmtree"](path, *args, **kwargs)

    def _keep(self, path) -> None:
        """A hard link in the stash to the file at ``path``, which is about to lose this name."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode):
            try:
                os.link(path, self.stash / str(st.st_ino))
            except FileExistsError:
                pass


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
    except OSError:
        return ""


def _listing(directory: str | int) -> list[list]:
    """[name, inode, is a directory] of each entry of a directory (given by path or descriptor)."""
    entries = []
    for name in os.listdir(directory):
        try:
            st = os.stat(name, dir_fd=directory, follow_symlinks=False) if isinstance(directory, int) \
                else os.lstat(os.path.join(directory, name))
        except FileNotFoundError:
            continue
        entries.append([name, st.st_ino, stat.S_ISDIR(st.st_mode)])
    return entries


# -- rebuilding the tree a power loss leaves --------------------------------------------------------------


class _File:
    def __init__(self, ino: int) -> None:
        self.ino = ino
        self.synced = 0


class _Dir:
    def __init__(self) -> None:
        self.entries: dict[str, _File | _Dir] = {}


def _replay(journal: Path) -> _Dir:
    """The durable tree the journal describes: the root directory's node."""
    nodes: dict[int, _File | _Dir] = {}
    root: _Dir | None = None

    def node(ino: int, is_dir: bool) -> _File | _Dir:
        found = nodes.get(ino)
        if found is None or isinstance(found, _Dir) != is_dir:
            found = nodes[ino] = _Dir() if is_dir else _File(ino)
        return found

    for line in journal.read_text().splitlines():
        kind, ino, arg = json.loads(line)
        if kind == "root":
            root = node(ino, True)  # type: ignore[assignment]
        elif kind == "new":
            nodes[ino] = _File(ino)
        elif kind == "newdir":
            nodes[ino] = _Dir()
        elif kind == "sync":
            node(ino, False).synced = arg  # type: ignore[union-attr]
        elif kind == "trunc":
            f = node(ino, False)
            f.synced = min(f.synced, arg)  # type: ignore[union-attr]
        elif kind == "dsync":
            node(ino, True).entries = {name: node(child, is_dir) for name, child, is_dir in arg}  # type: ignore[union-attr]
    if root is None:
        raise ValueError(f"{journal} has no root")
    return root


def power_loss(data: Path, workdir: Path, out: Path, rng: random.Random | None = None) -> dict[str, int]:
    """Write to ``out`` (new) the tree under ``data`` that a power loss at the end of ``workdir``'s journal
    leaves. ``rng``: torn writes, now and then a file keeps part of what was written after its last fsync.
    Returns counts (files, bytes_lost, files_dropped) for the test's log."""
    root = _replay(Path(workdir) / JOURNAL)
    where: dict[int, str] = {}
    for dirpath, _, filenames in os.walk(data):
        for name in filenames:
            path = os.path.join(dirpath, name)
            where.setdefault(os.lstat(path).st_ino, path)
    stash = Path(workdir) / STASH
    for name in os.listdir(stash):
        where.setdefault(int(name), str(stash / name))
    counts = {"files": 0, "bytes_lost": 0}
    _write_tree(root, Path(out), where, rng, counts)
    return counts


def _write_tree(node: _Dir, out: Path, where: dict[int, str], rng: random.Random | None, counts: dict) -> None:
    out.mkdir(parents=True)
    for name, child in sorted(node.entries.items()):
        if isinstance(child, _Dir):
            _write_tree(child, out / name, where, rng, counts)
            continue
        source = where.get(child.ino)
        data = Path(source).read_bytes() if source else b""
        keep = min(child.synced, len(data))
        if rng is not None and len(data) > keep and rng.random() < 0.3:
            keep = rng.randint(keep, len(data))  # writeback saved part of the unsynced tail
        (out / name).write_bytes(data[:keep])
        counts["files"] += 1
        counts["bytes_lost"] += len(data) - keep


def replace_tree(data: Path, rebuilt: Path) -> None:
    """Put the rebuilt tree where the crashed one was (the broker restarts on the same path)."""
    shutil.rmtree(data)
    os.replace(rebuilt, data)
