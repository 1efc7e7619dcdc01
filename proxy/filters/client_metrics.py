"""Per-client request counts and per-topic byte counts of proxied traffic, as Prometheus counters.

Names follow Kafka's JMX metrics as the Prometheus JMX exporter's Kafka rules map them, with a
``client_id`` label added (Kafka itself only splits by client id in its quota metrics):

- ``kafka_network_requestmetrics_requests_total{request,version,client_id}``: RequestMetrics RequestsPerSec.
- ``kafka_server_socket_server_metrics_incoming_byte_total{client_id}`` / ``..._outgoing_byte_total``:
  whole frames from and to the client (socket-server-metrics incoming-byte-total / outgoing-byte-total).
- ``kafka_server_brokertopicmetrics_bytesin_total{topic,client_id}``: record bytes produced (BytesInPerSec);
  ``..._messagesin_total`` (MessagesInPerSec, from the v2 batch headers' record counts) and
  ``..._totalproducerequests_total``.
- ``kafka_server_brokertopicmetrics_bytesout_total{topic,client_id}``: record bytes fetched (BytesOutPerSec);
  ``..._totalfetchrequests_total``.

Produce and Fetch stay undecoded: the proxy core calls the optional ``on_frame`` hook with each frame's
size and body bytes, and this module walks only the topic/partition structure around the record sets
(O(partitions), no record is read or copied). Topic ids (Produce v13, Fetch v13+) become names through the
Metadata responses this filter sees (its only decoded API), or a shared ``TopicIdDirectory``.
Label values are bounded: client ids are cut to 255 characters, and past ``max_label_values`` distinct
client ids or topics the rest count as "other", so hostile clients cannot grow the registry without limit.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter

from logway.proxy.filters.base import ClientInfo
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import read_uvarint, skip_tagged_fields

PRODUCE, FETCH, METADATA = 0, 1, 3
REQUEST, RESPONSE = "request", "response"
OTHER = "other"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def request_name(api_key: int) -> str:
    """Kafka's name for an API, as in RequestMetrics' ``request`` tag: ``list_offsets`` -> ``ListOffsets``."""
    name = api_key_map.get(api_key)
    return "".join(part.capitalize() for part in name.split("_")) if name else str(api_key)


class ClientMetrics:
    """The counters, registered once in ``registry``; one instance may serve every client connection."""

    api_keys = frozenset({METADATA})

    def __init__(
        self,
        registry: CollectorRegistry,
        topic_ids: TopicIdDirectory | None = None,
        max_label_values: int = 1000,
    ) -> None:
        self.topic_ids = topic_ids if topic_ids is not None else TopicIdDirectory()
        self._clients = _Bounded(max_label_values)
        self._topics = _Bounded(max_label_values)

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.requests = counter(
            "kafka_network_requestmetrics_requests", "Requests from clients", ("request", "version", "client_id")
        )
        self.incoming = counter(
            "kafka_server_socket_server_metrics_incoming_byte", "Bytes of frames from clients", ("client_id",)
        )
        self.outgoing = counter(
            "kafka_server_socket_server_metrics_outgoing_byte", "Bytes of frames to clients", ("client_id",)
        )
        topic = ("topic", "client_id")
        self.bytes_in = counter("kafka_server_brokertopicmetrics_bytesin", "Record bytes produced", topic)
        self.messages_in = counter("kafka_server_brokertopicmetrics_messagesin", "Records produced", topic)
        self.produce_requests = counter(
            "kafka_server_brokertopicmetrics_totalproducerequests", "Produce requests per topic", topic
        )
        self.bytes_out = counter("kafka_server_brokertopicmetrics_bytesout", "Record bytes fetched", topic)
        self.fetch_requests = counter(
            "kafka_server_brokertopicmetrics_totalfetchrequests", "Fetch requests per topic", topic
        )

    # --- the Filter protocol: Metadata responses teach topic ids ----------------------------------

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        return request

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA:
            for topic in response.topics:
                topic_id = getattr(topic, "topic_id", None)
                if topic.name and topic_id is not None:
                    self.topic_ids.learn(topic_id, topic.name)
        return response

    # --- the optional hook: every frame, undecoded ------------------------------------------------

    def on_frame(
        self,
        client: ClientInfo,
        api_key: int,
        api_version: int,
        direction: str,
        nbytes: int,
        body: bytes | memoryview | None = None,
    ) -> None:
        """Count one frame between the client and the upstream.

        ``direction`` is "request" (client to upstream) or "response"; ``nbytes`` the whole frame's size;
        ``body`` the bytes after the header, given for Produce requests and Fetch responses (as exchanged
        with the upstream, so names are the upstream's), else None. Bad body bytes only lose the per-topic
        counts of that frame.
        """
        client_id = self._clients.label((client.client_id or "")[:255])
        if direction == REQUEST:
            self.requests.labels(request_name(api_key), str(api_version), client_id).inc()
            self.incoming.labels(client_id).inc(nbytes)
        else:
            self.outgoing.labels(client_id).inc(nbytes)
        if body is None:
            return
        try:
            if api_key == PRODUCE and direction == REQUEST:
                self._count_produce(client_id, produce_topic_bytes(api_version, body))
            elif api_key == FETCH and direction == RESPONSE:
                self._count_fetch(client_id, fetch_topic_bytes(api_version, body))
        except (MalformedRequest, struct.error, IndexError, UnicodeDecodeError):
            pass  # the upstream answers bad bytes; metrics never break the proxy

    def _topic(self, topic: str | uuid.UUID) -> str:
        if isinstance(topic, uuid.UUID):
            topic = self.topic_ids.name_of(topic) or str(topic)
        return self._topics.label(topic)

    def _count_produce(self, client_id: str, topics: dict[str | uuid.UUID, tuple[int, int]]) -> None:
        for topic, (nbytes, records) in topics.items():
            labels = (self._topic(topic), client_id)
            self.produce_requests.labels(*labels).inc()
            self.bytes_in.labels(*labels).inc(nbytes)
            self.messages_in.labels(*labels).inc(records)

    def _count_fetch(self, client_id: str, topics: dict[str | uuid.UUID, tuple[int, int]]) -> None:
        for topic, (nbytes, _records) in topics.items():
            labels = (self._topic(topic), client_id)
            self.fetch_requests.labels(*labels).inc()
            self.bytes_out.labels(*labels).inc(nbytes)


class _Bounded:
    """Label values as given until ``limit`` distinct ones are seen, then "other" for new ones."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def label(self, value: str) -> str:
        if value in self.seen:
            return value
        if len(self.seen) >= self.limit:
            return OTHER
        self.seen.add(value)
        return value


# --- walking Produce requests and Fetch responses around their record sets -------------------------


class _Reader:
    """Kafka's primitive types at a position, classic or compact (flexible versions)."""

    def __init__(self, buf: bytes | memoryview, flexible: bool) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.flexible = flexible

    def skip(self, n: int) -> None:
        self.pos += n
        if self.pos > len(self.buf):
            raise MalformedRequest("body ends early")

    def i16(self) -> int:
        (value,) = _I16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return value

    def i32(self) -> int:
        (value,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def length(self) -> int:
        """An array's, string's or bytes' length; -1 for null."""
        if self.flexible:
            value, self.pos = read_uvarint(self.buf, self.pos)
            return value - 1
        return self.i32()

    def string(self) -> str | None:
        size = self.length() if self.flexible else self.i16()
        if size < 0:
            return None
        start = self.pos
        self.skip(size)
        return bytes(self.buf[start : self.pos]).decode()

    def topic(self, by_id: bool) -> str | uuid.UUID:
        if by_id:
            start = self.pos
            self.skip(16)
            return uuid.UUID(bytes=bytes(self.buf[start : self.pos]))
        return self.string() or ""

    def records(self) -> tuple[int, int]:
        """(bytes, records) of a nullable record set; records counted from the v2 batch headers."""
        size = self.length()
        if size <= 0:
            return 0, 0
        start = self.pos
        self.skip(size)
        return size, _record_count(self.buf[start : self.pos])

    def tags(self) -> None:
        if self.flexible:
            self.pos = skip_tagged_fields(self.buf, self.pos)


def _record_count(records: memoryview) -> int:
    """Sum of the record counts of the v2 batches in a record set (batchLength at 8, magic at 16,
    recordsCount at 57, Kafka's DefaultRecordBatch layout); older formats and a torn tail count 0."""
    count = pos = 0
    while pos + 61 <= len(records) and records[pos + 16] == 2:
        (batch_length,) = _I32.unpack_from(records, pos + 8)
        (records_in_batch,) = _I32.unpack_from(records, pos + 57)
        count += max(records_in_batch, 0)
        pos += 12 + max(batch_length, 0)
    return count


def _add(totals: dict, topic: str | uuid.UUID, sizes: tuple[int, int]) -> None:
    nbytes, records = totals.get(topic, (0, 0))
    totals[topic] = (nbytes + sizes[0], records + sizes[1])


def produce_topic_bytes(version: int, body: bytes | memoryview) -> dict[str | uuid.UUID, tuple[int, int]]:
    """(record bytes, records) per topic name (v3-12) or topic id (v13) of a Produce request body."""
    r = _Reader(body, flexible=version >= 9)
    r.string()  # transactional_id
    r.skip(6)  # acks, timeout_ms
    totals: dict[str | uuid.UUID, tuple[int, int]] = {}
    for _ in range(max(r.length(), 0)):
        topic = r.topic(by_id=version >= 13)
        for _ in range(max(r.length(), 0)):
            r.skip(4)  # partition index
            _add(totals, topic, r.records())
            r.tags()
        r.tags()
    return totals


def fetch_topic_bytes(version: int, body: bytes | memoryview) -> dict[str | uuid.UUID, tuple[int, int]]:
    """(record bytes, records) per topic name (v4-12) or topic id (v13+) of a Fetch response body."""
    r = _Reader(body, flexible=version >= 12)
    r.skip(4 + (6 if version >= 7 else 0))  # throttle_time_ms; error_code, session_id
    totals: dict[str | uuid.UUID, tuple[int, int]] = {}
    for _ in range(max(r.length(), 0)):
        topic = r.topic(by_id=version >= 13)
        for _ in range(max(r.length(), 0)):
            # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset (v5+)
            r.skip(4 + 2 + 8 + 8 + (8 if version >= 5 else 0))
            for _ in range(max(r.length(), 0)):  # aborted_transactions: producer_id, first_offset
                r.skip(16)
                r.tags()
            if version >= 11:
                r.skip(4)  # preferred_read_replica
            _add(totals, topic, r.records())
            r.tags()
        r.tags()
    return totals
