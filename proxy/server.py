"""The proxy process: its client listeners (the server layer's accept loop, limits, TLS and SASL, with a
ProxySession per connection), one port per upstream broker opened and closed as the cluster's Metadata changes,
and the cluster watcher."""

from __future__ import annotations

import logging
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry

from logway.proxy.addresses import NodeOutOfRange
from logway.proxy.api_versions import API_VERSIONS, Ranges, advertised_ranges
from logway.proxy.cluster import Cluster
from logway.proxy.config import ProxyConfig
from logway.proxy.filter_config import build_factories
from logway.proxy.filters.acl import RULES as ACL_RULES
from logway.proxy.filters.acl import VERSION_CAPS as ACL_VERSION_CAPS
from logway.proxy.filters.acl import acl_filter_factory
from logway.proxy.filters.address_rewrite import address_rewrite_factory
from logway.proxy.filters.audit import AuditFilters
from logway.proxy.filters.client_metrics import ClientMetrics
from logway.proxy.filters.ownership import OwnedIds, ownership_filter_factory
from logway.proxy.filters.realm_users import VERSIONS as SCRAM_USER_VERSIONS
from logway.proxy.filters.realm_users import realm_users_factory
from logway.proxy.filters.tenant import DENIED_API_KEYS, TenantFilter, TopicIdDirectory
from logway.proxy.metrics import serve_registry
from logway.proxy.session import FilterFactory, ProxySession
from logway.server.audit import NO_AUDIT, Audit, audit_of
from logway.server.config import Listener
from logway.server.connection import HandlerFactory
from logway.server.gc_policy import tune_after_startup
from logway.server.listeners import Server, StartupError, listener_context, open_listeners
from logway.server.metrics_http import open_metrics_listeners
from logway.server.security.realm import Realm
from logway.server.security.sasl import VERSIONS as SASL_VERSIONS
from logway.server.stats import ServerStats

log = logging.getLogger(__name__)

class Proxy:
    """What every client connection of the proxy shares: the settings, the realms (SCRAM users and ACLs: the
    proxy's own, and each virtual cluster's), the upstream cluster, the addressing, the owners of the ids the
    upstream handed out, and the filter chains."""

    def __init__(self, config: ProxyConfig, filter_factories: Mapping[str, Sequence[FilterFactory]] | None = None):
        self.settings = config
        self.config = config.server
        self.virtual_clusters = config.virtual_clusters
        self.realm = self._open_realm(Path(self.config.log_dirs[0]))
        # Each virtual cluster's users and ACLs are its own: a principal of one can never act in another.
        self.cluster_realms = {listener: self._open_realm(config.realm_dir(cluster))
                               for listener, cluster in self.virtual_clusters.items()}
        self.owned_ids = OwnedIds()
        self.cluster = Cluster(config)
        self.addressing = config.addressing
        self.filter_factories = {name: list(fs) for name, fs in (filter_factories or {}).items()}
        self.registry = CollectorRegistry()  # served on metrics.port
        # proxy.filters and the virtual clusters' own
        self.named_filters = build_factories(config.named_filters, self.registry)
        self.stats = ServerStats()  # the connections count requests and latency per API here
        self.topic_ids = TopicIdDirectory()  # one upstream cluster: one directory for every tenant connection
        # Per-client metrics when they are served (metrics.port): one instance counts every connection.
        self.metrics = ClientMetrics(self.registry, topic_ids=self.topic_ids) if self.config.metrics_port else None
        # Each listener's audit log: those of the audit filters in its connections' chain.
        self.audits = {listener.name: self._audit_for(listener.name) for listener in self.config.listeners}

    def filter_chain(self, listener: str) -> list[FilterFactory]:
        """The filters of a client connection on ``listener``, in chain order (requests pass them first to last,
        responses last to first):

        1. the virtual cluster's tenant filter (when the listener serves one): every filter after it sees the
           upstream's full names, and its answers (a name outside the tenant) are never seen by the others;
        2. the ACL filter (when an authorizer is configured), with the ACLs of the listener's realm: it checks the
           full names, and its denials pass back through the tenant filter, which strips them;
           then, on a virtual cluster's listener or under ACLs (where clients are not all one), the ownership
           filter (fetch sessions and producer ids kept to the client they were handed to);
        3. the configured filters (``proxy.filters``, then the virtual cluster's ``filters``, in the order named),
           then, on a virtual cluster's listener, its own SCRAM users (answered from its realm: after the
           configured filters, so an audit filter sees those changes), then the listener's own
           (``filter_factories``, given by code), in the order given;
        4. address rewriting: nearest the upstream but for the metrics, so every filter before it sees the
           proxy's broker addresses, never the upstream's;
        5. the per-client metrics (metrics.port): last, they count the frames as exchanged with the upstream
           (every filter's changes made) and learn topic ids from Metadata responses before the tenant filter
           strips the names.
        """
        chain: list[FilterFactory] = []
        tenant = self.virtual_clusters.get(listener)
        if tenant is not None:
            prefix, topic_ids = tenant.topic_prefix, self.topic_ids
            chain.append(lambda client: TenantFilter(prefix, topic_ids))
        realm = self.cluster_realms.get(listener, self.realm)
        if realm.authorizer is not None:
            chain.append(acl_filter_factory(realm.authorizer, self.audits.get(listener, NO_AUDIT)))
        if tenant is not None or realm.authorizer is not None:
            chain.append(ownership_filter_factory(self.owned_ids))
        chain += self._named_chain(listener)
        if tenant is not None:
            chain.append(realm_users_factory(realm))
        chain += self.filter_factories.get(listener, [])
        chain.append(address_rewrite_factory(self.cluster, self.addressing[listener]))
        if self.metrics is not None:
            metrics = self.metrics
            chain.append(lambda client: metrics)
        return chain

    def _named_chain(self, listener: str) -> list[FilterFactory]:
        """The configured filters of a connection on ``listener``: proxy.filters, then its virtual cluster's."""
        tenant = self.virtual_clusters.get(listener)
        keys = self.settings.named_filters.keys_for(tenant.name if tenant is not None else None)
        return [self.named_filters[key] for key in keys]

    def _audit_for(self, listener: str) -> Audit:
        """Where the authentications and ACL denials of ``listener``'s connections are recorded: the audit filters
        of their chain (none: nowhere)."""
        return audit_of([f.audit for f in self._named_chain(listener) if isinstance(f, AuditFilters)])

    def close(self) -> None:
        """Write what the audit logs hold and close them (at shutdown)."""
        for factory in self.named_filters.values():
            if isinstance(factory, AuditFilters):
                factory.audit.close()

    def realm_for(self, listener: Listener) -> Realm:
        """The realm the clients of ``listener`` authenticate in: its virtual cluster's, else the proxy's."""
        return self.cluster_realms.get(listener.name, self.realm)

    def _open_realm(self, directory: Path) -> Realm:
        """A realm in ``directory`` (made if missing), with its ACLs when authorization is on."""
        directory.mkdir(parents=True, exist_ok=True)
        realm = Realm(directory)
        if self.config.authorizer_enabled:
            realm.load_acls(self.config.super_users, self.config.allow_everyone_if_no_acl_found)
        return realm

    def session_factory(self, node_id: int | None) -> HandlerFactory:
        """Sessions for the connections of a bootstrap port (``node_id`` None) or of a broker's port."""
        return lambda conn: ProxySession(self, conn, node_id)

    def advertised_ranges(self, upstream: Ranges, listener: str) -> Ranges:
        """What a connection on ``listener`` advertises: a virtual cluster's never lists the APIs its
        tenant filter denies (cluster-wide APIs, which no tenant may use)."""
        sasl = SASL_VERSIONS if self.config.security[listener].sasl else {}
        ranges = advertised_ranges(upstream, sasl, ACL_VERSION_CAPS if self.config.authorizer_enabled else None)
        if self.config.authorizer_enabled:  # under ACLs only the APIs the ACL filter checks (fail closed)
            ranges = {k: v for k, v in ranges.items() if k in ACL_RULES or k in sasl or k == API_VERSIONS}
        if listener in self.virtual_clusters:
            ranges = {k: v for k, v in ranges.items() if k not in DENIED_API_KEYS}
            ranges |= SCRAM_USER_VERSIONS  # answered by the proxy from the virtual cluster's realm
        return ranges


class ProxyServer:
    """Accepts client connections on every bootstrap and broker port, within the server's limits."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.server = Server(proxy.config, proxy.stats)

    async def serve(self, bootstrap: list[tuple[Listener, trio.SocketListener]],
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.server.run)
            await nursery.start(self.proxy.cluster.watch)
            for listener, bound in bootstrap:
                nursery.start_soon(self.server.accept, self._context(listener), bound, self.proxy.session_factory(None))
            for listener in self.proxy.config.listeners:
                nursery.start_soon(self._follow_brokers, listener)
            task_status.started()

    def _context(self, listener: Listener):
        return listener_context(self.proxy.config, listener, self.proxy.realm_for(listener),
                                self.proxy.audits[listener.name])

    async def _follow_brokers(self, listener: Listener) -> None:
        """Open a port for each upstream broker in the metadata; close it when the broker leaves."""
        cluster = self.proxy.cluster
        addressing = self.proxy.addressing[listener.name]
        scopes: dict[int, trio.CancelScope] = {}
        async with trio.open_nursery() as nursery:
            while True:
                changed = cluster.changed
                wanted = set(cluster.nodes)
                for node_id in sorted(wanted - set(scopes)):
                    scopes[node_id] = await self._open_node_port(nursery, listener, addressing, node_id)
                for node_id in sorted(set(scopes) - wanted):
                    scopes.pop(node_id).cancel()
                    log.info("closed the port of upstream node %d (left the cluster's metadata)", node_id)
                await changed.wait()

    async def _open_node_port(self, nursery: trio.Nursery, listener: Listener, addressing, node_id: int
                              ) -> trio.CancelScope:
        """Listen for upstream node ``node_id`` on its port (a log line if it cannot); the scope closes the port."""
        scope = trio.CancelScope()
        try:
            port = addressing.listen_port(node_id)
        except NodeOutOfRange as exc:
            log.error("%s", exc)
            return scope
        try:
            bound = await trio.open_tcp_listeners(port, host=listener.host or None, backlog=1024)
        except OSError as exc:
            log.error("listener %s: cannot listen on port %d for upstream node %d: %s",
                      listener.name, port, node_id, exc.strerror or exc)
            return scope
        nursery.start_soon(self._serve_node_port, listener, bound, node_id, scope)
        log.info("listening on %s:%d for upstream node %d", listener.host, port, node_id)
        return scope

    async def _serve_node_port(self, listener: Listener, bound: list[trio.SocketListener], node_id: int,
                               scope: trio.CancelScope) -> None:
        context, sessions = self._context(listener), self.proxy.session_factory(node_id)
        with scope:
            async with trio.open_nursery() as nursery:
                for sock in bound:
                    nursery.start_soon(self.server.accept, context, sock, sessions)


async def serve_proxy(config: ProxyConfig, filter_factories: Mapping[str, Sequence[FilterFactory]] | None = None) -> None:
    """Run the proxy until SIGTERM or SIGINT."""
    proxy = Proxy(config, filter_factories)
    try:
        await _serve(proxy, config)
    finally:
        proxy.close()
    log.info("shut down cleanly")


async def _serve(proxy: Proxy, config: ProxyConfig) -> None:
    bootstrap = await open_listeners(proxy.config)
    try:
        metrics_listeners = await open_metrics_listeners(proxy.config)
    except OSError as exc:
        for _, opened in bootstrap:
            await opened.aclose()
        raise StartupError(f"metrics.port={proxy.config.metrics_port}: cannot listen: {exc.strerror or exc}") from exc
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(ProxyServer(proxy).serve, bootstrap)
            tune_after_startup()  # the server's GC policy: fewer collections on the request path (p99)
            if metrics_listeners:
                await nursery.start(serve_registry, proxy.registry, metrics_listeners)
                log.info("metrics on http://%s:%d/metrics", proxy.config.metrics_host or "0.0.0.0",
                         proxy.config.metrics_port)
            upstream = ",".join(f"{h}:{p}" for h, p in config.upstream_bootstrap)
            for listener in config.server.listeners:
                log.info("proxy listening on %s (advertised as %s) for upstream %s", listener,
                         config.server.advertised_for(listener.name), upstream)
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
