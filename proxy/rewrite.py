"""Broker addresses in upstream responses, rewritten to the proxy's (sans-IO, on kio objects).

Every response of the advertised API set that carries a broker's host and port: Metadata ``brokers`` (all
versions), FindCoordinator (v0-3: the single node at the top; v4+: each of ``coordinators``),
DescribeCluster ``brokers``, the ``node_endpoints`` tagged field of Produce v10+ and Fetch v16+ (KIP-951), and
the ``node_endpoints`` of ShareFetch and ShareAcknowledge (KIP-932). (DescribeQuorum also carries them: it is
not advertised.)
A node the port-per-broker scheme has no port for is left out of lists (FindCoordinator answers
COORDINATOR_NOT_AVAILABLE for it, a retriable error), with an error line naming proxy.node.id.range.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from logway.proxy.addresses import BrokerAddressing, NodeOutOfRange
from logway.wire.errors import ErrorCode

log = logging.getLogger(__name__)

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, SHARE_FETCH, SHARE_ACKNOWLEDGE = 0, 1, 3, 10, 60, 78, 79
# The first version whose response may carry node_endpoints, the last thing in the response: a top-level tagged
# field of Produce and Fetch, the last field of ShareFetch and ShareAcknowledge (every version).
NODE_ENDPOINTS_FROM = {PRODUCE: 10, FETCH: 16, SHARE_FETCH: 0, SHARE_ACKNOWLEDGE: 0}
# API key -> the top-level fields holding lists of (node_id, host, port) entities.
_LISTS = {METADATA: ("brokers",), DESCRIBE_CLUSTER: ("brokers",), FIND_COORDINATOR: ("coordinators",),
          PRODUCE: ("node_endpoints",), FETCH: ("node_endpoints",), SHARE_FETCH: ("node_endpoints",),
          SHARE_ACKNOWLEDGE: ("node_endpoints",)}

Endpoint = tuple[int, str, int]
"""(node id, host, port) of an upstream broker."""

_warned: set[int] = set()


def upstream_endpoints(api_key: int, response: Any) -> list[Endpoint]:
    """The upstream broker addresses a response names (before rewriting)."""
    out = []
    for name in _LISTS.get(api_key, ()):
        for item in getattr(response, name, ()):
            if _node(item) >= 0:
                out.append((_node(item), item.host, item.port))
    if api_key == FIND_COORDINATOR and hasattr(response, "host") and response.node_id >= 0:
        out.append((response.node_id, response.host, response.port))
    return out


def rewrite_addresses(api_key: int, response: Any, addressing: BrokerAddressing) -> Any:
    """The response with every broker address replaced by the proxy's address for that node."""
    changes = {}
    for name in _LISTS.get(api_key, ()):
        items = getattr(response, name, None)
        if items:
            changes[name] = tuple(_rewrite_list(items, addressing, name == "coordinators"))
    if api_key == FIND_COORDINATOR and hasattr(response, "host") and response.node_id >= 0:
        changes.update(_rewrite_single(response, addressing))
    return dataclasses.replace(response, **changes) if changes else response


def _rewrite_list(items, addressing: BrokerAddressing, coordinators: bool):
    for item in items:
        node = _node(item)
        if node < 0:  # a FindCoordinator v4+ entry with an error: no node
            yield item
            continue
        try:
            host, port = addressing.advertised(node)
        except NodeOutOfRange as exc:
            _warn(node, exc)
            if coordinators:
                yield dataclasses.replace(item, **_not_available(str(exc)))
            continue
        yield dataclasses.replace(item, host=host, port=port)


def _node(item: Any) -> int:
    """The node id of an address entity (DescribeCluster calls it broker_id)."""
    node = getattr(item, "node_id", None)
    return item.broker_id if node is None else node


def _rewrite_single(response: Any, addressing: BrokerAddressing) -> dict[str, Any]:
    try:
        host, port = addressing.advertised(response.node_id)
    except NodeOutOfRange as exc:
        _warn(response.node_id, exc)
        changes = _not_available(str(exc))
        return {k: v for k, v in changes.items() if hasattr(response, k)}
    return {"host": host, "port": port}


def _not_available(message: str) -> dict[str, Any]:
    return {"error_code": ErrorCode.coordinator_not_available, "error_message": message, "node_id": -1,
            "host": "", "port": -1}


def _warn(node_id: int, exc: Exception) -> None:
    if node_id not in _warned:
        _warned.add(node_id)
        log.error("%s", exc)


def endpoint_markers(hosts: set[str]) -> list[bytes]:
    """The bytes a compact-string host takes in a flexible response (length + 1 as a one-byte varint, then
    the host): a Produce/Fetch response none of whose bytes match carries no node_endpoints to rewrite."""
    out = []
    for host in hosts:
        raw = host.encode()
        out.append(bytes([len(raw) + 1]) + raw if len(raw) + 1 < 0x80 else raw)
    return out


def may_carry_endpoints(frame: bytes | bytearray, markers: list[bytes], brokers: int) -> bool:
    """Cheap test before decoding a Produce v10+/Fetch v16+/ShareFetch/ShareAcknowledge response: does an upstream
    host appear where node_endpoints would be? That field is the last thing in the response, so only its
    possible extent at the end is searched (a few hundred bytes per broker), not the records before it.
    (A false positive, e.g. a record value holding the host near the end, only costs one decode.)"""
    start = max(0, len(frame) - ENDPOINT_BYTES * (brokers + 8))
    return any(frame.find(marker, start) >= 0 for marker in markers)


# The most one node_endpoints entry takes: node id, host and rack (compact strings of host-name length),
# port, tagged-field section.
ENDPOINT_BYTES = 4 + 2 + 255 + 4 + 2 + 255 + 1
