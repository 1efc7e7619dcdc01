"""The trio server: listeners, one task per connection, graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import socket as stdlib_socket

import trio

from logway.gateway.broker import Broker
from logway.gateway.config import ServerConfig
from logway.gateway.connection import Connection
from logway.wire.errors import KafkaError

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The broker cannot start (a port in use, an unusable log dir): one line for the user, no traceback."""


async def open_listeners(config: ServerConfig) -> list[trio.SocketListener]:
    listeners: list[trio.SocketListener] = []
    for listener in config.listeners:
        try:
            listeners.extend(await trio.open_tcp_listeners(listener.port, host=listener.host or None, backlog=1024))
        except OSError as exc:
            for opened in listeners:
                await opened.aclose()
            raise StartupError(f"listeners={listener}: cannot listen: {exc.strerror or exc}") from exc
    return listeners


async def serve_connections(broker: Broker, listeners: list[trio.SocketListener], task_status=trio.TASK_STATUS_IGNORED):
    async def handle(stream: trio.SocketStream) -> None:
        sock = stream.socket
        sock.setsockopt(stdlib_socket.IPPROTO_TCP, stdlib_socket.TCP_NODELAY, 1)
        try:
            host, port = sock.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        await Connection(broker, sock, peer).run()

    await trio.serve_listeners(handle, listeners, task_status=task_status)


async def run_broker(broker: Broker, listeners: list[trio.SocketListener], task_status=trio.TASK_STATUS_IGNORED):
    """Serve until cancelled; the caller closes the broker afterwards (a clean shutdown)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run_background)
        await nursery.start(serve_connections, broker, listeners)
        task_status.started()


async def serve(config: ServerConfig) -> None:
    """Run a gateway until SIGTERM or SIGINT, then shut down cleanly (flush, clean-shutdown marker).

    The ports are bound before the log is opened, so a port in use stops start-up before any file is touched.
    """
    listeners = await open_listeners(config)
    broker = Broker(config)
    try:
        broker.open()
    except (OSError, KafkaError) as exc:  # LogManager.open closed what it had opened
        for listener in listeners:
            await listener.aclose()
        raise StartupError(f"log.dirs={','.join(config.log_dirs)}: cannot open the log: {exc}") from exc
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_broker, broker, listeners)
                for listener in config.listeners:
                    log.info("listening on %s (advertised as %s)", listener, config.advertised)
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        broker.close()
        log.info("shut down cleanly")
