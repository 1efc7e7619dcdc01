"""Address rewriting as a filter: every broker address in an upstream response becomes the proxy's address for
that broker on the client's listener (proxy/rewrite.py on decoded responses, proxy/fetch_walk.py on the tail of
a streamed Fetch), and the addresses Metadata and DescribeCluster name teach the cluster its brokers.

It handles responses only, and only those that carry addresses: Metadata, FindCoordinator and DescribeCluster
(decoded), Produce v10+ and Fetch v16+ (KIP-951 node_endpoints, a top-level tagged field sent when leadership
moved) and ShareFetch/ShareAcknowledge (KIP-932 node_endpoints, their last field), which are decoded only when
an upstream host appears in their last bytes (``may_carry_endpoints``, no decode), and a large Fetch v16+ is
streamed, its tail rewritten in the upstream's number of bytes, whenever every broker's rewritten address fits
there (same size, or two bytes shorter or more: the padding field).
It sits last but one in the chain, nearest the upstream after the metrics: every other filter sees the proxy's
addresses.
"""

from __future__ import annotations

from typing import Any

from logway.proxy.addresses import BrokerAddressing, NodeOutOfRange
from logway.proxy.cluster import Cluster
from logway.proxy.fetch_walk import TailDoesNotFit, address_growth, rewrite_tail
from logway.proxy.filters.base import EVERY_VERSION, ClientInfo, Filter
from logway.proxy.rewrite import (
    DESCRIBE_CLUSTER,
    FETCH,
    FIND_COORDINATOR,
    METADATA,
    NODE_ENDPOINTS_FROM,
    PRODUCE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    may_carry_endpoints,
    rewrite_addresses,
    upstream_endpoints,
)
from logway.wire.errors import MalformedRequest


class AddressRewrite(Filter):
    """The proxy's addresses in one listener's responses (``addressing``), for the brokers of ``cluster``."""

    responses = {METADATA: EVERY_VERSION, FIND_COORDINATOR: EVERY_VERSION, DESCRIBE_CLUSTER: EVERY_VERSION,
                 PRODUCE: (NODE_ENDPOINTS_FROM[PRODUCE], EVERY_VERSION[1]),
                 FETCH: (NODE_ENDPOINTS_FROM[FETCH], EVERY_VERSION[1]),
                 SHARE_FETCH: EVERY_VERSION, SHARE_ACKNOWLEDGE: EVERY_VERSION}

    def __init__(self, cluster: Cluster, addressing: BrokerAddressing) -> None:
        self.cluster = cluster
        self.addressing = addressing
        self._fit_nodes: Any = None
        self._fit = False

    def must_decode(self, api_key: int, api_version: int, frame: bytes | bytearray) -> bool:
        if api_key not in NODE_ENDPOINTS_FROM:
            return True
        return may_carry_endpoints(frame, self.cluster.markers, len(self.cluster.nodes))

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key in (METADATA, DESCRIBE_CLUSTER):
            self.cluster.learn(upstream_endpoints(api_key, response))
        return rewrite_addresses(api_key, response, self.addressing)

    def may_stream(self, api_key: int, api_version: int) -> bool:
        """A Fetch v16+ streamed when the node_endpoints it may carry can be rewritten in the upstream's bytes:
        when the proxy's address for some broker is longer than the upstream's (or one byte shorter), such
        responses are read whole and decoded instead."""
        nodes = self.cluster.nodes
        if nodes is not self._fit_nodes:
            self._fit_nodes = nodes
            self._fit = all(_fits(host, node, self.addressing) for node, (host, _) in nodes.items())
        return api_key == FETCH and self._fit

    def streamed_tail(self, api_key: int, api_version: int, tail: bytes) -> bytes:
        try:
            return rewrite_tail(tail, self.addressing)
        except TailDoesNotFit as exc:
            raise MalformedRequest(str(exc)) from None


def _fits(upstream_host: str, node_id: int, addressing: BrokerAddressing) -> bool:
    """Whether node ``node_id``'s endpoint rewritten fits a padding field in its upstream bytes: the same
    size, or smaller by two bytes or more (a node without a port is left out: always fits)."""
    try:
        host, _ = addressing.advertised(node_id)
    except NodeOutOfRange:
        return True
    growth = address_growth(upstream_host, host)
    return growth == 0 or growth <= -2


def address_rewrite_factory(cluster: Cluster, addressing: BrokerAddressing):
    """A filter factory for the chain: one AddressRewrite per client connection of the listener."""
    return lambda client: AddressRewrite(cluster, addressing)
