"""Storage faults: ENOSPC/EIO at every write the log makes leaves a log serving exactly the acknowledged records.

A full or failing disk cannot be produced cheaply for real, so the faults are injected: `Faults`
wraps ``os.write`` and the storage layer's file calls (storage.fs: open, fsync and fdatasync,
ftruncate, replace; an open that truncates is the snapshot and checkpoint writers' "file"), and fails
the first matching call on a file of the log under test (matched by the file name behind the descriptor). Everything else is real: real files in
tmp_path, a real restart that recovers them.

Each case appends batches, arms one fault for one append, appends more, then checks what a
consumer would see: the log (before and after a restart without clean shutdown) holds exactly the
acknowledged records, at contiguous offsets from 0. The one exception is an error that cannot be
undone (a failed fsync, or a failed truncate after a failed write): the log goes offline (no more
appends, an ERROR logged) and the failed batch, which reached the file, may come back after the
restart as Kafka's recovery would keep it; it was never acknowledged, and nothing acknowledged is lost.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest
from storage_helpers import NOW, FakeClock, make_batch

from logway.storage import fs
from logway.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_checkpoint
from logway.storage.config import LogConfig
from logway.storage.errors import KafkaStorageError
from logway.storage.log_manager import LogManager
from logway.storage.partition_log import PartitionLog
from logway.wire.records import decode_batches

# Small segments and an index entry per batch, so appends write the log, both indexes and roll often.
CONFIG = {"segment.bytes": "1500", "index.interval.bytes": "1"}


class Faults:
    """Fail the next call of one kind on a file whose name ends with ``suffix`` (under ``root``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.root = str(root)
        self.armed: dict[str, tuple[str, int, bool]] = {}  # call -> (suffix, errno, partial write first)
        self.fired: list[str] = []
        real = {name: getattr(fs, name) for name in ("fsync", "fdatasync", "ftruncate", "open", "replace")}
        real["write"] = os.write
        self.real = real

        def fd_path(fd: int) -> str:
            try:
                return os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return ""

        def write(fd, data):
            fault = self._take("write", fd_path(fd))
            if fault is not None:
                code, partial = fault
                if partial and len(data) > 1:
                    self.armed["write"] = (fd_path(fd)[-12:], code, False)  # the loop's next call fails
                    return real["write"](fd, memoryview(data)[: len(data) // 2])
                raise OSError(code, os.strerror(code))
            return real["write"](fd, data)

        def fsync(fd):
            self._raise_if("fsync", fd_path(fd))
            return real["fsync"](fd)

        def fdatasync(fd):
            self._raise_if("fsync", fd_path(fd))
            return real["fdatasync"](fd)

        def ftruncate(fd, length):
            self._raise_if("ftruncate", fd_path(fd))
            return real["ftruncate"](fd, length)

        def open_(path, flags, mode=0o777, *, dir_fd=None):
            if flags & os.O_TRUNC:  # a file written anew: a producer snapshot, a checkpoint
                self._raise_if("file", os.fspath(path))
            elif flags & os.O_CREAT and not os.path.exists(path):
                self._raise_if("open", os.fspath(path))
            return real["open"](path, flags, mode, dir_fd=dir_fd)

        def replace(src, dst, **kwargs):
            self._raise_if("replace", os.fspath(dst))
            return real["replace"](src, dst, **kwargs)

        monkeypatch.setattr(os, "write", write)
        for name, fake in (("fsync", fsync), ("fdatasync", fdatasync), ("ftruncate", ftruncate), ("open", open_),
                           ("replace", replace)):
            monkeypatch.setattr(fs, name, fake)

    def arm(self, call: str, suffix: str, code: int, *, partial: bool = False) -> None:
        self.armed[call] = (suffix, code, partial)

    def _take(self, call: str, path: str) -> tuple[int, bool] | None:
        fault = self.armed.get(call)
        if fault is None or not path.startswith(self.root) or not path.endswith(fault[0]):
            return None
        del self.armed[call]
        self.fired.append(f"{call} {Path(path).name}")
        return fault[1], fault[2]

    def _raise_if(self, call: str, path: str) -> None:
        fault = self._take(call, path)
        if fault is not None:
            raise OSError(fault[0], os.strerror(fault[0]))


@pytest.fixture
def faults(monkeypatch, tmp_path) -> Faults:
    return Faults(monkeypatch, tmp_path)


def _open(path: Path, **kwargs) -> PartitionLog:
    return PartitionLog(path, "t", 0, LogConfig.from_properties(CONFIG), clock_ms=FakeClock(), **kwargs)


def _values(plog: PartitionLog) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a consumer reading from the start would get."""
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read_bytes(offset, 1 << 20)
        for batch in decode_batches(data):
            out.extend((r.offset, r.value) for r in batch.records)
        offset = out[-1][0] + 1
    return out


def _append_all(plog: PartitionLog, count: int, start: int, acked: list[bytes]) -> int:
    """Append ``count`` 3-record batches numbered from ``start``; acknowledged values go to ``acked``; returns failures."""
    failed = 0
    for i in range(start, start + count):
        values = [b"batch %04d record %d " % (i, n) + b"x" * 60 for n in range(3)]
        try:
            plog.append(make_batch(values), now_ms=NOW)
        except KafkaStorageError:
            failed += 1
            continue
        acked.extend(values)
    return failed


def _assert_serves_exactly(plog: PartitionLog, acked: list[bytes], maybe_extra: list[bytes] = ()) -> None:
    records = _values(plog)
    assert [offset for offset, _ in records] == list(range(len(records)))
    values = [value for _, value in records]
    if values != acked:
        # Only a write that could not be undone may leave its (never acknowledged) batch behind.
        assert maybe_extra and sorted(values) == sorted(acked + list(maybe_extra)), "acknowledged records changed"
    assert plog.log_end_offset == len(records)


# (call, file suffix, partial write first): every write an append makes, and the roll's.
APPEND_FAULTS = [
    ("write", ".log", False),
    ("write", ".log", True),
    ("write", ".index", False),
    ("write", ".index", True),
    ("write", ".timeindex", False),
    ("open", ".log", False),  # the new segment of a roll
    ("open", ".index", False),
    ("file", ".snapshot.tmp", False),  # the producer-state snapshot a roll writes
    ("replace", ".snapshot", False),
]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize(("call", "suffix", "partial"), APPEND_FAULTS)
def test_a_failed_append_writes_nothing_and_the_log_goes_on(tmp_path, faults, caplog, call, suffix, partial, code):
    path = tmp_path / "t-0"
    plog = _open(path)
    acked: list[bytes] = []
    assert _append_all(plog, 10, 0, acked) == 0
    faults.arm(call, suffix, code, partial=partial)
    failed = 0
    for i in range(10, 40):  # until the fault fires (a roll comes within a few appends)
        with caplog.at_level(logging.ERROR):
            failed += _append_all(plog, 1, i, acked)
        if faults.fired:
            break
    assert faults.fired and failed == 1
    assert "failed, nothing written" in caplog.text  # disk full is logged
    assert not plog.offline
    _assert_serves_exactly(plog, acked)
    assert _append_all(plog, 10, 100, acked) == 0  # the disk has room again: appends go on
    _assert_serves_exactly(plog, acked)

    restarted = _open(path, recovery_point=0)  # no clean shutdown: recovery reads every file
    _assert_serves_exactly(restarted, acked)
    assert _append_all(restarted, 3, 200, acked) == 0
    _assert_serves_exactly(restarted, acked)
    plog._close_files()
    restarted.close()
    _assert_serves_exactly(_open(path, clean_shutdown=True), acked)


@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".log"])
def test_an_append_that_cannot_be_undone_takes_the_log_offline(tmp_path, faults, caplog, suffix):
    path = tmp_path / "t-0"
    plog = _open(path)
    acked: list[bytes] = []
    _append_all(plog, 10, 0, acked)
    faults.arm("write", suffix, errno.EIO, partial=suffix == ".log")
    faults.arm("ftruncate", suffix, errno.EIO)  # and the undo fails too
    for i in range(10, 40):  # until the fault fires (the first time index entry of a segment comes with a roll)
        with caplog.at_level(logging.ERROR):
            failed = _append_all(plog, 1, i, acked)
        if faults.fired:
            break
    assert failed == 1 and faults.fired[-1].startswith("ftruncate")  # the write failed, then its undo
    lost = [b"batch %04d record %d " % (i, n) + b"x" * 60 for n in range(3)]
    assert plog.offline and "is offline" in caplog.text
    assert _append_all(plog, 2, 100, acked) == 2  # KAFKA_STORAGE_ERROR from now on
    _assert_serves_exactly(plog, acked)  # reads still serve exactly what was acknowledged

    restarted = _open(path, recovery_point=0)
    _assert_serves_exactly(restarted, acked, maybe_extra=lost)
    assert not restarted.offline
    plog._close_files()
    restarted.close()


def test_a_failed_fsync_takes_the_log_offline_and_keeps_what_was_acknowledged(tmp_path, faults, caplog):
    path = tmp_path / "t-0"
    plog = _open(path)
    acked: list[bytes] = []
    _append_all(plog, 5, 0, acked)
    faults.arm("fsync", ".log", errno.EIO)
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaStorageError):
        plog.flush()
    assert plog.offline and "is offline" in caplog.text
    assert plog.recovery_point == 0  # nothing counts as flushed
    assert _append_all(plog, 1, 5, acked) == 1
    _assert_serves_exactly(plog, acked)
    plog.close()  # does not raise; writes no snapshot for an offline log
    _assert_serves_exactly(_open(path, recovery_point=0), acked)


@pytest.mark.parametrize(("call", "suffix"), [("file", "checkpoint.tmp"), ("fsync", "checkpoint.tmp"),
                                              ("replace", RECOVERY_POINT_CHECKPOINT)])
def test_a_failed_checkpoint_write_keeps_the_previous_checkpoint(tmp_path, faults, call, suffix):
    manager = LogManager([tmp_path / "logs"], LogConfig.from_properties(CONFIG), clock_ms=FakeClock())
    manager.open()
    manager.create_topic("t", 1, {})
    plog = manager.get_partition("t", 0)
    acked: list[bytes] = []
    _append_all(plog, 5, 0, acked)
    plog.flush()
    manager.checkpoint()
    before = read_checkpoint(tmp_path / "logs" / RECOVERY_POINT_CHECKPOINT)
    assert before == {("t", 0): 15}
    _append_all(plog, 5, 5, acked)
    plog.flush()
    faults.arm(call, suffix, errno.ENOSPC)
    with pytest.raises(OSError):
        manager.checkpoint()
    assert faults.fired
    assert read_checkpoint(tmp_path / "logs" / RECOVERY_POINT_CHECKPOINT) == before  # old file intact
    manager.close()

    reopened = LogManager([tmp_path / "logs"], LogConfig.from_properties(CONFIG), clock_ms=FakeClock())
    reopened.open()
    _assert_serves_exactly(reopened.get_partition("t", 0), acked)
    reopened.close()


def test_an_error_that_cannot_be_undone_takes_the_whole_log_dir_offline(tmp_path, faults, caplog):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig.from_properties(CONFIG), clock_ms=FakeClock())
    manager.open()
    manager.create_topic("t", 4, {})
    logs = [manager.get_partition("t", p) for p in range(4)]
    failing = logs[0]
    same_dir = [p for p in logs[1:] if p.dir.parent == failing.dir.parent]
    other_dir = [p for p in logs if p.dir.parent != failing.dir.parent]
    assert same_dir and other_dir
    acked = {id(p): [] for p in logs}
    for plog in logs:
        _append_all(plog, 3, 0, acked[id(plog)])
    faults.root = str(failing.dir)  # only the first partition's files fail
    faults.arm("write", ".log", errno.EIO, partial=True)
    faults.arm("ftruncate", ".log", errno.EIO)
    with caplog.at_level(logging.ERROR):
        assert _append_all(failing, 1, 3, []) == 1
    assert f"log dir {failing.dir.parent} is offline" in caplog.text
    for plog in same_dir:
        assert plog.offline and _append_all(plog, 1, 3, acked[id(plog)]) == 1
        _assert_serves_exactly(plog, acked[id(plog)])  # reads go on
    for plog in other_dir:
        assert not plog.offline and _append_all(plog, 1, 3, acked[id(plog)]) == 0
    manager.close()

    restarted = LogManager(dirs, LogConfig.from_properties(CONFIG), clock_ms=FakeClock())
    restarted.open()
    lost = [b"batch %04d record %d " % (3, n) + b"x" * 60 for n in range(3)]
    for p, plog in enumerate(logs):
        again = restarted.get_partition("t", p)
        assert not again.offline
        _assert_serves_exactly(again, acked[id(plog)], maybe_extra=lost if plog is failing else ())
    restarted.close()


@pytest.mark.parametrize(("call", "suffix"), [("file", ".snapshot.tmp"), ("fsync", ".log"), ("fsync", ".index")])
def test_a_failed_write_at_shutdown_keeps_what_was_acknowledged(tmp_path, faults, caplog, call, suffix):
    path = tmp_path / "t-0"
    plog = _open(path)
    acked: list[bytes] = []
    _append_all(plog, 8, 0, acked)
    faults.arm(call, suffix, errno.EIO)
    with caplog.at_level(logging.ERROR):
        plog.close()  # flush and the producer snapshot
    assert faults.fired and plog.offline and "is offline" in caplog.text
    _assert_serves_exactly(_open(path, recovery_point=0), acked)
