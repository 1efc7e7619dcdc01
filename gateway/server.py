"""The trio server: listeners, one task per connection, graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket as stdlib_socket

import trio

from logway.gateway.broker import Broker
from logway.gateway.config import Listener, ServerConfig, canonical_ip
from logway.gateway.connection import Connection
from logway.gateway.connection_limits import ConnectionQuotas, expire_idle_connections
from logway.gateway.gc_policy import tune_after_startup
from logway.gateway.metrics.http import open_metrics_listeners, serve_metrics
from logway.gateway.request_memory import RequestMemory, budget_bytes
from logway.gateway.security.sasl import SaslSession, sasl_gate
from logway.gateway.tls_connection import TlsConnection, wrap_server_socket
from logway.wire.errors import KafkaError

log = logging.getLogger(__name__)

_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class StartupError(Exception):
    """The broker cannot start (a port in use, an unusable log dir): one line for the user, no traceback."""


async def open_listeners(config: ServerConfig) -> list[tuple[Listener, trio.SocketListener]]:
    """The bound sockets, each with the configured listener it serves (its name and security protocol)."""
    listeners: list[tuple[Listener, trio.SocketListener]] = []
    for listener in config.listeners:
        try:
            bound = await trio.open_tcp_listeners(listener.port, host=listener.host or None, backlog=1024)
        except OSError as exc:
            for _, opened in listeners:
                await opened.aclose()
            raise StartupError(f"listeners={listener}: cannot listen: {exc.strerror or exc}") from exc
        listeners.extend((listener, sock) for sock in bound)
    return listeners


async def accept_admitted(bound: trio.SocketListener, quotas: ConnectionQuotas) -> tuple[stdlib_socket.socket, str]:
    """The next accepted connection that the connection quotas admit, with its client's canonical IP; the
    others are closed (max.connections, max.connections.per.ip)."""
    while True:
        sock = await _accept(bound)
        try:
            ip = canonical_ip(sock.getpeername()[0])
        except (OSError, ValueError):
            sock.close()
            continue
        try:
            admitted = await quotas.admit(ip)
        except BaseException:
            sock.close()
            raise
        if admitted:
            return sock, ip
        sock.close()


async def serve_connections(
    broker: Broker, listeners: list[tuple[Listener, trio.SocketListener]], task_status=trio.TASK_STATUS_IGNORED
):
    """Accept on every listener within the connection limits; one task per connection; idle ones expire."""
    config = broker.config
    quotas = ConnectionQuotas.from_config(config)
    memory = RequestMemory(budget_bytes(config))
    connections: set[Connection] = set()

    stats = broker.stats
    stats.memory = memory

    async def handle(sock: stdlib_socket.socket, ip: str, listener: Listener) -> None:
        try:
            sock.setsockopt(stdlib_socket.IPPROTO_TCP, stdlib_socket.TCP_NODELAY, 1)
            host, port = sock.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            peer = "?"
        conn = _connection(broker, sock, peer, memory, listener)
        connections.add(conn)
        stats.connections[listener.name] += 1
        stats.connections_created[listener.name] += 1
        try:
            await conn.run()
        finally:
            stats.connections[listener.name] -= 1
            connections.discard(conn)
            quotas.release(ip)

    async def accept_loop(listener: Listener, bound: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with bound:
            while True:
                sock, ip = await accept_admitted(bound, quotas)
                nursery.start_soon(handle, sock, ip, listener)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(expire_idle_connections, connections, config.connections_max_idle_ms)
        nursery.start_soon(memory.give_back_idle_buffers_forever)
        for listener, bound in listeners:
            nursery.start_soon(accept_loop, listener, bound, nursery)
        task_status.started()


def _connection(broker: Broker, sock: stdlib_socket.socket, peer: str, memory: RequestMemory,
                listener: Listener, plain: type[Connection] = Connection,
                tls: type[TlsConnection] = TlsConnection) -> Connection:
    """A Connection for the listener's security protocol: TLS wraps the socket; SASL gates the requests.
    (The proxy passes its own Connection classes.)"""
    security = broker.config.security[listener.name]
    if security.protocol == "PLAINTEXT":
        return plain(broker, sock, peer, memory, listener)
    if security.tls:
        try:
            sock = wrap_server_socket(security.ssl_context, sock)
        except OSError:
            sock.close()
            raise
        conn: Connection = tls(broker, sock, peer, memory, listener)
    else:
        conn = plain(broker, sock, peer, memory, listener)
    if security.sasl:
        conn.sasl = SaslSession(security, broker.credentials)
        conn.dispatch = sasl_gate
        conn.max_frame, conn.max_frame_key = security.sasl_max_receive, "sasl.server.max.receive.size"
    return conn


async def _accept(listener: trio.SocketListener) -> stdlib_socket.socket:
    """The next accepted socket, non-blocking, for a Connection to drive through trio.lowlevel; out of file
    descriptors or memory, log and retry (as trio.serve_listeners does)."""
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                raise
            log.error("accept returned %s (%s); retrying in 0.1 s", errno.errorcode[exc.errno], os.strerror(exc.errno))
            await trio.sleep(0.1)
        else:
            sock = stdlib_socket.socket(fileno=stream.socket.detach())
            sock.setblocking(False)
            return sock


async def run_broker(
    broker: Broker, listeners: list[tuple[Listener, trio.SocketListener]],
    metrics_listeners: list[trio.SocketListener] | None = None, task_status=trio.TASK_STATUS_IGNORED,
):
    """Serve until cancelled; the caller closes the broker afterwards (a clean shutdown).

    The metrics endpoint (metrics.port) serves ``metrics_listeners``, bound here when not given.
    """
    if metrics_listeners is None:
        metrics_listeners = await open_metrics_listeners(broker.config)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run_background)
        await nursery.start(serve_connections, broker, listeners)
        if metrics_listeners:
            await nursery.start(serve_metrics, broker, metrics_listeners)
        task_status.started()


async def serve(config: ServerConfig) -> None:
    """Run a gateway until SIGTERM or SIGINT, then shut down cleanly (flush, clean-shutdown marker).

    The ports are bound before the log is opened, so a port in use stops start-up before any file is touched.
    """
    listeners = await open_listeners(config)
    try:
        metrics_listeners = await open_metrics_listeners(config)
    except OSError as exc:
        for _, bound in listeners:
            await bound.aclose()
        raise StartupError(f"metrics.port={config.metrics_port}: cannot listen: {exc.strerror or exc}") from exc
    broker = Broker(config)
    try:
        broker.open()
    except (OSError, KafkaError) as exc:  # LogManager.open closed what it had opened
        for bound in [b for _, b in listeners] + metrics_listeners:
            await bound.aclose()
        raise StartupError(f"log.dirs={','.join(config.log_dirs)}: cannot open the log: {exc}") from exc
    tune_after_startup()
    try:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(run_broker, broker, listeners, metrics_listeners)
                for listener in config.listeners:
                    log.info("listening on %s (advertised as %s)", listener, config.advertised_for(listener.name))
                if metrics_listeners:
                    log.info("metrics on http://%s:%d/metrics", config.metrics_host or "0.0.0.0", config.metrics_port)
                async for signum in signals:
                    log.info("received %s, shutting down", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        broker.close()
        log.info("shut down cleanly")
