"""The sweep of issue 24's standing adversarial test, for the proxy's tenants and the broker's principals alike: every
API key and version offered to the attacker, each way of naming the victim's things, then malformed frames; after
each API's requests the victim's side is checked (tests/gateway/victim.py)."""

from __future__ import annotations

import os
import random
import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.index import schema_name_map
from kio.schema.index import api_key_map

from logway.wire.protocol import build, encode_body, is_flexible, request_type
from tests.gateway.adversary import Target, build_request, request_frame
from tests.gateway.victim import (
    SHARE_FETCH,
    Closed,
    Conn,
    Holdings,
    Planted,
    Secrets,
    Spelling,
    advertised,
    changes,
    decode_response,
    each_version,
    heartbeat_request,
    leaks,
    probe,
    share_fetch,
    state,
)

SEED = int(os.environ.get("LOGWAY_ADVERSARY_SEED", "0"))
# Lengths that lie: past the frame, negative, varints that do not end, zero (bytes overwritten in a body).
EVIL = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80",
        b"\x7f\xff", b"\xff\xfe", b"\x00\x00")
# Frames whose size prefix lies: negative, empty, shorter than a header, past socket.request.max.bytes.
BAD_SIZES = (b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x00\x00\x00\x03abc", b"\x7f\xff\xff\xffxx",
             b"\x80\x00\x00\x00", b"\x00\x00\x00\x08\x00\x03\x00\x0c\x00\x00\x00\x01")


@dataclass
class Arena:
    """The attacker's way in and the victim's things (made by the proxy's and the broker's tests)."""

    b: Conn  # the victim's own connection
    spelling: Spelling
    planted: Planted
    secrets: Secrets
    held: Holdings
    ways: dict[str, Target]
    log_paths: tuple[Path, ...]
    attacker_port: int
    attacker_user: tuple[str, str]
    watch_port: int
    watch_user: tuple[str, str] | None = None
    own_group: str = "attackers-own"  # a group name the attacker may use (its members subscribe to the victim's)
    mechanism: str = "PLAIN"  # the attacker's and the watcher's SASL mechanism
    log_offsets: dict[Path, int] = field(default_factory=dict)

    def attacker(self) -> Conn:
        return Conn(self.attacker_port, self.attacker_user, mechanism=self.mechanism)

    def watch(self) -> Conn:
        """A connection that sees the victim's things with every right, by their full names."""
        return Conn(self.watch_port, self.watch_user, client_id="watch", mechanism=self.mechanism)

    def attackers_own(self) -> set[str]:
        """The attacker's own names as it sees them (subclasses: from where they are kept)."""
        raise NotImplementedError

    def new_log_lines(self) -> list[str]:
        """Tracebacks and internal errors logged since the last call."""
        found = []
        for path in self.log_paths:
            text = path.read_text(errors="replace")
            new, self.log_offsets[path] = text[self.log_offsets.get(path, 0):], len(text)
            found += [f"{path.name}: {line}" for line in new.splitlines()
                      if "Traceback" in line or "internal error" in line]
        return found

    def aftermath(self, before: dict, watch: Conn) -> tuple[list[str], dict]:
        """What the victim and the logs show after a batch of attacks, and the victim's state now (the next
        batch's before)."""
        problems = probe(self.b, self.spelling, self.planted)
        after = state(watch, self.held)
        return problems + changes(before, after) + self.new_log_lines(), after


def kio_versions(api_key: int) -> list[int]:
    return sorted(schema_name_map[api_key_map[api_key]])


def not_offered(offered: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Every API key kio knows that is not ``offered``: its lowest and highest versions."""
    return {k: (v[0], v[-1]) for k in api_key_map if k not in offered and (v := kio_versions(k))}


def attack(arena: Arena, a: Conn, api_key: int, version: int, way: str, closes: Counter) -> list[str]:
    """One request of ``way``: what of the victim its answer holds (or why it could not be read)."""
    rng = random.Random(f"{SEED}:{api_key}:{version}:{way}")
    body = build_request(api_key, version, arena.ways[way], rng)
    try:
        frame, payload = a.exchange(api_key, version, body)
    except Closed:
        closes[(api_key, version)] += 1
        return []
    where = f"{api_key_map[api_key]} v{version} ({way})"
    try:
        response = decode_response(api_key, version, payload)
    except Exception as exc:  # noqa: BLE001 - an answer the client cannot read is a finding
        return [f"{where}: answer does not decode: {exc!r}"]
    if os.environ.get("LOGWAY_ADVERSARY_LOG"):  # every exchange, to read what the attacker got
        with open(os.environ["LOGWAY_ADVERSARY_LOG"], "a") as out:
            out.write(f"{where}\n  {body!r}\n  {response!r}\n")
    return [f"{where}: leaked {leak}" for leak in leaks(arena.secrets, body, frame, payload, response,
                                                       arena.attackers_own)]


def sweep(arena: Arena) -> tuple[list[str], str]:
    """Every API key and version offered to the attacker, in every way, and every API key kio knows that is not
    offered (its lowest and highest versions, one way): the findings, and a line saying what was sent."""
    a, watch = arena.attacker(), arena.watch()
    offered = advertised(a)
    others = not_offered(offered)
    findings: list[str] = []
    closes: Counter = Counter()
    sent = 0
    before = state(watch, arena.held)
    # Each offered API, then the victim checked; the keys not offered (refused unread) all, then checked once.
    batches = [[(k, v, way) for _, v in each_version({k: offered[k]}) for way in arena.ways] for k in sorted(offered)]
    batches.append([(k, v, "names") for k in sorted(others) for v in sorted(set(others[k]))])
    for batch in batches:
        for api_key, version, way in batch:
            findings += attack(arena, a, api_key, version, way, closes)
        sent += len(batch)
        problems, before = arena.aftermath(before, watch)
        where = api_key_map[batch[0][0]] if len(batch) and batch[0][0] in offered else "the keys not offered"
        findings += [f"after {where}: {p}" for p in problems]
    always_closed = sorted(api_key_map[k] for k in offered
                           if all(closes[(k, v)] == len(arena.ways) for _, v in each_version({k: offered[k]})))
    if always_closed:
        findings.append(f"advertised, yet every request closed the connection: {always_closed}")
    summary = (f"{sent} requests: {len(offered)} APIs offered, {len(others)} not; the connection closed on "
               f"{sum(closes.values())} ({', '.join(f'{api_key_map[k]} v{v}' for k, v in sorted(closes))})")
    return findings, summary


def malformed_frames(api_key: int, version: int, frame: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    """A request frame broken three ways: its body cut short, a length in it lying, junk after it (each with a
    size prefix that matches what is sent)."""
    payload = frame[4:]
    (client_len,) = struct.unpack_from(">h", payload, 8)
    header_end = 10 + client_len + (1 if is_flexible(api_key, version) else 0)
    header, body = payload[:header_end], payload[header_end:]
    pos = rng.randrange(max(1, len(body)))
    evil = EVIL[rng.randrange(len(EVIL))]
    variants = [("cut short", header + body[:pos]),
                ("lying length", header + body[:pos] + evil + body[pos + len(evil):]),
                ("junk after", header + body + rng.randbytes(rng.randrange(1, 64)))]
    return [(name, struct.pack(">i", len(p)) + p) for name, p in variants]


def malformed(arena: Arena) -> list[str]:
    """Broken frames on the attacker's connection, for every API key and version offered (and the lowest and
    highest of every other key kio knows), and frames whose size lies: each answered or the connection closed,
    nothing of the victim in any answer, nothing changed."""
    a, watch = arena.attacker(), arena.watch()
    before = state(watch, arena.held)
    findings = []
    offered = advertised(a)
    others = [(k, v) for k, (lo, hi) in sorted(not_offered(offered).items()) for v in sorted({lo, hi})]
    for api_key, version in each_version(offered) + others:
        rng = random.Random(f"{SEED}:malformed:{api_key}:{version}")
        a.correlation_id += 1
        body = build_request(api_key, version, arena.ways["names"], rng)
        frame = request_frame(api_key, version, body, a.correlation_id)
        for name, broken in malformed_frames(api_key, version, frame, rng):
            findings += _send_broken(arena, a, broken, f"{api_key_map[api_key]} v{version} {name}", api_key, version)
    for i, broken in enumerate(BAD_SIZES):
        findings += _send_broken(arena, a, broken, f"bad size prefix {i}", -1, -1)
    return findings + [f"after malformed frames: {p}" for p in arena.aftermath(before, watch)[0]]


def _send_broken(arena: Arena, a: Conn, frame: bytes, where: str, api_key: int, version: int) -> list[str]:
    """Send a broken frame: an answer (read as the API's if it reads so) holds nothing of the victim."""
    try:
        payload = a.send_frame(frame)
    except Closed:
        return []
    a.close()  # what follows a broken frame on the stream is not worth reading
    try:
        response = decode_response(api_key, version, payload)
    except Exception:  # noqa: BLE001 - whatever it is, its bytes are searched all the same
        response = None
    return [f"{where}: leaked {leak}" for leak in leaks(arena.secrets, None, frame, payload, response,
                                                       arena.attackers_own)]


def subscriptions(arena: Arena) -> list[str]:
    """Members of the attacker's own KIP-848 consumer groups and share groups (where offered) subscribing to the
    victim's topics by name and by every pattern of the "regexes" way: nothing of the victim in their
    heartbeats' answers (assignments: topic ids) or in their groups' descriptions (a regex resolves only to
    topics the member may describe, a tenant's only to its own), nothing of the victim changed."""
    a, watch = arena.attacker(), arena.watch()
    before = state(watch, arena.held)
    offered = advertised(a)
    subscribe = [{"subscribed_topic_names": list(arena.ways["names"].topics)}]
    subscribe += [{"subscribed_topic_regex": regex} for regex in arena.ways["regexes"].regexes]
    findings = []
    for api_key, describe in ((68, 69), (76, 77)):
        if not all(k in offered and offered[k][0] <= 1 <= offered[k][1] for k in (api_key, describe)):
            continue
        for i, fields in enumerate(subscribe if api_key == 68 else subscribe[:1]):
            group, member = f"{arena.own_group}-{api_key}-{i}", f"attacker-member-{i}"
            joining = {**fields, **({"rebalance_timeout": 60000, "topic_partitions": []} if api_key == 68 else {})}
            join = heartbeat_request(api_key, group, member, 0, **joining)
            answer, found = _checked(arena, a, api_key, join)
            sent = encode_body(join)  # the group's description shows the member's subscription back
            if answer is not None and not answer.error_code:  # again at its epoch: the assignment, resolved
                found += _checked(arena, a, api_key, heartbeat_request(api_key, group, member,
                                                                       answer.member_epoch))[1]
            found += _checked(arena, a, describe, build(request_type(describe, 1), {
                "group_ids": [group], "include_authorized_operations": True}), sent)[1]
            if api_key == 76 and SHARE_FETCH in offered:  # a share session opened on the victim's topic ids
                found += _checked(arena, a, SHARE_FETCH, build(request_type(SHARE_FETCH, 1), share_fetch(
                    group, member, 0, arena.ways["topic ids"].topic_ids)))[1]
            findings += [f"{api_key_map[api_key]} in {group} subscribing to {fields}: {f}" for f in found]
    return findings + [f"after subscriptions: {p}" for p in arena.aftermath(before, watch)[0]]


def _checked(arena: Arena, a: Conn, api_key: int, body: Any, sent: bytes = b"") -> tuple[Any, list[str]]:
    """A v1 request's answer (None if the connection closed) and what of the victim it holds that neither the
    request nor ``sent`` (what the attacker sent before) held."""
    try:
        frame, payload = a.exchange(api_key, 1, body)
    except Closed:
        return None, []
    response = decode_response(api_key, 1, payload)
    return response, leaks(arena.secrets, body, sent + frame, payload, response, arena.attackers_own)
