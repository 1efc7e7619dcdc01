"""Requests an attacker sends to reach another tenant's or principal's state (issue 24's standing adversarial test):
for any kio request type, every field filled by what it names, pointed at the victim.

A field's kind comes from its kio type and name (``kind_of``): a topic, group or transactional id name, a topic
id, a regex, a fetch session id and epoch, a producer id and epoch, a member or instance id, a user, a
principal, an ACL or config resource (its name follows its type), a FindCoordinator key (a group or a
transactional id, by its key type), a record set. A ``Target`` says what to put there: the victim's things as
the attacker spells them in one way (names as the victim sees them, with its prefix, prefix tricks, regexes,
ids, null lists, ...), mixed with the attacker's own so that requests naming both take the paths that split
them. Every other field gets a sane value (short waits, one partition, offsets near 0), so each request is
answered quickly and does what it names. A request is a function of its API key, version, way and seed.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import struct
import typing
import uuid
from dataclasses import dataclass, field
from types import NoneType, UnionType
from typing import Any

from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId

from logway.wire.protocol import encode_body, is_flexible, request_type
from logway.wire.records import build_batch

FORGED = b"forged-by-the-attacker"
ATTACKER_SESSION_MS = 500  # the attacker's group members' session timeout (the broker's group.min.session.timeout.ms
# must allow it): they expire soon after its requests, so no JoinGroup waits long for them to rejoin
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
_FIND_COORDINATOR = 10
_SCRAM_USER_APIS = (50, 51)
_CONFIG_APIS = (19, 32, 33, 44)
_ACL_APIS = (29, 30, 31)
# ACL resource types (ResourceType) and config resource types (ConfigResource.Type) an attacker names.
_ACL_TYPES = {1: "any", 2: "topic", 3: "group", 4: "cluster", 5: "txn", 7: "user"}
_CONFIG_TYPES = {2: "topic", 32: "group", 4: "cluster", 16: "cluster", 8: "cluster"}


@dataclass(frozen=True)
class Target:
    """What one way of attacking puts in each kind of field (each a non-empty tuple to choose from)."""

    topics: tuple[str, ...]
    groups: tuple[str, ...]
    txns: tuple[str, ...]
    regexes: tuple[str, ...]
    topic_ids: tuple[uuid.UUID, ...]
    sessions: tuple[tuple[int, int], ...]  # (fetch session id, epoch)
    producers: tuple[tuple[int, int], ...]  # (producer id, epoch)
    members: tuple[str, ...]
    instances: tuple[str | None, ...]
    users: tuple[str, ...]
    principals: tuple[str, ...]
    auth: tuple[bytes, ...]  # SaslAuthenticate tokens (the victim's credentials)
    nulls: bool = False  # nullable fields null (all topics, all groups), other arrays empty
    by_id: bool = False  # an entry naming a topic by name or id names it by id (its name null or empty)

    def mix(self, other: Target) -> Target:
        """Both targets' things to choose from (requests naming the attacker's and the victim's together)."""
        joined = {f.name: tuple(dict.fromkeys(getattr(self, f.name) + getattr(other, f.name)))
                  for f in dataclasses.fields(self) if f.name not in ("nulls", "by_id")}
        return Target(**joined, nulls=self.nulls, by_id=self.by_id)


# Patterns that match everything, or try to break out of a pattern an attacker's is wrapped in (Java's and
# Python's inline flags, quoting, alternation, lookbehind, a lone backslash, ...).
REGEXES = (".*", "(?i).*", ".+", ")|(.*", "(?s).*", "(?x) . *", "\\Q\\E.*", "[\\s\\S]*", "(?-i:.*)", "|",
           "(.*)|(.*)", ".*(?#x)", "^.*$", "a(?i)", "(?i)(?i).*", "\\", "(?P<x>.*)", "(?<=x).*", "(*)")


def tricks(prefix: str, own_prefix: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Names that try to step out of the attacker's prefix into the victim's (``prefix``), or to be read as
    patterns: path steps, the prefix doubled or cased otherwise, control characters, wildcards, '.'/'_' twins,
    Kafka's illegal and longest names."""
    first = names[0]
    bare = prefix.rstrip(".")
    return (
        f"../{prefix}{first}", f"..{prefix}{first}", f"{own_prefix}{prefix}{first}", f"{prefix}{prefix}{first}",
        (prefix + first).upper(), bare, prefix, f".{prefix}{first}", f"{prefix}{first}\x00", f"{prefix}{first} ",
        f"\x00{prefix}{first}", "*", f"{prefix}*", "", ".", "..", (prefix + first).replace(".", "_"),
        f"{prefix}{first}\u2024", "x" * 249, prefix + "y" * (249 - len(prefix)), *names,
    )


@dataclass
class _Fill:
    """The state of filling one request: its target, its random source, and the API it is for."""

    api_key: int
    target: Target
    rng: random.Random
    scope: dict[str, Any] = field(default_factory=dict)  # the entity's resource or key type, for its name

    def pick(self, options: tuple) -> Any:
        return options[self.rng.randrange(len(options))]


def build_request(api_key: int, version: int, target: Target, rng: random.Random) -> Any:
    """A request of ``api_key`` / ``version`` whose every field names what ``target`` says."""
    return _entity(request_type(api_key, version), _Fill(api_key, target, rng), 0)


def request_frame(api_key: int, version: int, body: Any, correlation_id: int, client_id: str = "attacker") -> bytes:
    """A whole size-prefixed request frame of ``body`` (a kio request object)."""
    cid = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(cid)) + cid
    if is_flexible(api_key, version):
        header += b"\x00"
    payload = header + encode_body(body)
    return struct.pack(">i", len(payload)) + payload


# --- the walk over a kio type ---------------------------------------------------------------------------------


def _leaves(hint: Any) -> set[Any]:
    args = typing.get_args(hint)
    if not args:
        return {hint}
    out: set[Any] = set()
    for arg in args:
        if arg is not Ellipsis:
            out |= _leaves(arg)
    return out


def _optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (UnionType, typing.Union):
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) == 1:
            return args[0], True
    return hint, False


_TYPES_FIRST = ("resource_type", "resource_type_filter", "key_type", "resource_pattern_type", "pattern_type_filter")


def _entity(cls: type, fill: _Fill, depth: int) -> Any:
    """An instance of the kio entity ``cls``: type fields first (a resource's name follows its type)."""
    hints = typing.get_type_hints(cls)
    fields = sorted(dataclasses.fields(cls), key=lambda f: f.name not in _TYPES_FIRST)
    saved = dict(fill.scope)
    names = {f.name for f in fields}
    fill.scope["named by id"] = "topic_id" in names and bool(names & {"name", "topic", "topic_name"})
    values = {f.name: _field(f, hints[f.name], fill, depth) for f in fields}
    fill.scope = saved
    return cls(**values)


def _field(f: dataclasses.Field, hint: Any, fill: _Fill, depth: int) -> Any:
    inner, nullable = _optional(hint)
    kafka_type = f.metadata.get("kafka_type", "")
    if nullable and fill.target.nulls:
        return None
    if typing.get_origin(inner) is tuple:
        item = typing.get_args(inner)[0]
        if fill.target.nulls:
            return ()
        if dataclasses.is_dataclass(item):
            count = 1 + fill.rng.randrange(2 if depth < 2 else 1)
            return tuple(_entity(item, fill, depth + 1) for _ in range(count))
        kind = kind_of(fill.api_key, f.name, _leaves(item), kafka_type)
        return tuple(dict.fromkeys(_value(kind, f.name, kafka_type, fill) for _ in range(1 + fill.rng.randrange(3))))
    if dataclasses.is_dataclass(inner):
        return _entity(inner, fill, depth + 1)
    kind = kind_of(fill.api_key, f.name, _leaves(inner), kafka_type)
    if fill.scope["named by id"] and kind in ("topic", "topic_id"):
        return _name_or_id(kind, nullable, fill)
    value = _value(kind, f.name, kafka_type, fill)
    if value is None and not nullable:
        value = ""
    return value


_NO_ID = uuid.UUID(int=0)


def _name_or_id(kind: str, nullable: bool, fill: _Fill) -> Any:
    """An entry that names its topic by name or by id (Metadata v10+, DeleteTopics v6, ...): by id alone when the
    target says so, else by name, with an id only now and then (Kafka refuses both together)."""
    if fill.target.by_id:
        return fill.pick(fill.target.topic_ids) if kind == "topic_id" else (None if nullable else "")
    if kind == "topic":
        return fill.pick(fill.target.topics)
    return fill.pick(fill.target.topic_ids) if fill.rng.random() < 0.25 else _NO_ID


_NAMED_KINDS = {TopicName: "topic", GroupId: "group", TransactionalId: "txn"}
_KINDS_BY_NAME = {
    "session_id": "session_id", "session_epoch": "session_epoch", "share_session_epoch": "session_epoch",
    "member_id": "member", "group_instance_id":
    "instance", "principal": "principal", "principal_filter": "principal", "resource_name": "resource_name",
    "resource_name_filter": "resource_name", "transactional_id_pattern": "regex", "subscribed_topic_regex":
    "regex", "key": "key", "coordinator_keys": "key", "resource_type": "resource_type", "resource_type_filter":
    "resource_type", "key_type": "key_type", "auth_bytes": "auth",
}  # fmt: skip


def kind_of(api_key: int, name: str, leaves: set[Any], kafka_type: str) -> str:
    """What a field names: "topic", "group", "txn", "topic_id", "regex", "producer_id", ... else its kafka_type."""
    for leaf, kind in _NAMED_KINDS.items():
        if leaf in leaves:
            return kind
    if ProducerId in leaves or name.endswith("producer_id"):
        return "producer_id"
    if name.endswith("producer_epoch"):
        return "producer_epoch"
    if kafka_type == "uuid" and "topic" in name:
        return "topic_id"
    if kafka_type == "records":
        return "records"
    if name == "name" and kafka_type == "string":
        if api_key in _SCRAM_USER_APIS:
            return "user"
        if api_key in _CONFIG_APIS:
            return "config_name"
    if kafka_type == "string" and (name.endswith("regex") or name.endswith("pattern")):
        return "regex"
    if name in ("key", "coordinator_keys") and api_key != _FIND_COORDINATOR:
        return kafka_type
    return _KINDS_BY_NAME.get(name, kafka_type)


# --- values ---------------------------------------------------------------------------------------------------


def _value(kind: str, name: str, kafka_type: str, fill: _Fill) -> Any:
    named = _named(kind, fill)
    if named is not _NONE:
        return named
    special = _special(kind, name, fill)
    if special is not _NONE:
        return special
    return _plain(name, kafka_type, fill)


_NONE = object()


def _named(kind: str, fill: _Fill) -> Any:
    """A value naming the target's things, or _NONE for a field that names nothing."""
    t, pick = fill.target, fill.pick
    simple = {"topic": t.topics, "group": t.groups, "txn": t.txns, "regex": t.regexes, "topic_id": t.topic_ids,
              "member": t.members, "instance": t.instances, "user": t.users, "principal": t.principals,
              "auth": t.auth}
    if kind in simple:
        return pick(simple[kind])
    if kind in ("session_id", "session_epoch"):
        session = fill.scope.setdefault("session", pick(t.sessions))
        return session[0] if kind == "session_id" else session[1]
    if kind in ("producer_id", "producer_epoch"):
        producer = fill.scope.setdefault("producer", pick(t.producers))
        return producer[0] if kind == "producer_id" else producer[1]
    if kind == "key":  # FindCoordinator: a group (key type 0) or a transactional id (1)
        return pick(t.txns if fill.scope.get("key_type") == 1 else t.groups)
    if kind == "resource_name":
        return _resource_name(fill)
    return _NONE


def _resource_name(fill: _Fill) -> str | None:
    t, kind = fill.target, fill.scope.get("resource", "topic")
    options = {"topic": t.topics, "group": t.groups, "txn": t.txns, "user": t.users,
               "cluster": ("kafka-cluster",), "any": t.topics + t.groups + ("*",)}[kind]
    return fill.pick(options)


def _special(kind: str, name: str, fill: _Fill) -> Any:
    """Types and enumerations that decide what a name means, and record sets."""
    rng = fill.rng
    if kind == "resource_type":
        types = _ACL_TYPES if fill.api_key in _ACL_APIS else _CONFIG_TYPES
        chosen = fill.pick(tuple(types))
        fill.scope["resource"] = types[chosen]
        return chosen
    if kind == "key_type":
        fill.scope["key_type"] = rng.randrange(2)
        return fill.scope["key_type"]
    if kind == "records":
        return _records(fill)
    if kind == "config_name":
        return fill.pick(("retention.ms", "cleanup.policy", "min.insync.replicas", "consumer.session.timeout.ms"))
    return _NONE


def _records(fill: _Fill) -> bytes | None:
    """A batch carrying the target's producer id and epoch (idempotent or transactional), or bytes that are not a
    batch at all."""
    producer_id, epoch = fill.scope.setdefault("producer", fill.pick(fill.target.producers))
    roll = fill.rng.randrange(4)
    if producer_id < 0 and roll < 2:
        roll = 2  # no producer id to carry: a plain batch
    if roll == 3:
        return fill.rng.randbytes(fill.rng.randrange(1, 80))
    return build_batch([(b"k", FORGED, ())], base_timestamp=0, producer_id=producer_id if roll < 2 else -1,
                       producer_epoch=epoch if roll < 2 else -1, base_sequence=fill.rng.randrange(3) if roll < 2
                       else -1, is_transactional=roll == 1)


_ENUMS = {  # small enumerations and settings an attacker varies; each answered quickly
    "acks": (-1, 1), "isolation_level": (0, 1), "operation": tuple(range(1, 15)), "permission_type": (1, 2, 3),
    "pattern_type_filter": (1, 2, 3, 4), "resource_pattern_type": (3, 4), "config_operation": (0, 1, 2, 3),
    "replica_id": (-1, -1, 1), "timestamp": (-1, -2, -3, 0), "min_bytes": (0, 1),
    "num_partitions": (1, -1), "replication_factor": (1, -1), "count": (1,), "iterations": (4096,),
    "response_partition_limit": (1, 3, 2000), "duration_filter": (-1, 0), "broker_ids": (1, -1),
    "states_filter": ("Stable", "Empty", "Dead"), "types_filter": ("classic", "consumer"),
    "state_filters": ("Ongoing", "Empty", "CompleteCommit"), "endpoint_type": (1, 2),
}  # fmt: skip
_STRINGS = {"mechanism": ("PLAIN", "SCRAM-SHA-256", "GSSAPI"), "protocol_type": ("consumer", "connect"),
            "name": ("range", "roundrobin"), "rack_id": ("",), "host": ("*",), "host_filter": ("*", None)}
_WAITS = {"session_timeout": ATTACKER_SESSION_MS, "rebalance_timeout": 200, "transaction_timeout": 60_000,
          "retention_time": -1, "timeout": 1000, "max_wait": 50}


def _plain(name: str, kafka_type: str, fill: _Fill) -> Any:
    """A field that names nothing: a value that makes the request do what it says, quickly."""
    rng = fill.rng
    if kafka_type == "string":
        return fill.pick(_STRINGS.get(name, ("", "range", "consumer", "x", "1000")))
    if name == "mechanism":
        return fill.pick((1, 2))
    if name in _ENUMS:
        return fill.pick(_ENUMS[name])
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(milliseconds=_WAITS.get(name, 100))
    if kafka_type.startswith("int") or kafka_type.startswith("uint"):
        return abs(_integer(name, rng)) if kafka_type.startswith("uint") else _integer(name, rng)
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type in ("bytes", "records"):
        return rng.randbytes(rng.randrange(0, 24))
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type == "float64":
        return 1.0
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, datetime.UTC)
    raise TypeError(f"no value for {name}: {kafka_type}")


def _integer(name: str, rng: random.Random) -> int:
    if "bytes" in name:
        return 1 << 20
    if "partition" in name or name == "index":
        return rng.randrange(3)
    if "offset" in name:
        return rng.choice((0, 0, 0, 1, -1))
    return rng.choice((-1, 0, 1))
