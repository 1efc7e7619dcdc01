"""Record validation (``proxy.filter.<name>.type=record-validation``): a Produce to a topic whose client-visible
name matches ``topics`` has each record's value checked, and a partition with an invalid record is not
forwarded: it gets INVALID_RECORD with the index of each bad record in ``record_errors`` (Produce v8+) and a
message, as Kafka's LogValidator answers a record it refuses (the Java producer fails those records with
InvalidRecordException, librdkafka with "Broker: Invalid record in record batch"); the request's other
partitions go through. Kroxylicious's record-validation filter, Conduktor's schema payload validation.

    proxy.filter.v.topics=orders-.*            # a regex over client-visible topic names (required)
    proxy.filter.v.check=json                  # json | json-schema | avro
    proxy.filter.v.schema.file=/etc/orders.json        # json-schema: the JSON Schema document
    proxy.filter.v.schema.registry.url=http://127.0.0.1:8081   # avro: Confluent wire format, schemas by id
    proxy.filter.v.schema.registry.timeout.ms=5000
    proxy.filter.v.allow.nulls=true            # a null value (a tombstone) passes

``json``: the value is one JSON text, UTF-8 (RFC 8259: no NaN or Infinity). ``json-schema``: that, and valid
under the schema (its own $schema draft, Draft 2020-12 if none). ``avro``: magic byte 0, a 4-byte schema id the
registry knows as an Avro schema, then a datum of that schema, to its last byte. A registry that does not answer
gets REQUEST_TIMED_OUT for the partitions that needed it (retriable: the producer tries again). With record
encryption in the same chain, list validation first: it must see the plaintext.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastavro
import jsonschema

from logway.proxy.filter_config import FilterSettings, filter_type
from logway.proxy.filters.base import EVERY_VERSION, ClientInfo, Filter
from logway.proxy.filters.produce_refusals import Refusal, Refusals, topic_key
from logway.proxy.filters.tenant import TopicIdDirectory
from logway.proxy.produce_walk import produce_record_sets
from logway.proxy.schema_registry import RegistryUnavailable, SchemaRegistry, UnknownSchema
from logway.server.config import ConfigError
from logway.wire.batch import CorruptBatch, iter_headers
from logway.wire.errors import ErrorCode, MalformedRequest
from logway.wire.records import decode_batch

PRODUCE, METADATA = 0, 3
CHECKS = ("json", "json-schema", "avro")
KEYS = {"topics": "", "check": "json", "schema.file": "", "schema.registry.url": "",
        "schema.registry.timeout.ms": "5000", "allow.nulls": "true"}
_MAX_ERRORS = 100  # record errors listed per partition (the first ones)
_CONFLUENT = struct.Struct(">bI")  # magic byte 0, schema id


class Invalid(Exception):  # noqa: N818
    """A record that fails the check; the message says why."""


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(value: bytes) -> Any:
    try:
        return json.loads(value.decode("utf-8"), parse_constant=_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Invalid(f"not valid JSON: {exc}") from None


@dataclass
class Validation:
    """What every connection's filter shares: the settings, the check and (avro) the registry's schemas."""

    topics: Any  # re.Pattern over client-visible names
    check: Callable[[bytes], None]  # raises Invalid
    allow_nulls: bool
    registry: SchemaRegistry | None = None
    topic_ids: TopicIdDirectory = field(default_factory=TopicIdDirectory)  # Produce v13 names topics by id

    def schema_ids(self, values: list[bytes | None]) -> set[int]:
        """The schema ids the records name (avro), for fetching before the check."""
        if self.registry is None:
            return set()
        return {_CONFLUENT.unpack_from(v)[1] for v in values if v is not None and len(v) >= 5 and v[0] == 0}


def _schema_check(path: str, key: str) -> Callable[[bytes], None]:
    try:
        with open(path, "rb") as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except (OSError, ValueError, jsonschema.SchemaError) as exc:
        raise ConfigError(f"{key}={path!r}: not a JSON Schema: {exc}") from None
    validator = cls(schema)

    def check(value: bytes) -> None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(_json(value)))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise Invalid(f"does not match the schema{' at /' + where if where else ''}: {error.message}")
    return check


def _parse_avro(document: dict) -> Any:
    if document.get("schemaType", "AVRO") != "AVRO":
        raise ValueError("not an Avro schema")
    return fastavro.parse_schema(json.loads(document["schema"]))


def _avro_check(registry: SchemaRegistry) -> Callable[[bytes], None]:
    def check(value: bytes) -> None:
        if len(value) < 5 or value[0] != 0:
            raise Invalid("not in the Confluent wire format (magic byte 0 and a schema id)")
        schema_id = _CONFLUENT.unpack_from(value)[1]
        try:
            schema = registry.schema(schema_id)
        except UnknownSchema as exc:
            raise Invalid(str(exc)) from None
        data = io.BytesIO(value[5:])
        try:
            fastavro.schemaless_reader(data, schema)
        except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds on bad bytes
            raise Invalid(f"not a datum of Avro schema {schema_id}: {exc.__class__.__name__}: {exc}") from None
        if data.tell() != len(value) - 5:
            raise Invalid(f"{len(value) - 5 - data.tell()} bytes after a datum of Avro schema {schema_id}")
    return check


class RecordValidation(Filter):
    """One client connection's validation (see the module doc)."""

    requests = {PRODUCE: EVERY_VERSION}
    responses = {PRODUCE: EVERY_VERSION, METADATA: EVERY_VERSION}
    inspects = prepares = True

    def __init__(self, shared: Validation, client: ClientInfo) -> None:
        self.shared = shared
        self.client = client
        self._prepared: dict[int, Refusals] = {}  # by the id of the request prepared
        self._refusals: dict[int, Refusals] = {}  # by the id of the request forwarded

    def wants_request(self, api_key: int, api_version: int, frame: memoryview, body: int) -> bool:
        try:
            topics = produce_record_sets(api_version, frame[body:])
        except MalformedRequest:
            return True
        return any(not isinstance(t, str) or self.shared.topics.fullmatch(t) for t in topics)

    def _validated(self, name: str | None) -> bool:
        seen = None if name is None else self.client.visible(name)
        return seen is not None and self.shared.topics.fullmatch(seen) is not None

    async def prepare(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> None:
        """Every record of the matching partitions checked (their schemas fetched first)."""
        refusals, partitions = Refusals(api_version), []
        for topic in request.topic_data:
            key = topic_key(api_version, topic)
            name = self.shared.topic_ids.name_of(key) if isinstance(key, uuid.UUID) else key
            if name is None:  # an id not learned yet: the client refreshes its metadata and retries
                for p in topic.partition_data:
                    refusals.refuse(key, p.index, Refusal(ErrorCode.unknown_topic_id, "topic id not known to the "
                                                          "proxy yet: refresh metadata"))
            elif self._validated(name):
                partitions += [(key, p) for p in topic.partition_data if p.records]
        decoded = []
        for key, p in partitions:
            try:
                decoded.append((key, p.index, [r.value for b in _batches(bytes(p.records)) for r in b.records]))
            except CorruptBatch as exc:
                refusals.refuse(key, p.index, Refusal(ErrorCode.corrupt_message, str(exc)))
        unavailable = None
        try:
            if self.shared.registry is not None:
                await self.shared.registry.fetch(self.shared.schema_ids([v for *_, vs in decoded for v in vs]))
        except RegistryUnavailable as exc:
            unavailable = Refusal(ErrorCode.request_timed_out, f"schema registry unavailable: {exc}")
        for key, index, values in decoded:
            refusal = unavailable or self._check(values)
            if refusal is not None:
                refusals.refuse(key, index, refusal)
        self._prepared[id(request)] = refusals

    def _check(self, values: list[bytes | None]) -> Refusal | None:
        errors = []
        for i, value in enumerate(values):
            try:
                if value is None:
                    if not self.shared.allow_nulls:
                        raise Invalid("null value")
                else:
                    self.shared.check(value)
            except Invalid as exc:
                errors.append((i, f"record {i}: {exc}"[:1000]))
            except KeyError:  # a schema that could not be fetched
                errors.append((i, f"record {i}: its schema is not available"))
        if not errors:
            return None
        return Refusal(ErrorCode.invalid_record, f"{len(errors)} invalid record(s): {errors[0][1]}",
                       tuple(errors[:_MAX_ERRORS]))

    def on_request(self, client: ClientInfo, api_key: int, api_version: int, request: Any) -> Any:
        refusals = self._prepared.pop(id(request))
        forwarded = refusals.apply(request)
        if refusals.refused and forwarded.acks != 0:
            self._refusals[id(forwarded)] = refusals
        return forwarded

    def needs_response(self, api_key: int, api_version: int, request: Any) -> bool:
        return id(request) in self._refusals

    def on_response(self, client: ClientInfo, api_key: int, api_version: int, request: Any, response: Any) -> Any:
        if api_key == METADATA:
            self.shared.topic_ids.learn_metadata(response)
            return response
        refusals = self._refusals.pop(id(request), None)
        return response if refusals is None else refusals.finish(response)


def _batches(data: bytes):
    """The decoded batches of a Produce record set (whole v2 batches only: CorruptBatch)."""
    for pos, _ in iter_headers(data):
        yield decode_batch(data, pos)


@filter_type("record-validation", KEYS)
def build(settings: FilterSettings):
    """The check made once (the JSON Schema read, the registry client); a RecordValidation per connection."""
    if not settings.get("topics"):
        raise ConfigError(f"{settings.key('topics')}: required (a regex over the topic names clients see)")
    check, registry = settings.get("check"), None
    if check == "json":
        checker = _json
    elif check == "json-schema":
        if not settings.get("schema.file"):
            raise ConfigError(f"{settings.key('schema.file')}: required with check=json-schema")
        checker = _schema_check(settings.get("schema.file"), settings.key("schema.file"))
    elif check == "avro":
        if not settings.get("schema.registry.url").startswith(("http://", "https://")):
            raise ConfigError(f"{settings.key('schema.registry.url')}: an http(s) URL, required with check=avro")
        registry = SchemaRegistry(settings.get("schema.registry.url"), _parse_avro,
                                  settings.int("schema.registry.timeout.ms", 1) / 1000)
        checker = _avro_check(registry)
    else:
        raise ConfigError(f"{settings.key('check')}={check!r}: expected one of {', '.join(CHECKS)}")
    shared = Validation(settings.pattern("topics"), checker, settings.bool("allow.nulls"), registry)
    return lambda client: RecordValidation(shared, client)

