"""Kafka's client quota entities, sans-IO: what may be set on what (AlterClientQuotas' checks) and which entities a
DescribeClientQuotas filter matches.

Quotas are set on entities: a user, a client id, or a (user, client id) pair, each name possibly ``<default>`` (None
here), with ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes a second), ``request_percentage`` (percent of
one request thread's time a second) and ``controller_mutation_rate`` (partitions created or deleted a second); and
on IPs (a named IP or the ``<default>`` one) with ``connection_creation_rate``. The checks and their messages are
Kafka's ClientQuotaControlManager's; the filter is its ClientQuotasImage.describe.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from logway.wire.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Kafka's QuotaType names: the JMX ``type`` of a quota's metrics.
PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION = "Produce", "Fetch", "Request", "ControllerMutation"
# QuotaConfig.userAndClientQuotaConfigs: each key's Kafka type and the quota it sets.
CLIENT_KEYS: dict[str, tuple[str, str]] = {
    "producer_byte_rate": ("LONG", PRODUCE),
    "consumer_byte_rate": ("LONG", FETCH),
    "request_percentage": ("DOUBLE", REQUEST),
    "controller_mutation_rate": ("DOUBLE", CONTROLLER_MUTATION),
}
IP_KEYS: dict[str, str] = {"connection_creation_rate": "INT"}
_LIMITS = {"INT": 2**31 - 1, "LONG": 2**63 - 1}

# An entity: ((type, name), ...) sorted by type; a None name is the <default> entity of that type.
Entity = tuple[tuple[str, str | None], ...]


def make_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from its (type, name) pairs, in a canonical order."""
    return tuple(sorted(pairs))


def user_of(principal: str) -> str:
    """The user name quotas see for a principal (``User:alice`` -> ``alice``; KafkaPrincipal.getName)."""
    return principal.partition(":")[2] or principal


def describe_entity(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString, for error messages."""
    return "ClientQuotaEntity(entries=" + "{" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


# --- what may be set (Kafka's ClientQuotaControlManager) ------------------------------------------------------

def check_entity(entity: Entity) -> dict[str, str]:
    """The configs the entity may have; KafkaError INVALID_REQUEST for an entity Kafka refuses."""
    if not entity:
        raise KafkaError("Invalid empty client quota entity", ErrorCode.invalid_request)
    seen: set[str] = set()
    for kind, name in entity:
        if kind in seen:
            raise KafkaError(f"Invalid client quota entity, duplicate entity entry {kind}", ErrorCode.invalid_request)
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(f"Unhandled client quota entity type: {kind}", ErrorCode.invalid_request)
        if name is not None and not name:
            raise KafkaError(f"Empty {kind} not supported", ErrorCode.invalid_request)
        seen.add(kind)
    if IP not in seen:
        return {key: kind for key, (kind, _) in CLIENT_KEYS.items()}
    if len(seen) > 1:
        raise KafkaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
                         ErrorCode.invalid_request)
    name = dict(entity)[IP]
    if name is not None and not _is_ip(name):
        # Kafka also takes a resolvable host name here; Logway takes IP addresses (KAFKA_DIFFERENCES.md).
        raise KafkaError(f"{name} is not a valid IP or resolvable host.", ErrorCode.invalid_request)
    return dict(IP_KEYS)


def check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue: a known key, a positive value that fits its type."""
    kind = keys.get(key)
    if kind is None:
        raise KafkaError(f"Invalid configuration key {key}", ErrorCode.invalid_request)
    if not value > 0.0:
        raise KafkaError(f"Quota {key} must be greater than 0", ErrorCode.invalid_request)
    if kind == "DOUBLE":
        return
    if value > _LIMITS[kind]:
        article = "an" if kind == "INT" else "a"
        raise KafkaError(f"Proposed value for {key} is too large for {article} {kind}.", ErrorCode.invalid_request)
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise KafkaError(f"{key} cannot be a fractional value.", ErrorCode.invalid_request)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


# --- which entities a DescribeClientQuotas filter matches (Kafka's ClientQuotasImage.describe) -----------------

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass
class QuotaFilter:
    """A DescribeClientQuotas filter: exact names (None: the default entity) and types that must be present."""

    exact: dict[str, str | None] = field(default_factory=dict)
    specified: set[str] = field(default_factory=set)
    strict: bool = False

    @classmethod
    def of(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        """From the request's (entity_type, match_type, match) components; KafkaError as Kafka refuses them."""
        out = cls(strict=strict)
        for kind, match_type, match in components:
            if not kind:
                raise KafkaError("Invalid empty entity type.", ErrorCode.invalid_request)
            if kind in out.exact or kind in out.specified:
                raise KafkaError(f"Entity type {kind} cannot appear more than once in the filter.",
                                 ErrorCode.invalid_request)
            if kind not in (IP, USER, CLIENT_ID):
                raise KafkaError(f"Unsupported entity type {kind}", ErrorCode.unsupported_version)
            out._add(kind, match_type, match)
        ip = IP in out.exact or IP in out.specified
        if ip and ({USER, CLIENT_ID} & (set(out.exact) | out.specified)):
            raise KafkaError("Invalid entity filter component combination. IP filter component should not be used "
                             "with user or clientId filter component.", ErrorCode.invalid_request)
        return out

    def _add(self, kind: str, match_type: int, match: str | None) -> None:
        if match_type == MATCH_EXACT:
            if match is None:
                raise KafkaError("Request specified MATCH_TYPE_EXACT, but set match string to null.",
                                 ErrorCode.invalid_request)
            self.exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise KafkaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                                 ErrorCode.invalid_request)
            self.exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise KafkaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                                 ErrorCode.invalid_request)
            self.specified.add(kind)
        else:
            raise KafkaError(f"Unknown match type {match_type}", ErrorCode.invalid_request)

    def matches(self, entity: Entity) -> bool:
        names = dict(entity)
        if self.strict and len(names) != len(self.exact) + len(self.specified):
            return False
        return (all(kind in names and names[kind] == name for kind, name in self.exact.items())
                and all(kind in names for kind in self.specified))
