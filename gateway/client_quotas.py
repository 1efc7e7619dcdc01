"""The broker's client quotas kept durable: ``client-quotas.json`` in the first log dir, read at start-up, rewritten
whole (crash-safe: temp file, fsync, rename) by every AlterClientQuotas that changes something, and applied to the
running broker once written, so a change is in force at once and after a restart (Kafka keeps them in its
metadata log as ClientQuotaRecords).

The file is a JSON list of ``{"entity": [[type, name or null], ...], "quotas": {key: value}}``: null is the
``<default>`` entity of its type, as on the wire.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import trio

from logway.server import request_time
from logway.server.quota_entities import Entity, check_entity, check_value, make_entity
from logway.server.quotas import ClientQuotas
from logway.storage import fs
from logway.storage.checkpoints import write_atomically
from logway.storage.errors import KafkaStorageError
from logway.wire.errors import KafkaError

log = logging.getLogger(__name__)

QUOTAS_FILE = "client-quotas.json"
Changes = list[tuple[Entity, dict[str, float | None]]]


class QuotaStore:
    """The quotas of ``quotas`` as stored in ``log_dir``; changes are written, then applied."""

    def __init__(self, log_dir: Path, quotas: ClientQuotas) -> None:
        self.path = log_dir / QUOTAS_FILE
        self.quotas = quotas
        self._lock = trio.Lock()

    def load(self) -> None:
        """Apply the stored quotas; an entry that no longer validates is skipped with a warning."""
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise KafkaStorageError(f"cannot read the client quotas {self.path}: {exc}") from None
        if not isinstance(stored, list):
            raise KafkaStorageError(f"{self.path}: expected a JSON list of quota entries")
        configs: dict[Entity, dict[str, float]] = {}
        for item in stored:
            try:
                entity, values = _entry(item)
            except (KafkaError, TypeError, ValueError, KeyError) as exc:
                log.warning("ignoring client quota entry %r in %s: %s", item, self.path, exc)
                continue
            configs[entity] = values
        self.quotas.load(configs)
        if configs:
            log.info("client quotas: %d entities from %s", len(configs), self.path)

    async def alter(self, changes: Changes) -> None:
        """Write the quotas with ``changes`` made (key -> value, None to remove), then apply them. One alteration
        at a time, so each write holds the ones before it."""
        async with self._lock:
            after = {entity: dict(values) for entity, values in self.quotas.configs.items()}
            for entity, ops in changes:
                values = after.setdefault(entity, {})
                for key, value in ops.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del after[entity]
            await trio.to_thread.run_sync(self._save, after)
            for entity, ops in changes:
                for key, value in ops.items():
                    self.quotas.set(entity, key, value)
            if self.quotas.request.enabled:
                request_time.enable()

    def _save(self, configs: Mapping[Entity, Mapping[str, float]]) -> None:
        entries = [{"entity": [list(pair) for pair in entity], "quotas": dict(sorted(values.items()))}
                   for entity, values in sorted(configs.items(), key=lambda kv: repr(kv[0]))]
        fs.make_dirs(self.path.parent)
        write_atomically(self.path, json.dumps(entries, indent=1) + "\n")


def _entry(item: dict) -> tuple[Entity, dict[str, float]]:
    """One stored entry, checked as AlterClientQuotas checks it."""
    entity = make_entity((str(kind), None if name is None else str(name)) for kind, name in item["entity"])
    keys = check_entity(entity)
    values = {str(key): float(value) for key, value in item["quotas"].items()}
    for key, value in values.items():
        check_value(keys, key, value)
    return entity, values
