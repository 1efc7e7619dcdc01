"""A Fetch response read front to back without decoding it, so the proxy can stream it (sans-IO).

The proxy sends a large Fetch response on while it arrives: its record data goes from the upstream socket to
the client's without entering Python (proxy/splice.py), only the small fields between them are parsed here
to find where each partition's records start and end, and how many bytes each topic's take (the per-client
metrics). The one thing to rewrite, the ``node_endpoints`` top-level tagged field (KIP-951, v16+), is the
very end of the response (its "tail"), after every record; the frame's size has been sent by then, so
``rewrite_tail`` rewrites it to the same number of bytes, the room an endpoint's address gains or loses taken
up by a padding tagged field (clients skip tags they do not know, KIP-482). Field layout (Kafka's
FetchResponse.json, v4-v18): throttle_time_ms, error_code and session_id (v7+), responses [topic (v4-12) or
topic_id (v13+), partitions [partition_index, error_code, high_watermark, last_stable_offset,
log_start_offset (v5+), aborted_transactions [producer_id, first_offset, tags], preferred_read_replica (v11+),
records, tags], tags], tags (0: node_endpoints [node_id, host, port, rack, tags], v16+); the tags from v12.
"""

from __future__ import annotations

import logging
import struct

from logway.proxy.addresses import BrokerAddressing, NodeOutOfRange
from logway.proxy.walk import NeedMore, RecordSets, Walk, length, skip, skip_tags, uvarint
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import write_uvarint

log = logging.getLogger(__name__)

NODE_ENDPOINTS_TAG = 0
PADDING_TAG = 127  # a top-level tag Kafka does not define: clients skip it (the largest one-byte tag)
_I32 = struct.Struct(">i")


class TailDoesNotFit(Exception):
    """The rewritten node_endpoints cannot take exactly the upstream's bytes (the size is already sent)."""


class FetchWalk(Walk):
    """Where a Fetch response's fields and records lie, one buffer of arriving bytes at a time; the first
    bytes it is given follow the correlation id. ``count_records``: the records of each topic counted too (from
    the v2 batch headers, which are then fields); the metrics count bytes only."""

    def __init__(self, version: int, count_records: bool = False) -> None:
        super().__init__(self._header, flexible=version >= 12, by_id=version >= 13, count_records=count_records)
        self._top_size = 4 + (6 if version >= 7 else 0)  # throttle_time_ms; error_code, session_id
        # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset (v5+)
        self._partition_size = 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
        self._replica_size = 4 if version >= 11 else 0  # preferred_read_replica

    def _header(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = self._tags(buf, pos)  # the response header's tags (header v1)
        self._item = self._top
        return pos, 0

    def _top(self, buf: memoryview, pos: int) -> tuple[int, int]:
        return self._topic_array(buf, skip(buf, pos, self._top_size)), 0

    def _partition_head(self, buf: memoryview, pos: int) -> tuple[int, int]:
        aborted, pos = length(buf, skip(buf, pos, self._partition_size), self._flexible)
        for _ in range(aborted):  # producer_id, first_offset (, tags)
            pos = self._tags(buf, skip(buf, pos, 16))
        return length(buf, skip(buf, pos, self._replica_size), self._flexible)


def fetch_record_sets(version: int, frame: bytes | memoryview) -> RecordSets:
    """Record bytes per topic name (v4-12) or topic id (v13+) of a whole Fetch response frame (no size
    prefix); MalformedRequest when it does not walk."""
    return FetchWalk(version).walk_whole(memoryview(frame)[4:])


# --- the tail: top-level tagged fields ----------------------------------------------------------------------

def _compact_string(raw: bytes) -> bytes:
    return write_uvarint(len(raw) + 1) + raw


def rewrite_tail(tail: bytes, addressing: BrokerAddressing) -> bytes:
    """The top-level tagged fields of a Fetch v16+ response with every node_endpoints address replaced by the
    proxy's, in exactly ``len(tail)`` bytes; TailDoesNotFit when that is impossible, MalformedRequest when the
    tail does not parse to its end."""
    buf = memoryview(tail)
    try:
        count, pos = uvarint(buf, 0)
        fields = []
        for _ in range(count):
            tag, pos = uvarint(buf, pos)
            size, pos = uvarint(buf, pos)
            fields.append((tag, buf[pos:skip(buf, pos, size)]))
            pos += size
    except NeedMore:
        raise MalformedRequest("Fetch response ends inside its tagged fields") from None
    if pos != len(buf):
        raise MalformedRequest(f"Fetch response has {len(buf) - pos} bytes after its tagged fields")
    if not any(tag == NODE_ENDPOINTS_TAG for tag, _ in fields):
        return tail
    fields = [(tag, _rewrite_endpoints(data, addressing) if tag == NODE_ENDPOINTS_TAG else bytes(data))
              for tag, data in fields]
    return _fitted(fields, len(tail))


def _rewrite_endpoints(data: memoryview, addressing: BrokerAddressing) -> bytes:
    """node_endpoints (compact array of node_id, host, port, rack, tags) with the proxy's addresses; a node the
    proxy has no port for is left out (as rewrite.py does for lists)."""
    try:
        count, pos = uvarint(data, 0)
        out = []
        for _ in range(count - 1):
            node = _I32.unpack_from(data, skip(data, pos, 4) - 4)[0]
            size, pos = uvarint(data, pos + 4)
            if size < 1:
                raise MalformedRequest("node_endpoints of a Fetch response have a null host")
            pos = skip(data, pos, size - 1 + 4)  # host, port
            rest = pos
            size, pos = uvarint(data, pos)  # rack (0: null)
            pos = skip_tags(data, skip(data, pos, max(size - 1, 0)))
            try:
                host, port = addressing.advertised(node)
            except NodeOutOfRange as exc:
                log.error("%s", exc)
                continue
            out.append(_I32.pack(node) + _compact_string(host.encode()) + _I32.pack(port) + bytes(data[rest:pos]))
    except (NeedMore, struct.error):
        raise MalformedRequest("node_endpoints of a Fetch response do not parse") from None
    if pos != len(data):
        raise MalformedRequest("node_endpoints of a Fetch response have trailing bytes")
    return write_uvarint(len(out) + 1) + b"".join(out)


def _fitted(fields: list[tuple[int, bytes]], size: int) -> bytes:
    """The tagged fields encoded in exactly ``size`` bytes, a padding field taking up the difference."""
    plain = _tagged(fields)
    if len(plain) == size:
        return plain
    for pad in range(size - len(plain), -1, -1):  # the padding field's data, shrinking as its varints grow
        padded = _tagged(fields + [(PADDING_TAG, bytes(pad))])
        if len(padded) == size:
            return padded
        if len(padded) < size:
            break
    raise TailDoesNotFit(f"node_endpoints rewritten take {len(plain)} bytes, the upstream's {size}")


def _tagged(fields: list[tuple[int, bytes]]) -> bytes:
    out = [write_uvarint(len(fields))]
    for tag, data in sorted(fields, key=lambda f: f[0]):
        out += [write_uvarint(tag), write_uvarint(len(data)), data]
    return b"".join(out)


def address_growth(upstream_host: str, advertised_host: str) -> int:
    """How many bytes one node_endpoints entry grows when its upstream host is replaced by the proxy's."""
    return len(_compact_string(advertised_host.encode())) - len(_compact_string(upstream_host.encode()))
