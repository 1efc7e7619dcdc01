"""storage.residency on a real file: evicted pages are seen as not cached, page_in brings them back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from logway.storage import residency

SIZE = 32 << 20
PROBES = [residency.cached, residency._cached_by_nowait]


@pytest.fixture
def evicted(tmp_path: Path):
    """A 32 MiB file (past the kernel's readahead of a read at its start), fsynced and dropped from the page cache; its descriptor."""
    path = tmp_path / "segment.log"
    path.write_bytes(bytes(SIZE))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    # (A RWF_NOWAIT read of a missing page starts readahead there: check the first page only.)
    if residency._cached_by_nowait(fd, 0, 4096):
        os.close(fd)
        pytest.skip("this filesystem keeps the pages cached (tmpfs?)")
    yield fd
    os.close(fd)


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: p.__name__)
def test_evicted_range_is_not_cached_until_paged_in(evicted, probe):
    fd = evicted
    middle = SIZE // 2  # past the readahead the fixture's probe started at the file's start
    assert not probe(fd, middle, 100_000)
    residency.page_in(fd, middle, 100_000)
    assert probe(fd, middle, 100_000)
    # Beyond what was paged in (and the kernel's readahead past it) the file is still cold.
    assert not probe(fd, SIZE - 4096, 4096)


def test_page_in_of_a_range_past_the_end_of_the_file_stops_quietly(evicted):
    residency.page_in(evicted, SIZE - 10, 1 << 20)
    assert residency.cached(evicted, SIZE - 10, 10)
