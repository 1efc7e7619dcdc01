"""Frames read front to back without decoding them (sans-IO): the parts every walk shares.

A walk is fed a frame's bytes as they arrive and says, item by item, how many bytes are fields (read here,
forwarded as they are) and how many after them are opaque (record data, forwarded unseen: spliced socket to
socket when the frame is streamed, proxy/streaming.py). Walking the Produce request (proxy/produce_walk.py)
and the Fetch response (proxy/fetch_walk.py) is how the proxy streams them and still knows each topic's record
bytes (the per-client metrics) and where a Fetch response's top-level tagged fields start (address rewriting).
Every length comes from the peer: a walk checks nothing against the frame's end (the caller does, with the
frame's size), but never reads past the bytes it is given.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from logway.wire.errors import MalformedRequest
from logway.wire.protocol import read_uvarint

RecordSets = dict[str | uuid.UUID, tuple[int, int]]
"""(record bytes, records) per topic name or topic id of one Produce request or Fetch response."""

Item = Callable[[memoryview, int], tuple[int, int]]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# Kafka's DefaultRecordBatch: baseOffset int64, batchLength int32 (the bytes after it), ..., magic at 16,
# recordsCount at 57; a v2 batch header takes 61 bytes, so its batchLength is at least 49.
BATCH_HEADER = 61
_BATCH_LENGTH_AT, _MAGIC_AT, _RECORDS_AT = 8, 16, 57
_MIN_BATCH_LENGTH = BATCH_HEADER - 12


class NeedMore(Exception):
    """The buffer ends inside the item being parsed."""


def uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """``read_uvarint``, but NeedMore when ``buf`` ends inside the varint."""
    try:
        return read_uvarint(buf, pos)
    except MalformedRequest:
        if len(buf) - pos < 5 and all(b & 0x80 for b in buf[pos:]):
            raise NeedMore from None
        raise  # longer than 5 bytes


def skip(buf: memoryview, pos: int, n: int) -> int:
    if pos + n > len(buf):
        raise NeedMore
    return pos + n


def skip_tags(buf: memoryview, pos: int) -> int:
    if pos < len(buf) and buf[pos] == 0:  # none: the common case
        return pos + 1
    count, pos = uvarint(buf, pos)
    for _ in range(count):
        _, pos = uvarint(buf, pos)
        size, pos = uvarint(buf, pos)
        pos = skip(buf, pos, size)
    return pos


def int32(buf: memoryview, pos: int) -> tuple[int, int]:
    end = skip(buf, pos, 4)
    return _I32.unpack_from(buf, pos)[0], end


def length(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's or bytes' length (-1 for null) and the position after it: int32, or compact uvarint - 1."""
    if flexible:
        if pos < len(buf) and buf[pos] < 0x80:  # one byte: the common case
            return buf[pos] - 1, pos + 1
        value, pos = uvarint(buf, pos)
        return value - 1, pos
    return int32(buf, pos)


def _string_bounds(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """Where a nullable string's bytes start and end: int16 length, or compact uvarint length + 1."""
    if flexible:
        size, first = uvarint(buf, pos)
        size -= 1
    else:
        first = skip(buf, pos, 2)
        size = _I16.unpack_from(buf, pos)[0]
    return first, skip(buf, first, max(size, 0))


def skip_string(buf: memoryview, pos: int, flexible: bool) -> int:
    """The position after a nullable string."""
    return _string_bounds(buf, pos, flexible)[1]


def topic(buf: memoryview, pos: int, flexible: bool, by_id: bool) -> tuple[str | uuid.UUID, int]:
    """A topic id (16 bytes) or a topic name, and the position after it."""
    if by_id:
        end = skip(buf, pos, 16)
        return uuid.UUID(bytes=bytes(buf[pos:end])), end
    first, end = _string_bounds(buf, pos, flexible)
    try:
        return bytes(buf[first:end]).decode(), end
    except UnicodeDecodeError:
        raise MalformedRequest("topic name is not UTF-8") from None


def _batch_header(buf: memoryview, pos: int, left: int) -> tuple[int, int] | None:
    """(records, bytes) of the v2 batch whose header is at ``pos`` in a record set with ``left`` bytes from
    there; None when no batch is counted from there on: too short for a header, not v2, or an invalid header
    (as Kafka's DefaultRecordBatch, a batchLength under 49). The header must be at hand (NeedMore if not)."""
    if left < BATCH_HEADER:
        return None
    if pos + BATCH_HEADER > len(buf):
        raise NeedMore
    batch_length = _I32.unpack_from(buf, pos + _BATCH_LENGTH_AT)[0]
    if buf[pos + _MAGIC_AT] != 2 or batch_length < _MIN_BATCH_LENGTH:
        return None
    return max(_I32.unpack_from(buf, pos + _RECORDS_AT)[0], 0), min(12 + batch_length, left)


def records_in(buf: memoryview, pos: int, end: int) -> int:
    """The records of the v2 batches of the record set ``buf[pos:end]`` (all at hand)."""
    count = 0
    while end - pos >= BATCH_HEADER:
        batch = _batch_header(buf, pos, end - pos)
        if batch is None:
            break
        count += batch[0]
        pos += batch[1]
    return count


class Walk:
    """The item machine: ``step`` parses whole items at the start of the bytes it is given. A subclass sets
    ``_item`` to its first item and reads a partition's fields up to its record set (``_partition_head``);
    each item returns (the position after it, opaque bytes that follow it) and sets the next one. Both walked
    frames hold an array of topics, each an array of partitions (with tagged fields after each when
    flexible); after the last topic ``at_tail`` is set (what remains of the frame is its tail). Partitions
    whose record set is at hand are walked over in one loop; one whose record set runs past the bytes at hand
    is walked batch by batch when ``count_records`` (their v2 headers are fields, the rest opaque), else
    passed over whole. Either way ``record_sets`` totals them per topic."""

    def __init__(self, first: Item, flexible: bool, by_id: bool, count_records: bool) -> None:
        self._item = first
        self._flexible = flexible
        self._by_id = by_id
        self._count_records = count_records
        self.at_tail = False
        self.last_run = False  # the opaque run just returned ends the frame's last record set
        self._totals: dict[str | uuid.UUID, list[int]] = {}  # [record bytes, records] per topic
        self._topic_totals = [0, 0]  # the current topic's
        self._topics = self._partitions = 0
        self._set_left = 0  # bytes of the record set being walked batch by batch not yet walked

    @property
    def record_sets(self) -> RecordSets:
        """(record bytes, records) per topic name or id, of the record sets walked so far."""
        return {topic: (nbytes, records) for topic, (nbytes, records) in self._totals.items()}

    def step(self, buf: memoryview) -> tuple[int, int]:
        """Walk the whole items at the start of ``buf`` (the frame's next unforwarded bytes), and the record data
        among them that ``buf`` holds: returns (walked bytes, opaque bytes): the first to forward as they are,
        then that many bytes of record data that run past the end of ``buf``, to forward unseen. (n, 0) before
        the tail: ``buf`` ends inside an item (give it more). At the tail, ``at_tail``."""
        pos = 0
        while not self.at_tail:
            try:
                end, opaque = self._item(buf, pos)
            except NeedMore:
                return pos, 0
            if end + opaque > len(buf):
                return end, opaque
            pos = end + opaque
        return pos, 0

    def walk_whole(self, body: bytes | memoryview) -> RecordSets:
        """``record_sets`` of a whole body (fields and record data all in ``body``); MalformedRequest when it
        ends inside its fields or its record data runs past it."""
        _, opaque = self.step(memoryview(body))
        if opaque:
            raise MalformedRequest("record data runs past the body")
        if not self.at_tail:
            raise MalformedRequest("the body ends inside its fields")
        return self.record_sets

    def _partition_head(self, buf: memoryview, pos: int) -> tuple[int, int]:
        """A partition's fields up to its record set: the record set's size (-1: null) and where it starts."""
        raise NotImplementedError

    # --- the arrays of topics and partitions --------------------------------------------------------------

    def _topic_array(self, buf: memoryview, pos: int) -> int:
        """The topics' count at ``pos``; the position after it."""
        count, pos = length(buf, pos, self._flexible)
        self._topics = max(count, 0)
        self._next_topic()
        return pos

    def _topic_head(self, buf: memoryview, pos: int) -> tuple[int, int]:
        name, pos = topic(buf, pos, self._flexible, self._by_id)
        count, pos = length(buf, pos, self._flexible)
        self._topic_totals = self._totals.setdefault(name, [0, 0])
        self._partitions = max(count, 0)
        self._next_partition()
        return pos, 0

    def _partition(self, buf: memoryview, pos: int) -> tuple[int, int]:
        """The partitions whose record set (and tags) are at hand, in one loop (as many as there are: a walk
        costs per item); then one whose record set runs past the bytes at hand, batch by batch."""
        walked, flexible, totals = False, self._flexible, self._topic_totals
        while True:
            try:
                size, data = self._partition_head(buf, pos)
                end = data + max(size, 0)
                after = -1 if end > len(buf) else skip_tags(buf, end) if flexible else end
            except NeedMore:
                if walked:
                    return pos, 0
                raise
            if after < 0:  # its record data runs past the bytes at hand
                return self._record_set(buf, data, size)
            if size > 0:
                totals[0] += size
                if self._count_records:
                    totals[1] += records_in(buf, data, end)
            pos, walked = after, True
            self._partitions -= 1
            if not self._partitions:
                self._item = self._topic_end
                return pos, 0

    def _partition_end(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = self._tags(buf, pos)  # (first: it may need more bytes, and the item is then parsed again)
        self._partitions -= 1
        self._next_partition()
        return pos, 0

    def _topic_end(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = self._tags(buf, pos)
        self._topics -= 1
        self._next_topic()
        return pos, 0

    def _tags(self, buf: memoryview, pos: int) -> int:
        return skip_tags(buf, pos) if self._flexible else pos

    def _next_partition(self) -> None:
        self._item = self._partition if self._partitions else self._topic_end

    def _next_topic(self) -> None:
        if self._topics:
            self._item = self._topic_head
        else:
            self.at_tail = True

    # --- a record set that runs past the bytes at hand ----------------------------------------------------

    def _record_set(self, buf: memoryview, pos: int, size: int) -> tuple[int, int]:
        """A partition's record set of ``size`` bytes starts at ``pos`` and runs past ``buf``: counted; all of
        it opaque, or (``count_records``) its batches walked, the first at once if its header is at hand."""
        self._topic_totals[0] += size
        self._item = self._partition_end
        if not self._count_records:
            self.last_run = self._last_partition()
            return pos, size
        self._set_left, self._item = size, self._batch
        if pos + BATCH_HEADER <= len(buf):
            return self._batch(buf, pos)
        return pos, 0

    def _batch(self, buf: memoryview, pos: int) -> tuple[int, int]:
        """One batch of the record set: a v2 header's records counted (fields), the rest of the batch opaque;
        the rest of the set opaque at once when no batch is counted from here on."""
        left = self._set_left
        batch = _batch_header(buf, pos, left)
        if batch is None:
            self._set_left, self._item = 0, self._partition_end
            self.last_run = self._last_partition()
            return pos, left
        records, size = batch
        self._topic_totals[1] += records
        self._set_left = left - size
        if not self._set_left:
            self._item = self._partition_end
            self.last_run = self._last_partition()
        return pos + BATCH_HEADER, size - BATCH_HEADER

    def _last_partition(self) -> bool:
        """Whether the partition being walked is the frame's last: after its record set come only tags."""
        return self._partitions == 1 and self._topics == 1
