"""The Prometheus endpoint of the broker and the proxy: `GET /metrics` on metrics.host:metrics.port (off unless
metrics.port is set); each process passes the function that renders its text.

A few lines of HTTP/1.1 on trio rather than prometheus_client's threaded server, so the live state is read on
the event loop (the only thread that changes it) and only the formatting runs in a worker thread. Each
connection gets one answer and is closed; a request head is bounded in size and time, and so is the number of
connections, like every other input.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from logway.server.config import ServerConfig

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 16
PATHS = ("/metrics", "/")
# The classic text format, which every Prometheus version reads; with Logway's metric names (all legacy-valid)
# generate_latest writes exactly it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


async def open_metrics_listeners(config: ServerConfig) -> list[trio.SocketListener]:
    """The bound metrics sockets (none when metrics.port is 0); OSError when the port cannot be bound."""
    if not config.metrics_port:
        return []
    return await trio.open_tcp_listeners(config.metrics_port, host=config.metrics_host or None)


async def serve_scrapes(body: Callable[[trio.CapacityLimiter], Awaitable[bytes]],
                        listeners: list[trio.SocketListener], task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Answer `GET /metrics` with ``body(limiter)`` until cancelled (the broker's and the proxy's endpoints);
    one rendering at a time, at most MAX_CONNECTIONS scrapers."""
    slots = trio.Semaphore(MAX_CONNECTIONS)
    render_limiter = trio.CapacityLimiter(1)

    async def handle(stream: trio.SocketStream) -> None:
        async with stream:
            if slots.value == 0:
                return  # too many scrapers at once: close
            async with slots:
                try:
                    await _answer(body, stream, render_limiter)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(partial(trio.serve_listeners, handle, [listener], handler_nursery=nursery))
        task_status.started()


async def _answer(body: Callable[[trio.CapacityLimiter], Awaitable[bytes]], stream: trio.SocketStream,
                  limiter: trio.CapacityLimiter) -> None:
    head = await _read_head(stream)
    if head is None:
        return
    method, _, rest = head.partition(b" ")
    target = rest.split(b" ", 1)[0].split(b"?", 1)[0].decode("latin-1")
    if method not in (b"GET", b"HEAD"):
        await _send(stream, "405 Method Not Allowed", b"only GET\n", "text/plain", extra="Allow: GET, HEAD\r\n")
        return
    if target not in PATHS:
        await _send(stream, "404 Not Found", b"metrics are at /metrics\n", "text/plain")
        return
    await _send(stream, "200 OK", await body(limiter), CONTENT_TYPE, head_only=method == b"HEAD")


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request line, once the whole head has arrived; None for a head too large, too slow or cut short."""
    data = bytearray()
    with trio.move_on_after(HEAD_TIMEOUT_S):
        while b"\r\n\r\n" not in data and b"\n\n" not in data:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return None
            data += chunk
            if len(data) > MAX_HEAD_BYTES:
                await _send(stream, "431 Request Header Fields Too Large", b"", "text/plain")
                return None
        return bytes(data.split(b"\n", 1)[0].rstrip(b"\r"))
    return None


async def _send(stream: trio.SocketStream, status: str, body: bytes, content_type: str, *, head_only: bool = False,
                extra: str = "") -> None:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"{extra}Connection: close\r\n\r\n").encode("latin-1")
    await stream.send_all(head if head_only else head + body)
