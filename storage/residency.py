"""Page-cache residency of a file range: whether reading it would wait for the disk, and reading it in.

The gateway sends record data with os.sendfile and reads batch headers with os.pread on its event loop; both
block the whole loop while the kernel reads pages that are not cached (a consumer catching up on an old
segment). `cached` tells, without blocking, whether a range is all in the page cache; `page_in` reads it in
and is meant for a worker thread (DESIGN.md principle 5: cold reads run off the event loop).

`cached` uses cachestat(2) (Linux 6.5+: one syscall, no copy) and a one-byte preadv(RWF_NOWAIT) read of the
range's end (readahead in flight); on older Linux a preadv(RWF_NOWAIT) of the whole range into a scratch
buffer (Linux 4.14+: short or EAGAIN when a page would have to be read); where neither exists it answers
True, and reads stay on the loop as before.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import threading

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CHUNK = 1 << 20  # page_in and the RWF_NOWAIT probe read this much per call

# cachestat(2): `struct cachestat_range {u64 off, len}` in, `struct cachestat {u64 nr_cache, nr_dirty,
# nr_writeback, nr_evicted, nr_recently_evicted}` out. 451 on every architecture (the unified syscall table).
_SYS_CACHESTAT = 451
_RANGE = struct.Struct("=QQ")


class _Cachestat:
    """cachestat(2) through libc's syscall(), with its argument buffers made once per thread."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._syscall = libc.syscall
        self._syscall.restype = ctypes.c_long
        self._local = threading.local()

    def _buffers(self) -> tuple:
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            rng, stat = ctypes.create_string_buffer(_RANGE.size), (ctypes.c_uint64 * 5)()
            bufs = self._local.bufs = (rng, stat, ctypes.c_void_p(ctypes.addressof(rng)),
                                       ctypes.c_void_p(ctypes.addressof(stat)))
        return bufs

    def pages(self, fd: int, position: int, size: int) -> int:
        """How many pages of the range are cached; -1 with errno set when the call fails."""
        rng, stat, rng_ptr, stat_ptr = self._buffers()
        _RANGE.pack_into(rng, 0, position, size)
        if self._syscall(_SYS_CACHESTAT_ARG, fd, rng_ptr, stat_ptr, 0) < 0:
            return -1
        return stat[0]


_SYS_CACHESTAT_ARG = ctypes.c_long(_SYS_CACHESTAT)
_scratch = threading.local()


def _scratch_buffer() -> memoryview:
    buf = getattr(_scratch, "buf", None)
    if buf is None:
        buf = _scratch.buf = memoryview(bytearray(_CHUNK))
    return buf


def _cached_by_cachestat(fd: int, position: int, size: int) -> bool:
    first = position - position % PAGE
    pages = _CACHESTAT.pages(fd, first, position + size - first)
    if pages < 0:
        return True  # a descriptor closed under us: the read itself will say what is wrong
    if pages < (position + size - first + PAGE - 1) // PAGE:
        return False
    # cachestat counts the pages readahead has added but not read yet (read_ahead_kb runs megabytes ahead of
    # a sequential reader): a one-byte RWF_NOWAIT read fails on such a page. Readahead fills a range in order
    # and a fetch starts where the one before ended, so the range's last page stands for the rest.
    return _up_to_date(fd, position + size - 1)


_ONE_BYTE = [bytearray(1)]


def _up_to_date(fd: int, position: int) -> bool:
    """Whether the page holding ``position`` can be read without waiting (RWF_NOWAIT: EAGAIN otherwise)."""
    try:
        return os.preadv(fd, _ONE_BYTE, position, os.RWF_NOWAIT) == 1
    except BlockingIOError:
        return False
    except OSError:
        return True  # as above: leave the error to the read


def _cached_by_nowait(fd: int, position: int, size: int) -> bool:
    buf = _scratch_buffer()
    end = position + size
    while position < end:
        want = min(_CHUNK, end - position)
        try:
            got = os.preadv(fd, [buf[:want]], position, os.RWF_NOWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True  # as above: leave the error to the read
        if got < want:
            return False  # the next page would block (or the file ends there: page_in then finds that out)
        position += got
    return True


def _cached_unknown(fd: int, position: int, size: int) -> bool:
    return True


def _choose():
    """The best residency probe this kernel has."""
    if platform.system() != "Linux":
        return None, _cached_unknown
    try:
        probe = _Cachestat()
        fd = os.open(os.devnull, os.O_RDONLY)
        try:
            works = probe.pages(fd, 0, PAGE) >= 0 or ctypes.get_errno() not in (errno.ENOSYS, errno.EPERM)
        finally:
            os.close(fd)
        if works:
            return probe, _cached_by_cachestat
    except (OSError, AttributeError):
        pass
    if hasattr(os, "RWF_NOWAIT"):
        return None, _cached_by_nowait
    return None, _cached_unknown


_CACHESTAT, cached = _choose()
cached.__doc__ = "Whether every page of ``size`` bytes at ``position`` of ``fd`` is in the page cache (no blocking)."


def page_in(fd: int, position: int, size: int) -> None:
    """Read the range into the page cache (blocking: call it from a worker thread). Errors are left to the
    read that follows, which answers them as it always has (KAFKA_STORAGE_ERROR, a short file, ...)."""
    buf = _scratch_buffer()
    end = position + size
    try:
        # One readahead request for the whole range, then reads that wait for it.
        os.posix_fadvise(fd, position, size, os.POSIX_FADV_WILLNEED)
        while position < end:
            got = os.preadv(fd, [buf[:min(_CHUNK, end - position)]], position)
            if got <= 0:
                return
            position += got
    except OSError:
        return
