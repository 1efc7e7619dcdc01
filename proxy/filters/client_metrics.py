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
        self._produce: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
        self._fetch: dict[tuple[str, str], tuple[Any, Any]] = {}

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
            requests, bytes_in, messages_in = self._produce_children(self._topic(topic), client_id)
            requests.inc()
            bytes_in.inc(nbytes)
            messages_in.inc(records)

    def _count_fetch(self, client_id: str, topics: dict[str | uuid.UUID, tuple[int, int]]) -> None:
        for topic, (nbytes, _records) in topics.items():
            requests, bytes_out = self._fetch_children(self._topic(topic), client_id)
            requests.inc()
            bytes_out.inc(nbytes)

    def _produce_children(self, topic: str, client_id: str) -> tuple[Any, Any, Any]:
        """The labelled counters of one (topic, client id), looked up once: ``labels()`` costs microseconds."""
        key = (topic, client_id)
        children = self._produce.get(key)
        if children is None:
            children = self._produce[key] = (
                self.produce_requests.labels(topic, client_id),
                self.bytes_in.labels(topic, client_id),
                self.messages_in.labels(topic, client_id),
            )
        return children

    def _fetch_children(self, topic: str, client_id: str) -> tuple[Any, Any]:
        key = (topic, client_id)
        children = self._fetch.get(key)
        if children is None:
            children = self._fetch[key] = (
                self.fetch_requests.labels(topic, client_id),
                self.bytes_out.labels(topic, client_id),
            )
        return children


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


def _length(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's or bytes' length (-1 for null) and the position after it: int32, or compact uvarint - 1."""
    if flexible:
        value, pos = read_uvarint(buf, pos)
        return value - 1, pos
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _topic(buf: memoryview, pos: int, flexible: bool, by_id: bool) -> tuple[str | uuid.UUID, int]:
    """A topic id (16 bytes) or a topic name (int16 or compact length), and the position after it."""
    if by_id:
        return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16
    if flexible:
        size, pos = read_uvarint(buf, pos)
        size -= 1
    else:
        size, pos = _I16.unpack_from(buf, pos)[0], pos + 2
    end = pos + max(size, 0)
    if end > len(buf):
        raise MalformedRequest("topic name runs past the body")
    return bytes(buf[pos:end]).decode(), end


def _records(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int, int]:
    """(bytes, records, position after) of a nullable record set; records from the v2 batch headers."""
    size, pos = _length(buf, pos, flexible)
    if size <= 0:
        return 0, 0, pos
    end = pos + size
    if end > len(buf):
        raise MalformedRequest("record set runs past the body")
    return size, _record_count(buf, pos, end), end


def _record_count(buf: memoryview, pos: int, end: int) -> int:
    """Sum of the record counts of the v2 batches in ``buf[pos:end]`` (batchLength at 8, magic at 16,
    recordsCount at 57, Kafka's DefaultRecordBatch layout); older formats and a torn tail count 0."""
    count = 0
    while pos + 61 <= end and buf[pos + 16] == 2:
        batch_length, records = _I32.unpack_from(buf, pos + 8)[0], _I32.unpack_from(buf, pos + 57)[0]
        count += max(records, 0)
        pos += 12 + max(batch_length, 0)
    return count


def _add(totals: dict, topic: str | uuid.UUID, nbytes: int, records: int) -> None:
    old_bytes, old_records = totals.get(topic, (0, 0))
    totals[topic] = (old_bytes + nbytes, old_records + records)


def produce_topic_bytes(version: int, body: bytes | memoryview) -> dict[str | uuid.UUID, tuple[int, int]]:
    """(record bytes, records) per topic name (v3-12) or topic id (v13) of a Produce request body."""
    buf, flexible, by_id = memoryview(body), version >= 9, version >= 13
    if flexible:
        size, pos = read_uvarint(buf, 0)
        pos += max(size - 1, 0)  # transactional_id
    else:
        pos = 2 + max(_I16.unpack_from(buf, 0)[0], 0)
    pos += 6  # acks, timeout_ms
    totals: dict[str | uuid.UUID, tuple[int, int]] = {}
    topics, pos = _length(buf, pos, flexible)
    for _ in range(max(topics, 0)):
        topic, pos = _topic(buf, pos, flexible, by_id)
        partitions, pos = _length(buf, pos, flexible)
        for _ in range(max(partitions, 0)):
            nbytes, records, pos = _records(buf, pos + 4, flexible)  # after the partition index
            _add(totals, topic, nbytes, records)
            if flexible:
                pos = skip_tagged_fields(buf, pos)
        if flexible:
            pos = skip_tagged_fields(buf, pos)
    return totals


def fetch_topic_bytes(version: int, body: bytes | memoryview) -> dict[str | uuid.UUID, tuple[int, int]]:
    """(record bytes, records) per topic name (v4-12) or topic id (v13+) of a Fetch response body."""
    buf, flexible, by_id = memoryview(body), version >= 12, version >= 13
    pos = 4 + (6 if version >= 7 else 0)  # throttle_time_ms; error_code, session_id
    # partition_index, error_code, high_watermark, last_stable_offset, log_start_offset (v5+)
    partition_head = 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
    totals: dict[str | uuid.UUID, tuple[int, int]] = {}
    topics, pos = _length(buf, pos, flexible)
    for _ in range(max(topics, 0)):
        topic, pos = _topic(buf, pos, flexible, by_id)
        partitions, pos = _length(buf, pos, flexible)
        for _ in range(max(partitions, 0)):
            aborted, pos = _length(buf, pos + partition_head, flexible)
            for _ in range(max(aborted, 0)):  # producer_id, first_offset
                pos += 16
                if flexible:
                    pos = skip_tagged_fields(buf, pos)
            if version >= 11:
                pos += 4  # preferred_read_replica
            nbytes, records, pos = _records(buf, pos, flexible)
            _add(totals, topic, nbytes, records)
            if flexible:
                pos = skip_tagged_fields(buf, pos)
        if flexible:
            pos = skip_tagged_fields(buf, pos)
    return totals
