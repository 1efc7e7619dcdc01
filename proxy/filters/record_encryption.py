"""Record encryption at rest in the upstream (``proxy.filter.<name>.type=record-encryption``), as Kroxylicious's
RecordEncryption filter does it: the records of the topics whose client-visible name matches ``topics`` are
encrypted on Produce and decrypted on Fetch, so the upstream's log files and a client reading the upstream
directly hold only ciphertext.

    proxy.filter.enc.topics=enc-.*              # a regex over client-visible topic names (required)
    proxy.filter.enc.kms=file                   # the KMS plug-in (proxy/kms.py)
    proxy.filter.enc.kms.file.path=/var/lib/logway-proxy/keys   # its keyring (default <log.dirs>/record-encryption.keyring)
    proxy.filter.enc.kek.template=$(topicName)  # the KEK alias of a topic (its upstream name): a KEK per topic
    proxy.filter.enc.encrypt.fields=value       # value, plus headers and/or key
    proxy.filter.enc.dek.max.age.ms=3600000     # a topic's DEK is replaced after this long ...
    proxy.filter.enc.dek.max.records=5000000    # ... or this many records

Only what names a matching topic is decoded: a Produce whose bytes name none passes as bytes (``wants_request``),
and so do the Fetch responses of a connection that never fetched one (its fetch session's topics are kept from
its requests, since an incremental fetch names only what changed). Topic ids (Produce v13, Fetch v13+) are
matched through the names learned from Metadata responses; an id not yet learned is decided on the decoded
message: a Produce partition of it is refused with UNKNOWN_TOPIC_ID, a Fetch partition answered with it (both
make clients refresh their metadata, which teaches the filter, and retry).

Errors, per partition: a Produce batch that is not a whole v2 batch gets CORRUPT_MESSAGE, as from Kafka, and a
KMS that cannot make a DEK KAFKA_STORAGE_ERROR (retriable: clients retry it). A fetched record that cannot be
decrypted (its KEK lost from the KMS, damaged bytes) ends the partition's records there; when it is the first,
the partition gets CORRUPT_MESSAGE: the Java consumer raises "Encountered corrupt message when fetching offset
N for topic-partition T" from poll() and librdkafka delivers a consumer error at that offset, where an
unfamiliar code (Kroxylicious's RESOURCE_NOT_FOUND) reads as an IllegalStateException in the Java client.
Neither shows ciphertext as data; the proxy's log names the missing KEK.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from logway.proxy.deks import Deks
from logway.proxy.envelope import Fields, decrypt_record_set, encrypt_record_set
from logway.proxy.filter_config import FilterSettings, filter_type
from logway.proxy.filters.base import EVERY_VERSION, ClientInfo, Filter
from logway.proxy.filters.produce_refusals import Refusal, Refusals, topic_key
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.proxy.kms import KmsError, build_kms
from logway.proxy.produce_walk import produce_record_sets
from logway.server.config import ConfigError
from logway.wire.batch import CorruptBatch, UnsupportedMagic
from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.fetch_request import read_fetch_request

log = logging.getLogger(__name__)

PRODUCE, FETCH, METADATA = 0, 1, 3
TOPIC_NAME = "$(topicName)"
_MAX_FETCHED = 10_000  # topics one connection's fetches are remembered for; past it, every Fetch is decoded
_FIELDS = ("value", "headers", "key")

KEYS = {"topics": "", "kms": "file", "kek.template": TOPIC_NAME, "encrypt.fields": "value",
        "dek.max.age.ms": "3600000", "dek.max.records": "5000000"}


@dataclass
class Encryption:
    """What every connection's filter shares: the settings, the DEKs and the topic ids learned."""

    topics: Any  # re.Pattern over client-visible names
    kek_template: str
    fields: Fields
    deks: Deks
    topic_ids: TopicIdDirectory = field(default_factory=TopicIdDirectory)
    reported: set = field(default_factory=set)  # (topic, partition, error) already logged

    def alias(self, topic: str) -> str:
        return self.kek_template.replace(TOPIC_NAME, topic)

    def report(self, topic: str, partition: int, exc: Exception) -> None:
        """Log a partition that does not decrypt, once per topic, partition and reason."""
        key = (topic, partition, str(exc))
        if key not in self.reported and len(self.reported) < 10_000:
            self.reported.add(key)
            log.warning("record-encryption: %s-%d does not decrypt, answered CORRUPT_MESSAGE: %s: %s", topic,
                        partition, exc.__class__.__name__, exc)


class RecordEncryption(Filter):
    """One client connection's encryption (see the module doc)."""

    requests = {PRODUCE: EVERY_VERSION, FETCH: EVERY_VERSION}
    responses = {PRODUCE: EVERY_VERSION, FETCH: EVERY_VERSION, METADATA: EVERY_VERSION}
    inspects = True

    def __init__(self, shared: Encryption, client: ClientInfo) -> None:
        self.shared = shared
        self.client = client
        self._fetched: set[str | uuid.UUID] = set()  # what this connection's fetches named (client-visible)
        self._refusals: dict[int, Refusals] = {}  # by the id of the Produce request forwarded

    # --- which requests ---------------------------------------------------------------------------------

    def wants_request(self, api_key: int, api_version: int, frame: memoryview, body: int) -> bool:
        """A Produce naming a matching topic; a Fetch of a connection that fetched one (the client's names)."""
        if api_key == PRODUCE:
            try:
                topics = produce_record_sets(api_version, frame[body:])
            except MalformedRequest:
                return True  # decoded, and refused there
            return any(self._named(t, visible=True) for t in topics)
        request = read_fetch_request(api_version, frame, body)
        if request is None or len(self._fetched) > _MAX_FETCHED:
            return True
        for t in request.topics:
            self._fetched.add(t.key if isinstance(t.key, str) else uuid.UUID(bytes=t.key))
        return any(self._named(t, visible=True) for t in self._fetched)

    def _named(self, topic: str | uuid.UUID, visible: bool = False) -> bool:
        """Whether ``topic`` (a name, client-visible if ``visible`` else upstream, or an id) is encrypted; an id
        not learned yet counts as encrypted (decided on the decoded message)."""
        if isinstance(topic, uuid.UUID):
            name, visible = self.shared.topic_ids.name_of(topic), False
            if name is None:
                return True
        else:
            name = topic
        seen = name if visible else self.client.visible(name)
        return seen is not None and self.shared.topics.fullmatch(seen) is not None

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return api_key != PRODUCE or id(request) in self._refusals

    # --- Produce ----------------------------------------------------------------------------------------

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        if api_key != PRODUCE:
            return request
        refusals = Refusals(api_version)
        topics = tuple(self._encrypted_topic(api_version, t, refusals) for t in request.topic_data)
        request = refusals.apply(dataclasses.replace(request, topic_data=topics))
        if refusals.refused and request.acks != 0:
            self._refusals[id(request)] = refusals
        return request

    def _encrypted_topic(self, version: int, topic: Any, refusals: Refusals) -> Any:
        key = topic_key(version, topic)
        name = self.shared.topic_ids.name_of(key) if isinstance(key, uuid.UUID) else key
        if name is None:
            for p in topic.partition_data:
                refusals.refuse(key, p.index, Refusal(ErrorCode.unknown_topic_id, "topic id not known to the proxy "
                                                      "yet: refresh metadata"))
            return topic
        if not self._named(name):
            return topic
        alias = self.shared.alias(name)
        partitions = []
        for p in topic.partition_data:
            try:
                records = None if p.records is None else encrypt_record_set(
                    bytes(p.records), lambda n: self.shared.deks.for_encryption(alias, n), self.shared.fields)
            except UnsupportedMagic as exc:
                refusals.refuse(key, p.index, Refusal(ErrorCode.unsupported_for_message_format, str(exc)))
                continue
            except CorruptBatch as exc:
                refusals.refuse(key, p.index, Refusal(ErrorCode.corrupt_message, str(exc)))
                continue
            except KmsError as exc:
                log.warning("record-encryption: no DEK for %s: %s", name, exc)
                refusals.refuse(key, p.index, Refusal(ErrorCode.kafka_storage_error, "the proxy's KMS failed"))
                continue
            partitions.append(dataclasses.replace(p, records=records))
        return dataclasses.replace(topic, partition_data=tuple(partitions))

    # --- responses --------------------------------------------------------------------------------------

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA:
            self.shared.topic_ids.learn_metadata(response)
            return response
        if api_key == PRODUCE:
            refusals = self._refusals.pop(id(request), None)
            return response if refusals is None else refusals.finish(response)
        topics = tuple(self._decrypted_topic(api_version, t) for t in response.responses)
        return dataclasses.replace(response, responses=topics)

    def _decrypted_topic(self, version: int, topic: Any) -> Any:
        name = self.shared.topic_ids.name_of(topic.topic_id) if version >= 13 else topic.topic
        if name is not None and not self._named(name):
            return topic
        partitions = tuple(self._decrypted_partition(name, p) for p in topic.partitions)
        return dataclasses.replace(topic, partitions=partitions)

    def _decrypted_partition(self, name: str | None, p: Any) -> Any:
        if not p.records:
            return p
        if name is None:  # an id not learned yet: the client refreshes its metadata and fetches again
            return dataclasses.replace(p, error_code=ErrorCode.unknown_topic_id, records=b"")
        data, error = decrypt_record_set(bytes(p.records), self.shared.deks)
        if error is None:
            return dataclasses.replace(p, records=data)
        self.shared.report(name, p.partition_index, error)
        if data:  # the records before the one that does not decrypt: the next fetch starts at it
            return dataclasses.replace(p, records=data)
        return dataclasses.replace(p, error_code=ErrorCode.corrupt_message, records=b"")


def _fields(settings: FilterSettings) -> Fields:
    names = {n.strip() for n in settings.get("encrypt.fields").split(",") if n.strip()}
    if "value" not in names or not names <= set(_FIELDS):
        raise ConfigError(f"{settings.key('encrypt.fields')}={settings.values['encrypt.fields']!r}: value, "
                          "optionally with headers and key")
    return Fields(headers="headers" in names, key="key" in names)


@filter_type("record-encryption", KEYS, key_prefixes=("kms.",))
def build(settings: FilterSettings):
    """The filter's shared state (its KMS, its DEKs) made once; a RecordEncryption per connection."""
    if not settings.get("topics"):
        raise ConfigError(f"{settings.key('topics')}: required (a regex over the topic names clients see)")
    kms_name = settings.get("kms")
    try:
        kms = build_kms(kms_name, lambda k: settings.values.get(f"kms.{kms_name}.{k}", "").strip(),
                        settings.state_dir)
    except ConfigError as exc:
        raise ConfigError(f"proxy.filter.{settings.name}.{exc}") from None
    deks = Deks(kms, settings.int("dek.max.age.ms", 1) / 1000, settings.int("dek.max.records", 1))
    shared = Encryption(settings.pattern("topics"), settings.get("kek.template"), _fields(settings), deks)
    return lambda client: RecordEncryption(shared, client)
