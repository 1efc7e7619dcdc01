"""The proxy's trio server: the client listeners (the gateway's accept loop, limits, TLS and SASL), one
port per upstream broker opened and closed as the cluster's Metadata changes, and the cluster watcher."""

from __future__ import annotations

import logging
import signal
import socket as stdlib_socket
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry

from logway.gateway.apis import sasl_authenticate, sasl_handshake
from logway.gateway.config import Listener
from logway.gateway.connection_limits import ConnectionQuotas, expire_idle_connections
from logway.gateway.gc_policy import tune_after_startup
from logway.gateway.metrics.http import open_metrics_listeners
from logway.gateway.metrics.stats import BrokerStats
from logway.gateway.request_memory import RequestMemory, budget_bytes
from logway.gateway.security.authorizer import ACL_FILE, Authorizer
from logway.gateway.security.credentials import CredentialStore
from logway.gateway.server import StartupError, _connection, accept_admitted, open_listeners
from logway.proxy.addresses import NodeOutOfRange
from logway.proxy.api_versions import API_VERSIONS, Ranges, advertised_ranges
from logway.proxy.cluster import Cluster
from logway.proxy.config import ProxyConfig
from logway.proxy.filters.acl import RULES as ACL_RULES
from logway.proxy.filters.acl import VERSION_CAPS as ACL_VERSION_CAPS
from logway.proxy.filters.acl import acl_filter_factory
from logway.proxy.filters.client_metrics import ClientMetrics
from logway.proxy.filters.tenant import DENIED_API_KEYS, TenantFilter, TopicIdDirectory
from logway.proxy.metrics import serve_registry
from logway.proxy.session import FilterFactory, ProxyConnection, ProxySession, ProxyTlsConnection, proxy_sasl_gate

log = logging.getLogger(__name__)

_SASL_RANGES = {sasl_handshake.API_KEY: (sasl_handshake.MIN_VERSION, sasl_handshake.MAX_VERSION),
                sasl_authenticate.API_KEY: (sasl_authenticate.MIN_VERSION, sasl_authenticate.MAX_VERSION)}


class ProxyBroker:
    """What a client connection of the proxy reaches through ``conn.broker``: the gateway's settings,
    credentials and authorizer, and the proxy's cluster, addressing and filter chains."""

    def __init__(self, config: ProxyConfig, filter_factories: Mapping[str, Sequence[FilterFactory]] | None = None):
        self.proxy = config
        self.config = config.server
        self.credentials = CredentialStore(self.config.log_dirs[0])
        self.authorizer: Authorizer | None = None
        if self.config.authorizer_enabled:
            self.authorizer = Authorizer(self.config.super_users, self.config.allow_everyone_if_no_acl_found)
            self.authorizer.load(Path(self.config.log_dirs[0]) / ACL_FILE)
        self.cluster = Cluster(config)
        self.addressing = config.addressing
        self.filter_factories = {name: list(fs) for name, fs in (filter_factories or {}).items()}
        self.stats = BrokerStats()  # the gateway's Connection counts requests and latency per API here
        self.virtual_clusters = config.virtual_clusters
        self.topic_ids = TopicIdDirectory()  # one upstream cluster: one directory for every tenant connection
        # Per-client metrics when they are served (metrics.port): one instance counts every connection.
        self.registry = CollectorRegistry()
        self.metrics = ClientMetrics(self.registry, topic_ids=self.topic_ids) if self.config.metrics_port else None

    def filter_chain(self, listener: str) -> list[FilterFactory]:
        """The filters of a client connection on ``listener``, in order: the virtual cluster's tenant filter
        (so the ACLs and metrics after it see the upstream's full names), ACLs (when an authorizer is
        configured), the listener's own chain, and the metrics last (their on_response runs first, learning
        topic ids from Metadata before the tenant filter strips the names)."""
        chain: list[FilterFactory] = []
        tenant = self.virtual_clusters.get(listener)
        if tenant is not None:
            prefix, topic_ids = tenant.topic_prefix, self.topic_ids
            chain.append(lambda client: TenantFilter(prefix, topic_ids))
        if self.authorizer is not None:
            chain.append(acl_filter_factory(self.authorizer))
        chain += self.filter_factories.get(listener, [])
        if self.metrics is not None:
            metrics = self.metrics
            chain.append(lambda client: metrics)
        return chain

    def advertised_ranges(self, upstream: Ranges, listener: str) -> Ranges:
        """What a connection on ``listener`` advertises: a virtual cluster's never lists the APIs its
        tenant filter denies (cluster-wide APIs, which no tenant may use)."""
        sasl = _SASL_RANGES if self.config.security[listener].sasl else {}
        ranges = advertised_ranges(upstream, sasl, ACL_VERSION_CAPS if self.authorizer is not None else None)
        if self.authorizer is not None:  # under ACLs only the APIs the ACL filter checks (fail closed)
            ranges = {k: v for k, v in ranges.items() if k in ACL_RULES or k in sasl or k == API_VERSIONS}
        if listener in self.virtual_clusters:
            ranges = {k: v for k, v in ranges.items() if k not in DENIED_API_KEYS}
        return ranges


class ProxyServer:
    """Accepts client connections on every bootstrap and broker port, within the gateway's limits."""

    def __init__(self, broker: ProxyBroker) -> None:
        self.broker = broker
        self.quotas = ConnectionQuotas.from_config(broker.config)
        self.memory = RequestMemory(budget_bytes(broker.config))
        self.connections: set[ProxySession] = set()

    async def serve(self, bootstrap: list[tuple[Listener, trio.SocketListener]],
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expire_idle_connections, self.connections, self.broker.config.connections_max_idle_ms)
            nursery.start_soon(self.memory.give_back_idle_buffers_forever)
            await nursery.start(self.broker.cluster.watch)
            for listener, bound in bootstrap:
                nursery.start_soon(self._accept_loop, listener, bound, None)
            for listener in self.broker.config.listeners:
                nursery.start_soon(self._follow_brokers, listener)
            task_status.started()

    async def _follow_brokers(self, listener: Listener) -> None:
        """Open a port for each upstream broker in the metadata; close it when the broker leaves."""
        cluster = self.broker.cluster
        addressing = self.broker.addressing[listener.name]
        scopes: dict[int, trio.CancelScope] = {}
        async with trio.open_nursery() as nursery:
            while True:
                changed = cluster.changed
                wanted = set(cluster.nodes)
                for node_id in sorted(wanted - set(scopes)):
                    try:
                        port = addressing.listen_port(node_id)
                    except NodeOutOfRange as exc:
                        log.error("%s", exc)
                        scopes[node_id] = trio.CancelScope()
                        continue
                    try:
                        bound = await trio.open_tcp_listeners(port, host=listener.host or None, backlog=1024)
                    except OSError as exc:
                        log.error("listener %s: cannot listen on port %d for upstream node %d: %s",
                                  listener.name, port, node_id, exc.strerror or exc)
                        scopes[node_id] = trio.CancelScope()
                        continue
                    scopes[node_id] = scope = trio.CancelScope()
                    nursery.start_soon(self._serve_node_port, listener, bound, node_id, scope)
                    log.info("listening on %s:%d for upstream node %d", listener.host, port, node_id)
                for node_id in sorted(set(scopes) - wanted):
                    scopes.pop(node_id).cancel()
                    log.info("closed the port of upstream node %d (left the cluster's metadata)", node_id)
                await changed.wait()

    async def _serve_node_port(self, listener: Listener, bound: list[trio.SocketListener], node_id: int,
                               scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as nursery:
                for sock in bound:
                    nursery.start_soon(self._accept_loop, listener, sock, node_id)

    async def _accept_loop(self, listener: Listener, bound: trio.SocketListener, node_id: int | None) -> None:
        async with bound, trio.open_nursery() as nursery:
            while True:
                sock, ip = await accept_admitted(bound, self.quotas)
                nursery.start_soon(self._handle, sock, ip, listener, node_id)

    async def _handle(self, sock: stdlib_socket.socket, ip: str, listener: Listener, node_id: int | None) -> None:
        try:
            try:
                sock.setsockopt(stdlib_socket.IPPROTO_TCP, stdlib_socket.TCP_NODELAY, 1)
                host, port = sock.getpeername()[:2]
                peer = f"{host}:{port}"
            except OSError:
                peer = "?"
            conn = _connection(self.broker, sock, peer, self.memory, listener, ProxyConnection, ProxyTlsConnection)
            if conn.sasl is not None:
                conn.dispatch = proxy_sasl_gate
            conn.node_id = node_id
            self.connections.add(conn)
            try:
                await conn.run()
            finally:
                self.connections.discard(conn)
        finally:
            self.quotas.release(ip)


async def serve_proxy(config: ProxyConfig, filter_factories: Mapping[str, Sequence[FilterFactory]] | None = None) -> None:
    """Run the proxy until SIGTERM or SIGINT."""
    broker = ProxyBroker(config, filter_factories)
    bootstrap = await open_listeners(broker.config)
    try:
        metrics_listeners = await open_metrics_listeners(broker.config)
    except OSError as exc:
        for _, opened in bootstrap:
            await opened.aclose()
        raise StartupError(f"metrics.port={broker.config.metrics_port}: cannot listen: {exc.strerror or exc}") from exc
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(ProxyServer(broker).serve, bootstrap)
            tune_after_startup()  # the broker's GC policy: fewer collections on the request path (p99)
            if metrics_listeners:
                await nursery.start(serve_registry, broker.registry, metrics_listeners)
                log.info("metrics on http://%s:%d/metrics", broker.config.metrics_host or "0.0.0.0",
                         broker.config.metrics_port)
            upstream = ",".join(f"{h}:{p}" for h, p in config.upstream_bootstrap)
            for listener in config.server.listeners:
                log.info("proxy listening on %s (advertised as %s) for upstream %s", listener,
                         config.server.advertised_for(listener.name), upstream)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    log.info("shut down cleanly")
