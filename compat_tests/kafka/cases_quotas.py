"""Conformance cases of the client quota APIs: DescribeClientQuotas (48) and AlterClientQuotas (49).

Registered into cases.CASES (cases.py imports this module at its end). Each case names its entities after the
case's topic name, so the brokers' other quotas never show in its answers; answers are turned into sorted plain
data here, since both APIs answer in the order of a Java HashMap (entities, their parts, their values).
"""

from __future__ import annotations

import time
from typing import Any

from compat_tests.kafka.cases import Steps, case
from compat_tests.kafka.sides import Side

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _entity(**parts: str | None) -> list[dict[str, Any]]:
    """An entity: user=..., client_id=..., ip=... (None: the <default> one)."""
    return [{"entity_type": kind.replace("_", "-"), "entity_name": name} for kind, name in parts.items()]


def _op(key: str, value: float | None = None) -> dict[str, Any]:
    return {"key": key, "value": 0.0 if value is None else value, "remove": value is None}


def _alter(side: Side, v: int, entries: list[tuple[list, list]], validate_only: bool = False) -> list:
    resp = side.call(49, v, {"entries": [{"entity": e, "ops": ops} for e, ops in entries],
                             "validate_only": validate_only})
    return sorted((sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity), entry.error_code.name)
                  for entry in resp.entries)


def _describe(side: Side, v: int, components: list[tuple[str, int, str | None]], strict: bool = False,
              mine: str | None = None, values: int | None = None) -> Any:
    """The entries the filter matches (those naming ``mine`` only, when given), sorted, or the error. With
    ``values``, asked again (up to 10 s) until they hold that many quotas in all: Kafka's brokers learn an
    alteration from the controller's metadata log a few milliseconds after its answer."""
    deadline = time.monotonic() + 10
    while True:
        resp = side.call(48, v, {"components": [{"entity_type": t, "match_type": m, "match": n}
                                                for t, m, n in components], "strict": strict})
        if resp.entries is None:
            return {"error_code": resp.error_code.name, "entries": None}
        entries = []
        for entry in resp.entries:
            entity = sorted((e.entity_type, e.entity_name or "<default>") for e in entry.entity)
            if mine is None or any(name.startswith(mine) for _, name in entity):
                entries.append((entity, sorted((value.key, value.value) for value in entry.values)))
        if values is None or sum(len(e[1]) for e in entries) == values or time.monotonic() > deadline:
            return {"error_code": resp.error_code.name, "entries": sorted(entries)}
        time.sleep(0.02)


@case(49, "set, change and remove a client id's quotas")
def alter_client_quotas(side: Side, v: int, topic: str) -> Steps:
    me = _entity(client_id=topic)
    mine = [("client-id", EXACT, topic)]
    steps = {"set": _alter(side, v, [(me, [_op("producer_byte_rate", 1048576), _op("consumer_byte_rate", 2097152),
                                           _op("request_percentage", 12.5), _op("controller_mutation_rate", 3.5)])])}
    steps["described"] = _describe(side, v, mine, values=4)
    steps["changed"] = _alter(side, v, [(me, [_op("producer_byte_rate", 4096), _op("consumer_byte_rate")])])
    steps["described again"] = _describe(side, v, mine, values=3)
    steps["removed"] = _alter(side, v, [(me, [_op("producer_byte_rate"), _op("request_percentage"),
                                              _op("controller_mutation_rate")])])
    steps["gone"] = _describe(side, v, mine, values=0)
    return steps


@case(49, "validate_only changes nothing")
def alter_client_quotas_validate_only(side: Side, v: int, topic: str) -> Steps:
    me = _entity(user=topic)
    return {"validated": _alter(side, v, [(me, [_op("producer_byte_rate", 1024)])], validate_only=True),
            "described": _describe(side, v, [("user", EXACT, topic)])}


@case(49, "users, client ids, their defaults and IPs")
def alter_client_quotas_entities(side: Side, v: int, topic: str) -> Steps:
    entries = [
        (_entity(user=topic, client_id=topic + "-app"), [_op("producer_byte_rate", 100)]),
        (_entity(user=topic, client_id=None), [_op("consumer_byte_rate", 200)]),
        (_entity(user=None, client_id=topic + "-app"), [_op("request_percentage", 300)]),
        (_entity(ip="10.9.8.7"), [_op("connection_creation_rate", 400)]),
    ]
    steps = {"set": _alter(side, v, entries)}
    steps["user"] = _describe(side, v, [("user", EXACT, topic)], mine=topic, values=2)
    steps["user, strict"] = _describe(side, v, [("user", EXACT, topic)], strict=True, mine=topic)
    steps["default user, any client id"] = _describe(side, v, [("user", DEFAULT, None), ("client-id", SPECIFIED, None)],
                                                     mine=topic)
    steps["ip"] = _describe(side, v, [("ip", EXACT, "10.9.8.7")])
    steps["cleared"] = _alter(side, v, [(e, [_op(op["key"])]) for e, [op] in entries])
    return steps


@case(49, "refused entities and values")
def alter_client_quotas_errors(side: Side, v: int, topic: str) -> Steps:
    entries = [
        (_entity(client_id=topic + "-fraction"), [_op("producer_byte_rate", 1.5)]),
        (_entity(client_id=topic + "-zero"), [_op("consumer_byte_rate", 0)]),
        (_entity(client_id=topic + "-negative"), [_op("request_percentage", -1)]),
        (_entity(client_id=topic + "-unknown"), [_op("fetch_byte_rate", 10)]),
        (_entity(client_id=topic + "-ipkey"), [_op("connection_creation_rate", 10)]),
        (_entity(user=topic + "-ip", ip="10.0.0.1"), [_op("connection_creation_rate", 10)]),
        (_entity(ip="10.0.0.2"), [_op("producer_byte_rate", 10)]),
        (_entity(ip="10.0.0.3"), [_op("connection_creation_rate", 2.5)]),
        (_entity(user=""), [_op("producer_byte_rate", 10)]),
        ([], [_op("producer_byte_rate", 10)]),
        ([{"entity_type": "group", "entity_name": topic}], [_op("producer_byte_rate", 10)]),
        (_entity(client_id=topic + "-dupkey"), [_op("producer_byte_rate", 10), _op("producer_byte_rate", 20)]),
        (_entity(client_id=topic + "-twice"), [_op("producer_byte_rate", 10)]),
        (_entity(client_id=topic + "-twice"), [_op("consumer_byte_rate", 10)]),
        (_entity(client_id=topic + "-ok"), [_op("producer_byte_rate", 9.0)]),
    ]
    return {"results": _alter(side, v, entries),
            "stored": _describe(side, v, [("client-id", SPECIFIED, None)], mine=topic, values=2)}


@case(48, "filters: exact, default, any name, strict")
def describe_client_quotas(side: Side, v: int, topic: str) -> Steps:
    _alter(side, 1, [
        (_entity(user=topic), [_op("producer_byte_rate", 1000)]),
        (_entity(user=topic, client_id=topic + "-a"), [_op("producer_byte_rate", 2000)]),
        (_entity(client_id=topic + "-a"), [_op("consumer_byte_rate", 3000)]),
        (_entity(client_id=None), [_op("request_percentage", 77)]),
    ])
    return {
        "exact user": _describe(side, v, [("user", EXACT, topic)], values=2),
        "exact user, strict": _describe(side, v, [("user", EXACT, topic)], strict=True),
        "exact client id": _describe(side, v, [("client-id", EXACT, topic + "-a")]),
        "user and client id": _describe(side, v, [("user", EXACT, topic), ("client-id", EXACT, topic + "-a")]),
        "any client id of the user": _describe(side, v, [("user", EXACT, topic), ("client-id", SPECIFIED, None)]),
        "default client id": _describe(side, v, [("client-id", DEFAULT, None)], strict=True),
        "unknown name": _describe(side, v, [("user", EXACT, topic + "-nobody")]),
    }


@case(48, "refused filters")
def describe_client_quotas_errors(side: Side, v: int, topic: str) -> Steps:
    return {
        "type twice": _describe(side, v, [("user", EXACT, topic), ("user", SPECIFIED, None)]),
        "unknown type": _describe(side, v, [("group", SPECIFIED, None)]),
        "empty type": _describe(side, v, [("", SPECIFIED, None)]),
        "exact without a name": _describe(side, v, [("user", EXACT, None)]),
        "default with a name": _describe(side, v, [("user", DEFAULT, topic)]),
        "any with a name": _describe(side, v, [("client-id", SPECIFIED, topic)]),
        "unknown match type": _describe(side, v, [("user", 7, None)]),
        "ip with user": _describe(side, v, [("ip", SPECIFIED, None), ("user", SPECIFIED, None)]),
    }
