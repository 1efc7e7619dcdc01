"""The Fetch handler's answer is the same, chunk for chunk, as the general path's (kio decoding, result objects,
the general encoder) for the same request on the same broker: random partition sets of every version, at their
end or not, unknown topics and partitions, both isolation levels, duplicates. (Sessions are the general path's: each answer would get its own session id.)"""

from __future__ import annotations

import random
import struct
import types
import uuid

import trio
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from logway.gateway.apis import fetch
from logway.gateway.context import RequestContext
from logway.wire.protocol import RequestHeader, build, decode_body, encode_body, request_type

TOPICS = {"wide-a": 12, "wide-b": 5}


def random_request(rng: random.Random, version: int, ids: dict[str, object], ends: dict[str, list[int]]) -> dict:
    topics = []
    for _ in range(rng.randrange(0, 4)):
        name = rng.choice([*TOPICS, "no-such-topic"])
        count = TOPICS.get(name, 3)
        parts = []
        for _ in range(rng.randrange(0, 8)):
            p = rng.randrange(-1, count + 2)
            end = ends[name][p] if name in ends and 0 <= p < count else 0
            offset = end if rng.random() < 0.8 else rng.choice([0, end - 1, end + 5])
            parts.append({"partition": p, "fetch_offset": offset, "partition_max_bytes": rng.choice([0, 10, 1 << 20]),
                          "current_leader_epoch": -1, "log_start_offset": -1})
        topics.append({"topic": name, "topic_id": ids.get(name) or ids["unknown"], "partitions": parts})
    return {"replica_id": -1, "max_wait": 0, "min_bytes": rng.choice([0, 1, 1 << 20]),
            "max_bytes": rng.choice([1, 1 << 20]), "isolation_level": rng.randrange(2),
            "session_id": 0, "session_epoch": -1, "topics": topics, "rack_id": ""}


def all_at_end(data: dict, ends: dict[str, list[int]]) -> bool:
    """Every partition asked for exists and is asked at its end: the fast path's case."""
    return all(t["topic"] in ends and 0 <= p["partition"] < len(ends[t["topic"]])
               and p["fetch_offset"] == ends[t["topic"]][p["partition"]] for t in data["topics"] for p in t["partitions"])


def test_answers_are_the_general_paths_answers(logway):
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(name, n, 1) for name, n in TOPICS.items()])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    rng = random.Random(15)
    for name, n in TOPICS.items():
        for p in range(n):
            for _ in range(rng.randrange(0, 4)):
                producer.send(name, b"v" * rng.randrange(1, 50), partition=p).get(timeout=10)
    producer.close()
    broker = logway.broker
    ids = {name: broker.logs.topics[name].topic_id for name in TOPICS}
    ids["unknown"] = uuid.UUID(int=12345)
    ends = {name: [plog.high_watermark for plog in broker.logs.topics[name].partitions] for name in TOPICS}
    connection = types.SimpleNamespace(realm=broker.realm, principal="User:ANONYMOUS", peer="127.0.0.1:1",
                                       listener=types.SimpleNamespace(name="PLAINTEXT"))

    async def both(version: int, data: dict, correlation_id: int) -> tuple[list, list]:
        body = encode_body(build(request_type(1, version), data))
        head = struct.pack(">hhih", 1, version, correlation_id, 1) + b"x" + (b"\x00" if version >= 12 else b"")
        frame = memoryview(bytearray(head + body))
        ctx = RequestContext(connection, broker, RequestHeader(1, version, correlation_id, "x"), frame, len(head))
        new = await fetch.handle(ctx, None)
        old = await fetch._serve(ctx, decode_body(1, version, bytes(frame), len(head)), None, None)
        return new, old

    fast = 0
    for i in range(300):
        version = rng.randrange(4, 18)
        data = random_request(rng, version, ids, ends)
        new, old = trio.from_thread.run(both, version, data, i, trio_token=logway._token)
        assert new == old, (version, data)
        fast += all_at_end(data, ends)
    assert fast > 30  # the comparison covered the fast path, not only the general one


def test_quiet_incremental_sessions_answer_as_the_full_pass(logway):
    """Two sessions over the same partitions get the same requests; one is answered with the quiet check
    (nothing new anywhere: no reads), the other by the full pass; the answers differ only in the session id."""
    admin = KafkaAdminClient(bootstrap_servers=logway.bootstrap)
    admin.create_topics([NewTopic(name, n, 1) for name, n in TOPICS.items()])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=logway.bootstrap)
    broker = logway.broker
    ids = {name: broker.logs.topics[name].topic_id for name in TOPICS}
    connection = types.SimpleNamespace(realm=broker.realm, principal="User:ANONYMOUS", peer="127.0.0.1:1",
                                       listener=types.SimpleNamespace(name="PLAINTEXT"))
    rng = random.Random(227)

    async def send(version: int, data: dict, correlation_id: int, quiet_check: bool) -> list:
        body = encode_body(build(request_type(1, version), data))
        head = struct.pack(">hhih", 1, version, correlation_id, 1) + b"x" + (b"\x00" if version >= 12 else b"")
        frame = memoryview(bytearray(head + body))
        ctx = RequestContext(connection, broker, RequestHeader(1, version, correlation_id, "x"), frame, len(head))
        return await fetch._serve(ctx, decode_body(1, version, bytes(frame), len(head)), None, None,
                                  quiet_check=quiet_check)

    def request(session_id: int, epoch: int, changed: dict[tuple[str, int], int]) -> dict:
        topics = {}
        for (name, p), offset in changed.items():
            topics.setdefault(name, []).append({"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 16,
                                                "current_leader_epoch": -1, "log_start_offset": -1})
        return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 1,
                "session_id": session_id, "session_epoch": epoch, "rack_id": "",
                "topics": [{"topic": n, "topic_id": ids[n], "partitions": ps} for n, ps in topics.items()]}

    quiet = 0
    for version in (7, 11, 12, 13, 17):
        every = {(name, p): 0 for name, n in TOPICS.items() for p in range(n)}
        offset_at = 15 if version >= 12 else 14  # size, correlation id, (tagged fields), throttle, error code
        sessions = []
        for check in (True, False):
            first = trio.from_thread.run(send, version, request(0, 0, every), 1, check, trio_token=logway._token)
            sessions.append(struct.unpack_from(">i", first[0], offset_at)[0])
        at = dict(every)  # the client's fetch offsets: it moves to the end of partitions that had records
        for epoch in range(1, 40):
            if rng.random() < 0.15:
                name = rng.choice(list(TOPICS))
                producer.send(name, b"v", partition=rng.randrange(TOPICS[name])).get(timeout=10)
            ends = {(name, p): plog.high_watermark for name in TOPICS
                    for p, plog in enumerate(broker.logs.topics[name].partitions)}
            changed = {key: ends[key] for key in at if at[key] != ends[key] and rng.random() < 0.7}
            if rng.random() < 0.1:
                changed[rng.choice(list(at))] = 0  # a seek back
            at.update(changed)
            answers = [trio.from_thread.run(send, version, request(sid, epoch, changed), epoch, check,
                                            trio_token=logway._token)
                       for sid, check in zip(sessions, (True, False), strict=True)]
            with_quiet, full = answers
            head = full[0]
            full[0] = head[:offset_at] + with_quiet[0][offset_at : offset_at + 4] + head[offset_at + 4 :]
            assert with_quiet == full, (version, epoch)
            quiet += len(b"".join(c for c in with_quiet if isinstance(c, bytes))) < 30
    producer.close()
    assert quiet > 20  # the quiet answer (no partition) was compared, not only the full one
