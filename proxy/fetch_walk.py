"""A Fetch v16+ response read front to back without decoding it, so the proxy can stream it (sans-IO).

The proxy sends a large Fetch response on while it arrives: its record data goes from the upstream socket to
the client's without entering Python (proxy/splice.py), only the small fields between them are parsed here
to find where each partition's records start and end. The one thing to rewrite, the ``node_endpoints``
top-level tagged field (KIP-951, v16+), is the very end of the response (its "tail"), after every record;
the frame's size has been sent by then, so ``rewrite_tail`` rewrites it to the same number of bytes, the
room an endpoint's address gains or loses taken up by a padding tagged field (clients skip tags they do not
know, KIP-482). Field layout (Kafka's FetchResponse.json, v16-v18 identical): throttle_time_ms, error_code,
session_id, responses [topic_id, partitions [partition_index, error_code, high_watermark, last_stable_offset,
log_start_offset, aborted_transactions [producer_id, first_offset, tags], preferred_read_replica, records,
tags], tags], tags (0: node_endpoints [node_id, host, port, rack, tags]).
"""

from __future__ import annotations

import logging
import struct

from logway.proxy.addresses import BrokerAddressing, NodeOutOfRange
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import write_uvarint

log = logging.getLogger(__name__)

WALKED_FROM = 16  # Fetch responses before v16 carry no address: forwarded as they are, unwalked
NODE_ENDPOINTS_TAG = 0
PADDING_TAG = 127  # a top-level tag Kafka does not define: clients skip it (the largest one-byte tag)
_PARTITION_FIXED = 4 + 2 + 8 + 8 + 8  # partition_index .. log_start_offset
_I32 = struct.Struct(">i")


class _NeedMore(Exception):
    """The buffer ends inside the item being parsed."""


class TailDoesNotFit(Exception):
    """The rewritten node_endpoints cannot take exactly the upstream's bytes (the size is already sent)."""


def _uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _NeedMore
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint longer than 5 bytes in a Fetch response")


def _skip(buf: memoryview, pos: int, n: int) -> int:
    if pos + n > len(buf):
        raise _NeedMore
    return pos + n


def _skip_tags(buf: memoryview, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos = _skip(buf, pos, size)
    return pos


class FetchWalk:
    """Where a Fetch v16+ response body's fields and records lie, one buffer of arriving bytes at a time."""

    def __init__(self) -> None:
        self._item = self._header
        self._topics = 0
        self._partitions = 0
        self.at_tail = False

    def step(self, buf: memoryview) -> tuple[int, int]:
        """Parse the whole items at the start of ``buf`` (the frame's next unforwarded bytes, the first call
        starting after the correlation id): returns
        (field bytes, record bytes): the first to forward as they are, then that many record bytes to forward
        unseen. (0, 0) before the tail: ``buf`` ends inside an item (give it more). At the tail, ``at_tail``."""
        pos = 0
        while not self.at_tail:
            try:
                end, records = self._item(buf, pos)
            except _NeedMore:
                return pos, 0
            pos = end
            if records:
                return pos, records
        return pos, 0

    def _header(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip_tags(buf, pos)  # the response header's tags (header v1), after the correlation id
        self._item = self._top
        return pos, 0

    def _top(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip(buf, pos, 4 + 2 + 4)  # throttle_time_ms, error_code, session_id
        count, pos = _uvarint(buf, pos)
        self._topics = max(count - 1, 0)
        self._next_topic()
        return pos, 0

    def _topic(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip(buf, pos, 16)  # topic_id
        count, pos = _uvarint(buf, pos)
        self._partitions = max(count - 1, 0)
        self._item = self._partition if self._partitions else self._topic_tags
        return pos, 0

    def _partition(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip(buf, pos, _PARTITION_FIXED)
        aborted, pos = _uvarint(buf, pos)
        for _ in range(aborted - 1):
            pos = _skip_tags(buf, _skip(buf, pos, 16))  # producer_id, first_offset, tags
        pos = _skip(buf, pos, 4)  # preferred_read_replica
        records, pos = _uvarint(buf, pos)
        self._item = self._partition_tags
        return pos, max(records - 1, 0)

    def _partition_tags(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip_tags(buf, pos)
        self._partitions -= 1
        self._item = self._partition if self._partitions else self._topic_tags
        return pos, 0

    def _topic_tags(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = _skip_tags(buf, pos)
        self._topics -= 1
        self._next_topic()
        return pos, 0

    def _next_topic(self) -> None:
        if self._topics:
            self._item = self._topic
        else:
            self.at_tail = True


# --- the tail: top-level tagged fields ----------------------------------------------------------------------

def _compact_string(raw: bytes) -> bytes:
    return write_uvarint(len(raw) + 1) + raw


def rewrite_tail(tail: bytes, addressing: BrokerAddressing) -> bytes:
    """The top-level tagged fields of a Fetch v16+ response with every node_endpoints address replaced by the
    proxy's, in exactly ``len(tail)`` bytes; TailDoesNotFit when that is impossible, MalformedRequest when the
    tail does not parse to its end."""
    buf = memoryview(tail)
    try:
        count, pos = _uvarint(buf, 0)
        fields = []
        for _ in range(count):
            tag, pos = _uvarint(buf, pos)
            size, pos = _uvarint(buf, pos)
            fields.append((tag, buf[pos:_skip(buf, pos, size)]))
            pos += size
    except _NeedMore:
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
        count, pos = _uvarint(data, 0)
        out = []
        for _ in range(count - 1):
            node = _I32.unpack_from(data, _skip(data, pos, 4) - 4)[0]
            length, pos = _uvarint(data, pos + 4)
            if length < 1:
                raise MalformedRequest("node_endpoints of a Fetch response have a null host")
            pos = _skip(data, pos, length - 1 + 4)  # host, port
            rest = pos
            length, pos = _uvarint(data, pos)  # rack (0: null)
            pos = _skip_tags(data, _skip(data, pos, max(length - 1, 0)))
            try:
                host, port = addressing.advertised(node)
            except NodeOutOfRange as exc:
                log.error("%s", exc)
                continue
            out.append(_I32.pack(node) + _compact_string(host.encode()) + _I32.pack(port) + bytes(data[rest:pos]))
    except (_NeedMore, struct.error):
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
