"""The victim's side of issue 24's standing adversarial test: raw connections, the victim's state as a watcher with
every right sees it (to show that nothing changed), and the check that nothing of the victim reached the attacker
(to show that nothing leaked)."""

from __future__ import annotations

import dataclasses
import socket
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from logway.proxy import frames as proxy_frames
from logway.server.security.scram import ScramClient
from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, request_type
from logway.wire.records import build_batch
from tests.gateway.adversary import request_frame

API_VERSIONS = 18
SHARE_FETCH = 78
ANSWER_WAIT = 20.0  # seconds one request may go unanswered: well past every wait the attacker's requests ask for


class Closed(Exception):  # noqa: N818 - the peer closed the connection
    """The other side closed the connection (or answered nothing within ANSWER_WAIT)."""


def _read_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except OSError as exc:
            raise Closed(str(exc)) from None
        if not chunk:
            raise Closed("closed")
        buf += chunk
    return buf


def read_payload(s: socket.socket) -> bytes:
    """One response frame without its size prefix (from its correlation id on)."""
    (size,) = struct.unpack(">i", _read_exact(s, 4))
    return _read_exact(s, size)


def decode_response(api_key: int, version: int, payload: bytes) -> Any:
    """A response as a client reads it (the proxy's decoder: kio's, with Kafka's -1 start time of a transaction
    not ongoing read as such)."""
    return proxy_frames.decode_response(api_key, version, payload)


class Conn:
    """A raw client connection, logged in with SASL (PLAIN, or ``mechanism``) when given a user, made again when
    the other side closes it."""

    def __init__(self, port: int, user: tuple[str, str] | None = None, client_id: str = "attacker",
                 mechanism: str = "PLAIN") -> None:
        self.port, self.user, self.client_id, self.mechanism = port, user, client_id, mechanism
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.reconnects = 0

    def connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=ANSWER_WAIT)
            self.reconnects += 1
            if self.user is not None:
                self._log_in(*self.user)
        return self.sock

    def _log_in(self, name: str, password: str) -> None:
        error = self.authenticate(name, password)
        assert error == ErrorCode.none, f"{name} could not log in: {error}"

    def authenticate(self, name: str, password: str, mechanism: str | None = None) -> int:
        """A SASL exchange on this connection (a login, or a KIP-368 re-authentication once logged in): the last
        error code Kafka answered, or -1 when the connection was closed instead."""
        mechanism = mechanism or self.mechanism
        try:
            handshake = self.ask(17, 1, {"mechanism": mechanism})
            if handshake.error_code:
                return handshake.error_code
            if mechanism == "PLAIN":
                return self.ask(36, 2, {"auth_bytes": b"\0" + name.encode() + b"\0" + password.encode()}).error_code
            client = ScramClient(mechanism, name, password)
            first = self.ask(36, 2, {"auth_bytes": client.first()})
            if first.error_code:
                return first.error_code
            return self.ask(36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))}).error_code
        except Closed:
            return -1

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, api_key: int, version: int, body: Any) -> tuple[bytes, bytes]:
        """Send a kio request object; (the frame sent, the response payload). Closed if none comes."""
        self.correlation_id += 1
        frame = request_frame(api_key, version, body, self.correlation_id, self.client_id)
        return frame, self.send_frame(frame)

    def send_frame(self, frame: bytes) -> bytes:
        s = self.connect()
        try:
            s.sendall(frame)
            return read_payload(s)
        except (Closed, OSError) as exc:
            self.close()
            raise Closed(str(exc)) from None

    def ask(self, api_key: int, version: int, data: dict | Any) -> Any:
        """A request from a dict (wire.protocol.build) or a kio object; its decoded answer."""
        body = build(request_type(api_key, version), data) if isinstance(data, dict) else data
        return decode_response(api_key, version, self.exchange(api_key, version, body)[1])


# --- nothing leaked -------------------------------------------------------------------------------------------


@dataclass
class Secrets:
    """What of the victim the attacker must never get back unless it sent it itself."""

    tokens: dict[str, bytes] = field(default_factory=dict)  # label -> bytes (names, ids, record values)
    numbers: dict[str, set[int]] = field(default_factory=dict)  # field name -> the victim's values in it

    def add(self, label: str, value: str | bytes | uuid.UUID) -> None:
        self.tokens[label] = value.bytes if isinstance(value, uuid.UUID) else (
            value.encode() if isinstance(value, str) else value)

    def add_number(self, field_name: str, value: int) -> None:
        self.numbers.setdefault(field_name, set()).add(value)


def leaks(secrets: Secrets, request: Any, frame: bytes, payload: bytes, response: Any,
          attackers_own: Callable[[], set[str]] = set) -> list[str]:
    """What of the victim the response holds that the request did not: a token found more often in the
    response's bytes than in the request's (error messages aside, which may quote the request, and names of the
    attacker's own things: ``attackers_own()``, asked only when needed, gives them as the attacker sees them), a
    token in an error message that the request did not hold, and a victim's number in a field of the response (a
    producer id, a session id) that the request did not name.

    The attacker may name its own things as the victim names its own (that is how it tries to reach them): such a
    look-alike listed back is its own, not a leak. A victim's thing listed back under its own name would look
    the same, so each of the victim's things also carries what no look-alike has (its topic ids, producer ids,
    record bytes, its group's protocol type and member id), which no answer may hold."""
    messages = "\n".join(_messages(response)).encode()
    found = []
    own: set[str] | None = None
    for label, token in secrets.tokens.items():
        sent = frame.count(token)
        if token in messages and not sent:
            found.append(f"{label} in an error message ({token!r})")
            continue
        unexplained = payload.count(token) - messages.count(token) - sent
        if unexplained > 0:
            own = attackers_own() if own is None else own
            unexplained -= sum(v.encode().count(token) for v in _strings(response) if v in own)
        if unexplained > 0:
            found.append(f"{label} ({token!r})")
    sent_numbers = set(_numbers(request, None))
    for name, value in _numbers(response, secrets.numbers):
        if value in secrets.numbers[name] and value not in sent_numbers:
            found.append(f"{name} {value}")
    return found


def _fields(obj: Any) -> Iterable[tuple[str, Any]]:
    """Every (field name, value) in a kio object, nested entities and arrays walked."""
    if not dataclasses.is_dataclass(obj):
        return
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if dataclasses.is_dataclass(item):
                yield from _fields(item)
            else:
                yield f.name, item


def _strings(response: Any) -> list[str]:
    return [v for name, v in _fields(response) if isinstance(v, str) and not name.endswith("message")]


def _messages(response: Any) -> list[str]:
    return [v for name, v in _fields(response) if name.endswith("message") and isinstance(v, str)]


def _numbers(obj: Any, names: dict | None) -> Iterable[Any]:
    """(name, int) of the fields in ``names`` (every int field when None: then the ints alone)."""
    for name, value in _fields(obj):
        if isinstance(value, int) and not isinstance(value, bool):
            if names is None:
                yield value
            elif name in names:
                yield name, value


# --- nothing changed ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holdings:
    """The victim's things by their names as a watcher with every right names them."""

    topics: tuple[str, ...]  # whose records, offsets and producers are watched
    config_topics: tuple[str, ...]  # whose existence and configs are watched (the above and the probe's)
    groups: tuple[str, ...]
    txns: tuple[str, ...]
    partitions: int
    files: tuple = ()  # paths whose bytes are watched (the victim's users and ACLs)
    consumer_groups: tuple[str, ...] = ()  # KIP-848 consumer groups (ConsumerGroupDescribe)
    share_groups: tuple[str, ...] = ()  # KIP-932 share groups (ShareGroupDescribe)
    acl_principals: tuple[str, ...] = ()  # ACLs of these principals are watched through DescribeAcls


def state(watch: Conn, held: Holdings) -> dict[str, Any]:
    """The victim's state, every part as its response came (throttle times zeroed)."""
    ask = watch.ask
    out = {
        "topics": ask(3, 12, {"topics": [{"name": t} for t in held.config_topics], "allow_auto_topic_creation":
                              False}),
        "configs": ask(32, 4, {"resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": None}
                                             for t in held.config_topics]}),
        "records": ask(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                               "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
            {"topic": t, "partitions": [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 22,
                                         "log_start_offset": -1, "current_leader_epoch": -1}
                                        for p in range(held.partitions)]} for t in held.topics],
            "forgotten_topics_data": [], "rack_id": ""}),
        "producers": ask(61, 0, {"topics": [{"name": t, "partition_indexes": list(range(held.partitions))}
                                            for t in held.topics]}),
        "groups": ask(15, 5, {"groups": list(held.groups), "include_authorized_operations": False}),
        "committed": [ask(9, 7, {"group_id": g, "topics": None, "require_stable": False}) for g in held.groups],
        "transactions": ask(65, 0, {"transactional_ids": list(held.txns)}),
        "consumer groups": ask(69, 1, {"group_ids": list(held.consumer_groups),
                                       "include_authorized_operations": False}),
        "share groups": ask(77, 1, {"group_ids": list(held.share_groups), "include_authorized_operations": False}),
        "files": {str(path): path.read_bytes() if path.exists() else None for path in held.files},
    }
    if held.acl_principals:
        acls = ask(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                           "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        out["acls"] = sorted(repr((r.resource_type, r.resource_name, r.pattern_type, a)) for r in acls.resources
                             for a in r.acls if a.principal in held.acl_principals)
    return {name: _without_throttle(value) for name, value in out.items()}


def _without_throttle(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_throttle(v) for v in value]
    if dataclasses.is_dataclass(value) and hasattr(value, "throttle_time"):
        return dataclasses.replace(value, throttle_time=type(value.throttle_time)(0))
    return value


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The parts of the victim's state that differ, each with both versions."""
    return [f"{name}:\n  before {before[name]!r}\n  after  {after.get(name)!r}" for name in before
            if before[name] != after.get(name)]


def errors_of(obj: Any) -> list[ErrorCode]:
    """Every non-zero error code in a kio response."""
    return [v for name, v in _fields(obj) if name == "error_code" and v]


def each_version(ranges: dict[int, tuple[int, int]], keys: Callable[[int], bool] = lambda k: True
                 ) -> list[tuple[int, int]]:
    """(api key, version) for every version of every key in ``ranges`` that ``keys`` takes."""
    return [(k, v) for k, (lo, hi) in sorted(ranges.items()) if keys(k) for v in range(lo, hi + 1)]


def advertised(conn: Conn) -> dict[int, tuple[int, int]]:
    """What a connection is offered: ApiVersions v3, asked on it."""
    answer = conn.ask(API_VERSIONS, 3, {"client_software_name": "attacker", "client_software_version": "1"})
    assert answer.error_code == ErrorCode.none
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


# --- the victim's things ----------------------------------------------------------------------------------------

COMMITTED_OFFSET = 9_876_543_210  # an offset no log here reaches: its bytes are the victim's alone
SESSION_TIMEOUT_MS = 600_000  # the victim's group member outlives the test without heartbeats


@dataclass(frozen=True)
class Spelling:
    """The victim's things as the victim names them (its own connection)."""

    topic: str  # three partitions: records, an open transaction's among them, a fetch session on them
    probe: str  # one partition: the victim's idempotent producer writes here after every batch of attacks
    group: str  # a member (never heartbeating, long session) and a committed offset
    txn: str  # a transaction left open
    tag: str  # in every value the victim writes, so the attacker's answers can be searched for them

    @property
    def consumer_group(self) -> str:
        """A KIP-848 consumer group of one member (subscribed to ``topic``, its assignment acknowledged)."""
        return f"{self.group}-848"

    @property
    def share_group(self) -> str:
        """A KIP-932 share group of one member (subscribed to ``topic``)."""
        return f"{self.group}-share"


@dataclass
class Planted:
    """What the victim was handed while planting its state: the ids an attacker would want."""

    topic_ids: dict[str, uuid.UUID]
    session: list[int]  # [fetch session id, its next epoch]
    idempotent: tuple[int, int]  # producer id, epoch
    sequence: int  # the idempotent producer's next sequence (and the probe partition's next offset)
    transactional: tuple[int, int]
    member_id: str
    generation: int
    values: tuple[bytes, ...]  # every record value and opaque group bytes the victim wrote
    consumer: tuple[str, int] = ("", 0)  # the KIP-848 member: id, epoch
    share: tuple[str, int] = ("", 0)  # the share group member: id, epoch
    share_session_epoch: int | None = None  # its share session's next epoch (None: ShareFetch not offered)

    def member_ids(self) -> tuple[str, ...]:
        """Every group member id the victim holds (classic, KIP-848, share)."""
        return self.member_id, self.consumer[0], self.share[0]


def secrets_of(n: Spelling, planted: Planted, labelled: dict[str, str | bytes]) -> Secrets:
    """What of the victim's state an answer to the attacker must never hold: its names as ``n`` spells them,
    its ids and bytes, and ``labelled`` (what else the test's victim has: users, principals, prefixes)."""
    secrets = Secrets()
    named = {"topic": n.topic, "probe topic": n.probe, "group": n.group, "txn": n.txn,
             "client id": f"client-{n.tag}", "commit metadata": f"commit-meta-{n.tag}", "config value": "86400123",
             "group protocol type": protocol_type(n), **labelled}
    named |= {f"member id {i}": member_id for i, member_id in enumerate(planted.member_ids())}
    for label, value in named.items():
        secrets.add(label, value)
    for name, topic_id in planted.topic_ids.items():
        secrets.add(f"topic id of {name}", topic_id)
    for i, value in enumerate(planted.values):
        secrets.add(f"record or group bytes {i}", value)
    secrets.add_number("producer_id", planted.idempotent[0])
    secrets.add_number("producer_id", planted.transactional[0])
    secrets.add_number("session_id", planted.session[0])
    secrets.add_number("committed_offset", COMMITTED_OFFSET)
    return secrets


def plant(b: Conn, n: Spelling) -> Planted:
    """The victim's state, made through its own connection: topics with records (one in an open transaction),
    an idempotent producer, a group member with a committed offset, a fetch session."""
    created = b.ask(19, 5, {"timeout": 15000, "topics": [
        {"name": n.topic, "num_partitions": 3, "replication_factor": 1,
         "configs": [{"name": "retention.ms", "value": "86400123"}]},
        {"name": n.probe, "num_partitions": 1, "replication_factor": 1}]})
    assert not errors_of(created), created
    metadata = b.ask(3, 12, {"topics": [{"name": n.topic}, {"name": n.probe}], "allow_auto_topic_creation": False})
    topic_ids = {t.name: t.topic_id for t in metadata.topics}
    values = tuple(f"record-{p}-{n.tag}".encode() for p in range(3)) + (f"open-txn-{n.tag}".encode(),)
    for p in range(3):
        _produce(b, n.topic, p, build_batch([(None, values[p], ())], base_timestamp=0))
    transactional = _open_transaction(b, n, values[3])
    idempotent = b.ask(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                               "producer_epoch": -1})
    idempotent = (idempotent.producer_id, idempotent.producer_epoch)
    member_id, generation, group_values = _join(b, n)
    committed = b.ask(8, 7, {"group_id": n.group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                             "group_instance_id": None, "topics": [{"name": n.topic, "partitions": [
                                 {"partition_index": 0, "committed_offset": COMMITTED_OFFSET,
                                  "committed_leader_epoch": -1, "committed_metadata": f"commit-meta-{n.tag}"}]}]})
    assert not errors_of(committed), committed
    session = b.ask(1, 12, _fetch(n.topic, 0, 0, 3))
    assert session.error_code == ErrorCode.none and session.session_id, session
    planted = Planted(topic_ids, [session.session_id, 1], idempotent, 0, transactional, member_id, generation,
                      values + group_values, _consumer_member(b, n), _share_member(b, n))
    if SHARE_FETCH in advertised(b):  # a share session that acquired the topic's records
        opened = b.ask(SHARE_FETCH, 1, share_fetch(n.share_group, planted.share[0], 0, (topic_ids[n.topic],)))
        assert opened.error_code == ErrorCode.none, opened
        planted.share_session_epoch = 1
    assert not probe(b, n, planted)
    return planted


def _produce(b: Conn, topic: str, partition: int, batch: bytes, transactional_id: str | None = None) -> Any:
    answer = b.ask(0, 9, {"transactional_id": transactional_id, "acks": -1, "timeout": 15000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return answer.responses[0].partition_responses[0]


def _open_transaction(b: Conn, n: Spelling, value: bytes) -> tuple[int, int]:
    init = b.ask(22, 4, {"transactional_id": n.txn, "transaction_timeout": SESSION_TIMEOUT_MS, "producer_id": -1,
                         "producer_epoch": -1})
    assert init.error_code == ErrorCode.none, init
    added = b.ask(24, 3, {"v3_and_below_transactional_id": n.txn, "v3_and_below_producer_id": init.producer_id,
                          "v3_and_below_producer_epoch": init.producer_epoch,
                          "v3_and_below_topics": [{"name": n.topic, "partitions": [1]}]})
    assert not errors_of(added), added
    batch = build_batch([(None, value, ())], base_timestamp=0, producer_id=init.producer_id,
                        producer_epoch=init.producer_epoch, base_sequence=0, is_transactional=True)
    produced = _produce(b, n.topic, 1, batch, n.txn)
    assert produced.error_code == ErrorCode.none, produced
    return init.producer_id, init.producer_epoch


def _join(b: Conn, n: Spelling) -> tuple[str, int, tuple[bytes, ...]]:
    """A classic consumer group of one member (the leader, its assignment synced): its id and generation."""
    metadata, assignment = f"member-metadata-{n.tag}".encode(), f"assignment-{n.tag}".encode()
    join = {"group_id": n.group, "session_timeout": SESSION_TIMEOUT_MS, "rebalance_timeout": 60000,
            "member_id": "", "group_instance_id": None, "protocol_type": protocol_type(n),
            "protocols": [{"name": "range", "metadata": metadata}]}
    joined = b.ask(11, 5, join)
    if joined.error_code == ErrorCode.member_id_required:
        joined = b.ask(11, 5, {**join, "member_id": joined.member_id})
    assert joined.error_code == ErrorCode.none, joined
    synced = b.ask(14, 3, {"group_id": n.group, "generation_id": joined.generation_id, "member_id": joined.member_id,
                           "group_instance_id": None, "assignments": [
                               {"member_id": joined.member_id, "assignment": assignment}]})
    assert synced.error_code == ErrorCode.none, synced
    return joined.member_id, joined.generation_id, (metadata, assignment)


def heartbeat_request(api_key: int, group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    """A ConsumerGroupHeartbeat (68) or ShareGroupHeartbeat (76) v1 request; what is not given is left as it is
    (null, -1)."""
    if api_key == 68:
        fields = {"instance_id": None, "rebalance_timeout": -1, "subscribed_topic_regex": None,
                  "server_assignor": None, "topic_partitions": None, **fields}
    return build(request_type(api_key, 1), {"group_id": group, "member_id": member_id, "member_epoch": epoch,
                                            "rack_id": None, "subscribed_topic_names": None, **fields})


def _heartbeat(b: Conn, api_key: int, n: Spelling, member_id: str, epoch: int, **fields: Any) -> Any:
    """A heartbeat of the victim's KIP-848 (68) or share (76) group member."""
    group = n.consumer_group if api_key == 68 else n.share_group
    return b.ask(api_key, 1, heartbeat_request(api_key, group, member_id, epoch, **fields))


def _settle(b: Conn, api_key: int, n: Spelling, first: dict) -> tuple[str, int]:
    """Join with a member id of the client's own (KIP-848, KIP-932) and heartbeat, acknowledging each
    assignment (KIP-848: owned partitions), until the epoch holds: the member's (id, epoch)."""
    member_id, epoch, owned = uuid.uuid4().hex, 0, []
    answer = _heartbeat(b, api_key, n, member_id, 0, **first)
    for _ in range(20):
        assert answer.error_code == ErrorCode.none, answer
        if answer.assignment is not None:
            owned = [{"topic_id": t.topic_id, "partitions": list(t.partitions)}
                     for t in answer.assignment.topic_partitions]
        settled = answer.member_epoch == epoch and answer.assignment is None
        epoch = answer.member_epoch
        if settled and owned:
            return member_id, epoch
        answer = _heartbeat(b, api_key, n, member_id, epoch, **({"topic_partitions": owned} if api_key == 68 else {}))
    raise AssertionError(f"the victim's member of {api_key} did not settle: {answer}")


def _consumer_member(b: Conn, n: Spelling) -> tuple[str, int]:
    return _settle(b, 68, n, {"rebalance_timeout": 60000, "subscribed_topic_names": [n.topic], "topic_partitions": []})


def _share_member(b: Conn, n: Spelling) -> tuple[str, int]:
    return _settle(b, 76, n, {"subscribed_topic_names": [n.topic]})


def share_fetch(group: str, member_id: str, epoch: int, topic_ids: tuple[uuid.UUID, ...] = ()) -> dict:
    """A ShareFetch v1 of partitions 0-2 of ``topic_ids`` (none: an incremental one), acknowledging nothing."""
    topics = [{"topic_id": topic_id, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                                   for p in range(3)]} for topic_id in topic_ids]
    return {"group_id": group, "member_id": member_id, "share_session_epoch": epoch, "max_wait": 0,
            "min_bytes": 0, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100, "topics": topics,
            "forgotten_topics_data": []}


def protocol_type(n: Spelling) -> str:
    """The victim group's protocol type: listed with the group, never by a look-alike of the attacker's."""
    return f"proto-{n.tag}"


def _fetch(topic: str, session_id: int, epoch: int, partitions: int) -> dict:
    topics = [{"topic": topic, "partitions": [
        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "log_start_offset": -1,
         "current_leader_epoch": -1} for p in range(partitions)]}] if partitions else []
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch, "topics": topics, "forgotten_topics_data": [],
            "rack_id": ""}


def probe(b: Conn, n: Spelling, planted: Planted) -> list[str]:
    """What the victim notices of the attacks through its own connection: its fetch session goes on at its next
    epoch, its idempotent producer's next batch is appended where it expects (nobody wrote in its sequence),
    its group member is still in its generation."""
    problems = []
    session_id, epoch = planted.session
    fetched = b.ask(1, 12, _fetch(n.topic, session_id, epoch, 0))
    if (fetched.error_code, fetched.session_id) != (ErrorCode.none, session_id):
        problems.append(f"the victim's fetch session {session_id} at epoch {epoch}: {fetched}")
    else:
        planted.session[1] = epoch + 1
    producer_id, producer_epoch = planted.idempotent
    batch = build_batch([(None, f"probe-{planted.sequence}-{n.tag}".encode(), ())], base_timestamp=0,
                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=planted.sequence)
    produced = _produce(b, n.probe, 0, batch)
    if (produced.error_code, produced.base_offset) != (ErrorCode.none, planted.sequence):
        problems.append(f"the victim's producer {producer_id} at sequence {planted.sequence}: {produced}")
    else:
        planted.sequence += 1
    beat = b.ask(12, 4, {"group_id": n.group, "generation_id": planted.generation, "member_id": planted.member_id,
                         "group_instance_id": None})
    if beat.error_code != ErrorCode.none:
        problems.append(f"the victim's group member {planted.member_id}: {beat}")
    for api_key, (member_id, epoch) in ((68, planted.consumer), (76, planted.share)):
        beat = _heartbeat(b, api_key, n, member_id, epoch)
        if (beat.error_code, beat.member_epoch) != (ErrorCode.none, epoch):
            problems.append(f"the victim's member {member_id} at epoch {epoch}: {beat}")
    if planted.share_session_epoch is not None:
        epoch = planted.share_session_epoch
        fetched = b.ask(SHARE_FETCH, 1, share_fetch(n.share_group, planted.share[0], epoch))
        if fetched.error_code != ErrorCode.none:
            problems.append(f"the victim's share session at epoch {epoch}: {fetched}")
        else:
            planted.share_session_epoch = epoch + 1
    return problems
