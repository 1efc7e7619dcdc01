"""Where clients reach each upstream broker: port per broker (Kroxylicious' PortPerBroker scheme).

A client listener on port P is the bootstrap of the whole cluster; upstream node N is served on
P + proxy.broker.port.offset + N (offset 1 by default) and advertised as proxy.broker.address.pattern
(default: the advertised listener's host; ``$(nodeId)`` is replaced by N) with the advertised port plus the
same offset and N. Node ids outside proxy.node.id.range have no port: they are refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

NODE_ID_TOKEN = "$(nodeId)"


class NodeOutOfRange(ValueError):
    """An upstream node id the port-per-broker scheme has no port for."""


@dataclass(frozen=True)
class BrokerAddressing:
    """The port-per-broker mapping of one client listener (bind side and advertised side)."""

    bind_port: int
    advertised_host: str
    advertised_port: int
    port_offset: int = 1
    min_node_id: int = 0
    max_node_id: int = 99
    address_pattern: str = ""

    def check(self, node_id: int) -> None:
        if not self.min_node_id <= node_id <= self.max_node_id:
            raise NodeOutOfRange(
                f"upstream node id {node_id} is outside proxy.node.id.range={self.min_node_id}-{self.max_node_id}: "
                "it has no port on the proxy (widen the range)")

    def listen_port(self, node_id: int) -> int:
        """The local port that serves upstream node ``node_id``."""
        self.check(node_id)
        return self.bind_port + self.port_offset + node_id

    def advertised(self, node_id: int) -> tuple[str, int]:
        """(host, port) clients are told for upstream node ``node_id``."""
        self.check(node_id)
        host = (self.address_pattern or self.advertised_host).replace(NODE_ID_TOKEN, str(node_id))
        return host, self.advertised_port + self.port_offset + node_id

    def node_for_port(self, port: int) -> int | None:
        """The node a local port serves, or None for the bootstrap port."""
        node = port - self.bind_port - self.port_offset
        return node if port != self.bind_port and self.min_node_id <= node <= self.max_node_id else None

    @property
    def port_span(self) -> range:
        """Every local port this listener may use (bootstrap and every node in range)."""
        return range(self.bind_port + self.port_offset + self.min_node_id,
                     self.bind_port + self.port_offset + self.max_node_id + 1)


def parse_node_id_range(value: str) -> tuple[int, int]:
    """``proxy.node.id.range``: ``LOW-HIGH`` (inclusive) or a single maximum ``HIGH`` (from 0)."""
    text = value.strip()
    low, sep, high = text.partition("-")
    try:
        lo, hi = (int(low), int(high)) if sep else (0, int(low))
    except ValueError:
        raise ValueError(f"proxy.node.id.range={value!r}: expected LOW-HIGH, e.g. 0-99") from None
    if lo < 0 or hi < lo:
        raise ValueError(f"proxy.node.id.range={value!r}: expected 0 <= LOW <= HIGH")
    return lo, hi
