"""Bytes from one TCP socket to another through a pipe with os.splice (Linux): the kernel hands the pages
over, the data never enters Python (as os.sendfile does for the broker's segment files).

One pipe per client connection, made as large as the system allows (F_SETPIPE_SZ, up to
/proc/sys/fs/pipe-max-size); it is empty again after each ``move``. Plain TCP sockets only: a TLS socket's
bytes must be encrypted or decrypted in user space.
"""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Sequence

import trio

PIPE_SIZE = 1024 * 1024
_FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
IOV_MAX = 512  # buffers per writev/sendmsg (Linux allows 1024)


def drop_sent(views: list[memoryview], sent: int) -> None:
    """Take the first ``sent`` bytes off ``views`` (after a gathering write that sent that many)."""
    while sent:
        if sent >= len(views[0]):
            sent -= len(views.pop(0))
        else:
            views[0], sent = views[0][sent:], 0


class SourceClosed(Exception):
    """The source socket closed before every byte was moved."""


class SourceStalled(Exception):
    """The source sent nothing for the allowed time."""


class Pipe:
    """A non-blocking pipe used to splice bytes between two sockets."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.fcntl(self.w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:  # above pipe-max-size for an unprivileged process: the default size does
            pass
        self.capacity = fcntl.fcntl(self.w, fcntl.F_GETPIPE_SZ)

    async def move(self, src: socket.socket | trio.socket.SocketType, dst: socket.socket, n: int,
                   src_timeout: float, head: Sequence[bytes | memoryview] = ()) -> int:
        """Send the ``head`` parts (copied into the pipe: one send with what follows, not a packet of their own;
        at most half the pipe), then move exactly ``n`` bytes from ``src`` to ``dst``; returns the bytes sent.
        Waits for whichever side blocks progress; raises SourceClosed/SourceStalled (no byte for ``src_timeout``
        s) from the source, OSError from the destination."""
        fd_in, fd_out = src.fileno(), dst.fileno()
        to_read, in_pipe, sent = n, 0, 0
        views = [memoryview(part) for part in head if len(part)]
        while views:  # the pipe is empty and has room: one write in practice
            written = os.writev(self.w, views[:IOV_MAX])
            in_pipe += written
            drop_sent(views, written)
        n += in_pipe
        while sent < n:
            moved = False
            if to_read and in_pipe < self.capacity:
                try:
                    got = os.splice(fd_in, self.w, min(to_read, self.capacity - in_pipe), flags=_FLAGS)
                except BlockingIOError:
                    got = -1
                if got == 0:
                    raise SourceClosed(f"closed with {to_read} of {n} bytes to come")
                if got > 0:
                    to_read -= got
                    in_pipe += got
                    moved = True
            if in_pipe:
                try:
                    out = os.splice(self.r, fd_out, in_pipe, flags=_FLAGS)
                except BlockingIOError:
                    out = 0
                in_pipe -= out
                sent += out
                moved = moved or out > 0
            if not moved:
                if in_pipe:  # the client's socket is full: wait for it (the source waits in its own buffer)
                    await trio.lowlevel.wait_writable(dst)
                else:
                    with trio.move_on_after(src_timeout) as scope:
                        await trio.lowlevel.wait_readable(src)
                    if scope.cancelled_caught:
                        raise SourceStalled(f"no bytes for {src_timeout:g} s with {to_read} of {n} to come")
        await trio.lowlevel.checkpoint_if_cancelled()
        return sent

    def close(self) -> None:
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass
