"""A Produce request body read front to back without decoding it (sans-IO): each topic's record bytes and,
from the v2 batch headers, its records, while the request is streamed to the upstream (its record data
spliced, its fields and batch headers read here) or from a request read whole.

Field layout (Kafka's ProduceRequest.json, v3-v13): transactional_id, acks, timeout_ms, topic_data [name
(v3-12) or topic_id (v13), partition_data [index, records, tags], tags], tags; flexible (compact lengths, tags)
from v9.
"""

from __future__ import annotations

from logway.proxy.walk import RecordSets, Walk, length, skip, skip_string


class ProduceWalk(Walk):
    """Where a Produce request body's fields, batch headers and record data lie; the first bytes it is given
    are the body's (after the request header)."""

    def __init__(self, version: int) -> None:
        super().__init__(self._top, flexible=version >= 9, by_id=version >= 13, count_records=True)

    def _top(self, buf: memoryview, pos: int) -> tuple[int, int]:
        pos = skip(buf, skip_string(buf, pos, self._flexible), 2 + 4)  # transactional_id; acks, timeout_ms
        return self._topic_array(buf, pos), 0

    def _partition_head(self, buf: memoryview, pos: int) -> tuple[int, int]:
        return length(buf, skip(buf, pos, 4), self._flexible)  # after the partition index


def produce_record_sets(version: int, body: bytes | memoryview) -> RecordSets:
    """(record bytes, records) per topic name (v3-12) or topic id (v13) of a whole Produce request body;
    MalformedRequest when it does not walk."""
    return ProduceWalk(version).walk_whole(body)
