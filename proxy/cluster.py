"""What the proxy knows of the upstream cluster: its brokers' addresses (from Metadata), their API ranges,
and per-address reconnect backoff; a watcher refreshes the broker list so that ports follow it.

Brokers named by any Metadata or DescribeCluster response passing through the proxy are learned at once
(a broker added to the cluster gets its port without a restart); the watcher's periodic Metadata request
(proxy.metadata.refresh.interval.ms) is the authority for removing brokers that left.
"""

from __future__ import annotations

import logging
import random

import trio

from logway.proxy.api_versions import Ranges
from logway.proxy.config import ProxyConfig
from logway.proxy.rewrite import METADATA, Endpoint, endpoint_markers, upstream_endpoints
from logway.proxy.upstream import Upstream, UpstreamAuthenticationError, UpstreamError

log = logging.getLogger(__name__)

Address = tuple[str, int]


class Cluster:
    """The upstream brokers by node id, and connections to them with Kafka-client-like backoff."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.nodes: dict[int, Address] = {}
        self.ranges: Ranges = {}  # the latest ApiVersions answer of any upstream connection
        self.markers: list[bytes] = []
        self.changed = trio.Event()
        self._backoff: dict[Address, tuple[float, float]] = {}  # address -> (retry at, last delay)

    # --- what the cluster looks like ------------------------------------------------------------------

    def learn(self, endpoints: list[Endpoint], complete: bool = False) -> None:
        """Brokers named by a response; ``complete`` (the watcher's full list) also forgets the others."""
        nodes = dict(self.nodes) if not complete else {}
        for node_id, host, port in endpoints:
            nodes[node_id] = (host, port)
        if complete and not nodes:
            return  # an empty broker list is no reason to close every port
        if nodes != self.nodes:
            added = sorted(set(nodes) - set(self.nodes))
            removed = sorted(set(self.nodes) - set(nodes))
            if added or removed:
                log.info("upstream brokers: %s (added %s, removed %s)", sorted(nodes), added or "none", removed or "none")
            self.nodes = nodes
            # The bootstrap hosts too: a broker that joins is often on one of them before the proxy learns it.
            hosts = {host for host, _ in nodes.values()} | {host for host, _ in self.config.upstream_bootstrap}
            self.markers = endpoint_markers(hosts)
            self.changed.set()
            self.changed = trio.Event()

    # --- connections ----------------------------------------------------------------------------------

    async def connect_node(self, node_id: int) -> Upstream:
        """A new connection to upstream node ``node_id``."""
        address = self.nodes.get(node_id)
        if address is None:
            raise UpstreamError(f"upstream node {node_id} is not in the cluster's metadata")
        return await self._connect(address, node_id)

    async def connect_any(self) -> Upstream:
        """A new connection to any live upstream broker (the bootstrap port answers as the whole cluster)."""
        candidates = [(a, n) for n, a in self.nodes.items()]
        random.shuffle(candidates)
        candidates += [(a, None) for a in self.config.upstream_bootstrap if a not in self.nodes.values()]
        errors: list[UpstreamError] = []
        for address, node_id in candidates:
            try:
                return await self._connect(address, node_id)
            except UpstreamError as exc:
                errors.append(exc)
        refused = [e for e in errors if isinstance(e, UpstreamAuthenticationError)]
        if refused:  # the proxy's own credentials are wrong: say that, not "unreachable"
            raise refused[0]
        raise UpstreamError("no upstream broker reachable: " + "; ".join(map(str, errors)))

    async def _connect(self, address: Address, node_id: int | None) -> Upstream:
        now = trio.current_time()
        retry_at, delay = self._backoff.get(address, (0.0, 0.0))
        if now < retry_at:
            raise UpstreamError(f"{address[0]}:{address[1]} failed {delay:.2f} s ago (reconnect backoff)")
        try:
            upstream = await Upstream.connect(address, self.config.upstream, self.config.connect_timeout, node_id)
        except UpstreamError:
            delay = min(max(delay * 2, self.config.backoff), self.config.backoff_max)
            # Kafka's reconnect backoff: exponential with +-20% jitter.
            self._backoff[address] = (trio.current_time() + delay * random.uniform(0.8, 1.2), delay)
            raise
        self._backoff.pop(address, None)
        self.ranges = upstream.ranges
        return upstream

    # --- the watcher ----------------------------------------------------------------------------------

    async def watch(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Refresh the broker list every proxy.metadata.refresh.interval.ms over one kept connection;
        reports started once the first refresh has succeeded or failed (ports open as soon as it succeeds)."""
        upstream: Upstream | None = None
        started = False
        refused = ""  # the last authentication failure logged (logged once, not at every refresh)
        while True:
            try:
                if upstream is None:
                    upstream = await self.connect_any()
                await self._refresh(upstream)
                refused = ""
            except UpstreamAuthenticationError as exc:
                if str(exc) != refused:
                    log.error("the upstream refused the proxy's credentials (proxy.upstream.sasl.*): %s", exc)
                refused = str(exc)
            except UpstreamError as exc:
                log.warning("upstream metadata refresh failed: %s", exc)
                if upstream is not None:
                    await upstream.aclose()
                    upstream = None
            if not started:
                task_status.started()
                started = True
            await trio.sleep(self.config.metadata_refresh)

    async def _refresh(self, upstream: Upstream) -> None:
        version = min(12, upstream.ranges.get(METADATA, (0, 0))[1])
        fields = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
                  "include_cluster_authorized_operations": False}
        response = None
        with trio.move_on_after(max(self.config.connect_timeout, 1.0)):
            response = await upstream.request(METADATA, version, fields)
        if response is None:
            raise UpstreamError(f"{upstream}: no Metadata response")
        self.learn(upstream_endpoints(METADATA, response), complete=True)
