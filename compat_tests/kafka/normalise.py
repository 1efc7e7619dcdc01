"""Turn kio responses into plain data with the broker-specific fields masked, and list where two differ.

Masked (they differ between any two clusters, not between behaviours): cluster ids, hosts and ports,
throttle times and error messages (free text). Reduced to whether they are set: member ids, topic ids,
producer ids and log append times (a broker's clock). Record timestamps are fixed by the cases, so the
timestamps ListOffsets answers are compared as they are. Node ids are compared as they are: the reference Kafka
and Logway both run as node 1. Arrays of entries are sorted by their name / index so order does not count.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Any

IGNORED = frozenset({"cluster_id", "host", "port", "throttle_time", "error_message", "client_host",
                     "rack", "node_endpoints"})
PRESENCE = frozenset({"member_id", "leader", "topic_id", "producer_id", "log_append_time"})
SORT_KEYS = ("name", "topic", "partition_index", "partition", "api_key", "node_id", "group_id", "member_id",
             "resource_name", "index")


def normalise(value: Any, field: str = "") -> Any:
    """Plain dicts/lists/ints/strings from a kio message, masked and sorted as the module docstring says."""
    if field in PRESENCE:
        return _presence(value)
    if dataclasses.is_dataclass(value):
        return {f.name: normalise(getattr(value, f.name), f.name)
                for f in dataclasses.fields(value) if f.name not in IGNORED}
    if isinstance(value, dict):
        return {str(k): normalise(v, str(k)) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        items = [normalise(v, field) for v in value]
        return sorted(items, key=_sort_key) if items and isinstance(items[0], dict) else items
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _presence(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return "zero" if value.int == 0 else "set"
    if isinstance(value, datetime.datetime):
        value = int(value.timestamp() * 1000)
    if isinstance(value, int):
        return str(value) if value < 0 else "set"  # -1 (none) and the other special values stay
    if isinstance(value, str):
        return "set" if value else ""
    return "set"


def _sort_key(item: dict) -> tuple:
    return tuple(str(item.get(k, "")) for k in SORT_KEYS)


def differences(kafka: Any, logway: Any, path: str = "") -> list[str]:
    """Each place where the two normalised values differ, as 'path: kafka=... logway=...'."""
    if isinstance(kafka, dict) and isinstance(logway, dict):
        out = []
        for key in sorted(set(kafka) | set(logway)):
            out += differences(kafka.get(key, "<absent>"), logway.get(key, "<absent>"), f"{path}.{key}")
        return out
    if isinstance(kafka, list) and isinstance(logway, list) and len(kafka) == len(logway):
        out = []
        for i, (k, lw) in enumerate(zip(kafka, logway, strict=True)):
            out += differences(k, lw, f"{path}[{i}]")
        return out
    if kafka != logway:
        return [f"{path or '.'}: kafka={_short(kafka)} logway={_short(logway)}"]
    return []


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
