"""The simulated power loss itself: what it keeps is what was fsynced, file bytes and directory entries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from crash_fs import PowerLost, Recorder, power_loss

from logway.storage import fs
from logway.storage.checkpoints import write_atomically


@pytest.fixture
def recorded(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "old").write_bytes(b"before")  # there before recording: durable
    recorder = Recorder(data, tmp_path / "work").install()
    yield data, recorder
    if recorder._saved:
        recorder.uninstall()


def rebuild(tmp_path: Path, data: Path, recorder: Recorder) -> Path:
    recorder.uninstall()
    out = tmp_path / "after"
    power_loss(data, tmp_path / "work", out)
    return out


def append(path: Path, data: bytes, *, sync: bool) -> None:
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            fs.fdatasync(fd)
    finally:
        os.close(fd)


def test_a_file_keeps_what_was_fsynced_and_its_name_only_once_the_directory_was(tmp_path, recorded):
    data, recorder = recorded
    append(data / "a", b"synced", sync=True)
    append(data / "a", b" lost", sync=False)
    append(data / "b", b"never named", sync=True)
    fs.sync_dir(data)  # names a and b now
    append(data / "a", b" lost too", sync=False)
    append(data / "c", b"unnamed", sync=True)  # its directory was not synced after it was made
    out = rebuild(tmp_path, data, recorder)
    assert sorted(os.listdir(out)) == ["a", "b", "old"]
    assert (out / "a").read_bytes() == b"synced"
    assert (out / "b").read_bytes() == b"never named"
    assert (out / "old").read_bytes() == b"before"


def test_a_rename_without_a_directory_fsync_is_undone_and_the_old_file_comes_back(tmp_path, recorded):
    data, recorder = recorded
    tmp = data / "old.tmp"
    append(tmp, b"new", sync=True)
    fs.replace(tmp, data / "old")  # the old file's last name goes: its bytes are kept for the rebuild
    out = rebuild(tmp_path, data, recorder)
    assert os.listdir(out) == ["old"] and (out / "old").read_bytes() == b"before"


def test_write_atomically_survives(tmp_path, recorded):
    data, recorder = recorded
    write_atomically(data / "old", "after")
    out = rebuild(tmp_path, data, recorder)
    assert os.listdir(out) == ["old"] and (out / "old").read_text() == "after"


def test_a_new_directory_needs_its_parent_synced_and_holds_only_what_it_synced(tmp_path, recorded):
    data, recorder = recorded
    fs.mkdir(data / "d")
    append(data / "d" / "f", b"x", sync=True)
    fs.sync_dir(data / "d")
    out = rebuild(tmp_path, data, recorder)
    assert os.listdir(out) == ["old"]  # d was never named durably in data

    data2 = tmp_path / "data2"
    data2.mkdir()
    recorder = Recorder(data2, tmp_path / "work2").install()
    fs.mkdir(data2 / "d")
    fs.sync_dir(data2)
    append(data2 / "d" / "f", b"x", sync=True)  # d's entry for f was never synced
    recorder.uninstall()
    power_loss(data2, tmp_path / "work2", tmp_path / "after2")
    assert os.listdir(tmp_path / "after2") == ["d"] and os.listdir(tmp_path / "after2" / "d") == []


def test_an_rmtree_not_synced_is_undone(tmp_path, recorded):
    data, recorder = recorded
    fs.mkdir(data / "d")
    append(data / "d" / "f", b"kept", sync=True)
    fs.sync_dir(data / "d")
    fs.sync_dir(data)
    fs.rmtree(data / "d")
    out = rebuild(tmp_path, data, recorder)
    assert (out / "d" / "f").read_bytes() == b"kept"


def test_a_truncation_cuts_the_synced_bytes(tmp_path, recorded):
    data, recorder = recorded
    fd = fs.open(data / "old", os.O_RDWR | os.O_APPEND)
    fs.ftruncate(fd, 3)
    os.write(fd, b"-unsynced")
    os.close(fd)
    out = rebuild(tmp_path, data, recorder)
    assert (out / "old").read_bytes() == b"bef"


def test_the_crash_point_stops_before_the_operation(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    recorder = Recorder(data, tmp_path / "work", crash_at=2, crash=lambda: None).install()
    try:
        append(data / "a", b"1", sync=False)  # operation 1: the file is created
        with pytest.raises(PowerLost):
            append(data / "a", b"2", sync=True)  # operation 2: its fsync, which does not happen
    finally:
        recorder.uninstall()
    assert recorder.operations == 2
    power_loss(data, tmp_path / "work", tmp_path / "after")
    assert os.listdir(tmp_path / "after") == []
