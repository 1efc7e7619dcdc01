"""A Confluent Schema Registry client for the record-validation filter: schemas by id, cached.

Records in the Confluent wire format start with a magic byte 0 and the 4-byte id of their schema in the
registry (``GET /schemas/ids/{id}`` answers ``{"schema": "...", "schemaType": "AVRO"}``, AVRO when the type is
left out). A schema id never changes what it names, so a schema once fetched is kept (up to ``max_schemas``,
least recently used first out); an id the registry does not know is remembered as unknown for a while
(``_MISSING_FOR``), so a client sending bogus ids cannot make the proxy ask for each of its records. The HTTP
request runs in a worker thread, bounded by ``timeout``: the proxy's event loop never waits on the registry.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import trio

_MISSING_FOR = 30.0  # seconds an unknown id stays unknown


class RegistryUnavailable(Exception):  # noqa: N818
    """The registry did not answer (in time, or sensibly): a record's schema could not be had."""


class UnknownSchema(Exception):  # noqa: N818
    """The registry has no schema with this id (or not one of the type expected)."""


class SchemaRegistry:
    """Schemas by id from one registry, parsed by ``parse`` (the check's: fastavro's, ...), cached."""

    def __init__(self, url: str, parse: Callable[[dict], Any], timeout: float, max_schemas: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url.rstrip("/")
        self.parse = parse
        self.timeout = timeout
        self.max_schemas = max_schemas
        self.clock = clock
        self._schemas: OrderedDict[int, Any] = OrderedDict()
        self._missing: dict[int, float] = {}  # id -> until when it is known to be unknown

    def schema(self, schema_id: int) -> Any:
        """The parsed schema of ``schema_id`` if it is at hand; UnknownSchema if the registry said it has none;
        KeyError if it must be fetched first (``fetch``)."""
        schema = self._schemas.get(schema_id)
        if schema is not None:
            self._schemas.move_to_end(schema_id)
            return schema
        until = self._missing.get(schema_id)
        if until is not None and until > self.clock():
            raise UnknownSchema(f"schema id {schema_id} is not in the schema registry")
        raise KeyError(schema_id)

    async def fetch(self, schema_ids: set[int]) -> None:
        """Fetch the schemas of ``schema_ids`` not at hand. RegistryUnavailable."""
        for schema_id in sorted(schema_ids):
            try:
                self.schema(schema_id)
                continue
            except UnknownSchema:
                continue
            except KeyError:
                pass
            with trio.move_on_after(self.timeout) as scope:
                document = await trio.to_thread.run_sync(self._get, schema_id, abandon_on_cancel=True)
            if scope.cancelled_caught:
                raise RegistryUnavailable(f"{self.url}: no answer within {self.timeout:g} s")
            if document is None:
                self._missing[schema_id] = self.clock() + _MISSING_FOR
                if len(self._missing) > self.max_schemas:
                    now = self.clock()
                    self._missing = {k: v for k, v in self._missing.items() if v > now}
                continue
            self._schemas[schema_id] = document
            while len(self._schemas) > self.max_schemas:
                self._schemas.popitem(last=False)

    def _get(self, schema_id: int) -> Any:
        """In a worker thread: the parsed schema, or None when the registry has no such id (or it does not
        parse as the check's type)."""
        try:
            with urllib.request.urlopen(f"{self.url}/schemas/ids/{schema_id}", timeout=self.timeout) as answer:
                document = json.loads(answer.read(16 * 1024 * 1024))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise RegistryUnavailable(f"{self.url}: HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise RegistryUnavailable(f"{self.url}: {exc}") from None
        try:
            return self.parse(document)
        except Exception:  # noqa: BLE001 - a schema of another type, or one that does not parse: unusable
            return None
