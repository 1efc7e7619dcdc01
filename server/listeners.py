"""Listeners and the accept loop of both processes: bound sockets, connections admitted within the connection
limits, wrapped for their listener's security (TLS, SASL) and served by the handler the process gives each
listener; idle connections expire and idle buffers go back to the request memory budget."""

from __future__ import annotations

import errno
import logging
import os
import socket as stdlib_socket

import trio

from logway.server.audit import NO_AUDIT, Audit
from logway.server.config import Listener, ServerConfig, canonical_ip
from logway.server.connection import Connection, HandlerFactory, ListenerContext
from logway.server.connection_limits import ConnectionQuotas, expire_idle_connections
from logway.server.request_memory import RequestMemory, budget_bytes
from logway.server.security.realm import Realm
from logway.server.security.sasl import start_authentication
from logway.server.stats import ServerStats
from logway.server.tls_connection import TlsConnection, wrap_server_socket

log = logging.getLogger(__name__)

_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class StartupError(Exception):
    """The process cannot start (a port in use, an unusable log dir): one line for the user, no traceback."""


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


def listener_context(config: ServerConfig, listener: Listener, realm: Realm, audit: Audit = NO_AUDIT
                     ) -> ListenerContext:
    """What the connections of ``listener`` need to know of it, with the realm they authenticate in and the
    audit log their authentications and ACL denials go to."""
    return ListenerContext(listener, config.security[listener.name], realm, config.socket_request_max_bytes, audit)


class Server:
    """The client connections of one process, within its connection limits and request memory budget."""

    def __init__(self, config: ServerConfig, stats: ServerStats) -> None:
        self.config = config
        self.stats = stats
        self.quotas = ConnectionQuotas.from_config(config)
        self.memory = RequestMemory(budget_bytes(config))
        stats.memory = self.memory
        self.connections: set[Connection] = set()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The server's own background work, until cancelled: idle connections expire, idle buffers go back."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expire_idle_connections, self.connections, self.config.connections_max_idle_ms)
            nursery.start_soon(self.memory.give_back_idle_buffers_forever)
            task_status.started()

    async def accept(self, context: ListenerContext, bound: trio.SocketListener, make_handler: HandlerFactory) -> None:
        """Accept on ``bound`` until cancelled, one task per connection (cancelled with this loop)."""
        async with bound, trio.open_nursery() as nursery:
            while True:
                sock, ip = await accept_admitted(bound, self.quotas)
                nursery.start_soon(self._serve, sock, ip, context, make_handler)

    async def _serve(self, sock: stdlib_socket.socket, ip: str, context: ListenerContext,
                     make_handler: HandlerFactory) -> None:
        name = context.listener.name
        peer = _peer(sock)
        try:
            conn = self._connection(sock, peer, context, make_handler)
        except OSError as exc:  # gone before TLS could wrap it (ENOTCONN): nothing to serve
            log.debug("connection from %s closed before it was served: %s", peer, exc)
            self.quotas.release(ip)
            return
        except BaseException:
            self.quotas.release(ip)
            raise
        self.connections.add(conn)
        self.stats.connections[name] += 1
        self.stats.connections_created[name] += 1
        try:
            await conn.run()
        finally:
            self.stats.connections[name] -= 1
            self.connections.discard(conn)
            self.quotas.release(ip)

    def _connection(self, sock: stdlib_socket.socket, peer: str, context: ListenerContext,
                    make_handler: HandlerFactory) -> Connection:
        """A Connection for the listener's security protocol: TLS wraps the socket; SASL gates the requests."""
        security = context.security
        if security.tls:
            try:
                sock = wrap_server_socket(security.ssl_context, sock)
            except OSError:
                sock.close()
                raise
            conn: Connection = TlsConnection(sock, peer, context, self.memory, self.stats, make_handler)
        else:
            conn = Connection(sock, peer, context, self.memory, self.stats, make_handler)
        if security.sasl:
            start_authentication(conn)
        return conn


def _peer(sock: stdlib_socket.socket) -> str:
    """``host:port`` of the client (and TCP_NODELAY on its socket: requests and answers are small)."""
    try:
        sock.setsockopt(stdlib_socket.IPPROTO_TCP, stdlib_socket.TCP_NODELAY, 1)
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


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
