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

Produce and Fetch stay undecoded: this filter observes every frame (``on_frame``), and the proxy gives it each
frame's size and, for Produce requests and Fetch responses, each topic's record bytes and records, counted by
walking the topic/partition structure around the record sets as the frame is read or streamed
(proxy/produce_walk.py, proxy/fetch_walk.py: O(partitions), no record is read or copied, record data stays
spliced). Topic ids (Produce v13, Fetch v13+) become names through the Metadata responses this filter sees
(its only decoded API), or a shared ``TopicIdDirectory``.
Label values are bounded: client ids are cut to 255 characters, and past ``max_label_values`` distinct
client ids or topics the rest count as "other", so hostile clients cannot grow the registry without limit.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.index import api_key_map
from prometheus_client import CollectorRegistry, Counter

from logway.proxy.filters.base import EVERY_VERSION, REQUEST, RESPONSE, ClientInfo, Filter, Frame
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.proxy.walk import RecordSets

PRODUCE, FETCH, METADATA = 0, 1, 3
OTHER = "other"


def request_name(api_key: int) -> str:
    """Kafka's name for an API, as in RequestMetrics' ``request`` tag: ``list_offsets`` -> ``ListOffsets``."""
    name = api_key_map.get(api_key)
    return "".join(part.capitalize() for part in name.split("_")) if name else str(api_key)


class ClientMetrics(Filter):
    """The counters, registered once in ``registry``; one instance may serve every client connection."""

    responses = {METADATA: EVERY_VERSION}
    observes = True

    def __init__(
        self,
        registry: CollectorRegistry,
        topic_ids: TopicIdDirectory | None = None,
        max_label_values: int = 1000,
    ) -> None:
        self.topic_ids = topic_ids if topic_ids is not None else TopicIdDirectory()
        self._clients = _Bounded(max_label_values)
        self._topics = _Bounded(max_label_values)
        self._children: dict[Any, tuple[Any, ...]] = {}  # labelled counters by what they count

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.requests_per_api = counter(
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

    # --- the filter: Metadata responses teach topic ids; every frame is counted ---------------------------

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA:
            for topic in response.topics:
                topic_id = getattr(topic, "topic_id", None)
                if topic.name and topic_id is not None:
                    self.topic_ids.learn(topic_id, topic.name)
        return response

    def on_frame(self, client: ClientInfo, frame: Frame) -> None:
        """Count one frame between the client and the upstream: its size as exchanged with the upstream (so
        names are the upstream's) and, for a Produce request or a Fetch response whose bytes walked, its
        record bytes per topic (bad bytes lose only those)."""
        client_id = self._clients.label((client.client_id or "")[:255])
        key, version = frame.api_key, frame.api_version
        if frame.direction == REQUEST:
            requests, incoming = self._children.get((REQUEST, key, version, client_id)) or self._labelled(
                (REQUEST, key, version, client_id), (self.requests_per_api, request_name(key), str(version), client_id),
                (self.incoming, client_id))
            requests.inc()
            incoming.inc(frame.size)
        else:
            key_out = (RESPONSE, client_id)
            (outgoing,) = self._children.get(key_out) or self._labelled(key_out, (self.outgoing, client_id))
            outgoing.inc(frame.size)
        if frame.record_sets is None:
            return
        if key == PRODUCE and frame.direction == REQUEST:
            self._count(PRODUCE, client_id, frame.record_sets)
        elif key == FETCH and frame.direction != REQUEST:
            self._count(FETCH, client_id, frame.record_sets)

    def _count(self, api_key: int, client_id: str, record_sets: RecordSets) -> None:
        """Per topic: one request, its record bytes and (Produce) records."""
        for topic, (nbytes, records) in record_sets.items():
            requests, record_bytes, *messages = self._topic_counters(api_key, self._topic(topic), client_id)
            requests.inc()
            record_bytes.inc(nbytes)
            for counter in messages:
                counter.inc(records)

    def _topic(self, topic: str | uuid.UUID) -> str:
        if isinstance(topic, uuid.UUID):
            topic = self.topic_ids.name_of(topic) or str(topic)
        return self._topics.label(topic)

    def _topic_counters(self, api_key: int, topic: str, client_id: str) -> tuple[Any, ...]:
        """Produce: requests, bytes in, messages in; Fetch: requests, bytes out; of one (topic, client id)."""
        key = (api_key, topic, client_id)
        children = self._children.get(key)
        if children is None:
            counters = (self.produce_requests, self.bytes_in, self.messages_in) if api_key == PRODUCE \
                else (self.fetch_requests, self.bytes_out)
            children = self._labelled(key, *((c, topic, client_id) for c in counters))
        return children

    def _labelled(self, key: Any, *wanted: tuple[Any, ...]) -> tuple[Any, ...]:
        """The children of ``wanted`` (each a counter and its label values), kept under ``key``: ``labels()``
        costs microseconds, a frame is counted in less. (Bounded: label values are.)"""
        children = self._children[key] = tuple(counter.labels(*values) for counter, *values in wanted)
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
