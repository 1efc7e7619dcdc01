"""Expected records for the matrix, the text line format shared with the Java/Node programs, and exact checks.

Line formats (one record per line, space separated, so every language parses them with a split):
  spec:  "codec partition key value headers [timestamp]"
  out:   "REC tag partition offset timestamp key value headers", "SENT partition offset", "FACT key=value"
A bytes field is "=" + hex (so b"" is "="), a null field is "-"; headers are "-" or "name:hex,name:hex".
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Rec:
    """A record to produce, with the partition it is sent to explicitly."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    codec: str = "none"
    timestamp: int = -1


@dataclass(frozen=True)
class Got:
    """A consumed record as a client reported it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    tag: str = ""
    timestamp: int = -1


@dataclass
class Output:
    """What an external client program printed."""

    facts: dict[str, str]
    sent: list[tuple[int, int]]
    records: list[Got]
    steps: list[str]


def unique(prefix: str) -> str:
    """A topic or group name no other test (or earlier run against a long-lived broker) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_records(count: int, partitions: int, codecs: tuple[str, ...] = ("none",), start: int = 0) -> list[Rec]:
    """Deterministic records: keyed and null-keyed, empty/binary/large/null values, headers, spread over partitions.

    Records are split into contiguous runs, one per codec, so each run is produced by its own producer.
    """
    per_codec = -(-count // len(codecs))
    out: list[Rec] = []
    for n in range(count):
        i = n + start
        key = None if i % 4 == 0 else f"key-{i}".encode()
        if i % 13 == 6 and key is not None:  # kafka-python refuses a record with neither key nor value
            value = None
        elif i % 7 == 3:
            value = b""
        elif i % 11 == 5:
            value = (f"large-{i}-".encode() + bytes(range(256))) * 16
        else:
            value = f"value-{i}-".encode() + bytes([i % 256, 0, 255])
        headers: Headers = ()
        if i % 3:
            headers = (("trace", f"t{i}".encode()), ("bin", bytes([i % 256, 0])))
            if i % 6 == 1:
                headers += (("empty", b""),)
        out.append(Rec((i * 7) % partitions, key, value, headers, codecs[n // per_codec]))
    return out


def _hex(b: bytes | None) -> str:
    return "-" if b is None else "=" + b.hex()


def _unhex(field: str) -> bytes | None:
    return None if field == "-" else bytes.fromhex(field[1:])


def _headers_text(headers: Headers) -> str:
    return ",".join(f"{k}:{v.hex()}" for k, v in headers) or "-"


def _headers_parse(field: str) -> Headers:
    if field == "-":
        return ()
    return tuple((k, bytes.fromhex(v)) for k, v in (item.split(":", 1) for item in field.split(",")))


def spec_text(recs: list[Rec]) -> str:
    """The spec file a Java/Node program produces from."""
    lines = []
    for r in recs:
        line = f"{r.codec} {r.partition} {_hex(r.key)} {_hex(r.value)} {_headers_text(r.headers)}"
        if r.timestamp >= 0:
            line += f" {r.timestamp}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_spec(tmp_path: Path, name: str, recs: list[Rec]) -> str:
    """Write the spec file of ``recs`` under ``tmp_path``; its path, for a program's command line."""
    path = tmp_path / f"{name}.spec"
    path.write_text(spec_text(recs))
    return str(path)


def parse_output(text: str) -> Output:
    """Facts, producer acks and consumed records from a Java/Node program's stdout."""
    out = Output({}, [], [], [])
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "FACT":
            key, _, value = rest.partition("=")
            out.facts[key] = value
        elif kind == "SENT":
            p, o = rest.split()
            out.sent.append((int(p), int(o)))
        elif kind == "STEP":
            out.steps.append(rest)
        elif kind == "REC":
            tag, p, o, ts, k, v, h = rest.split(" ")
            out.records.append(Got(int(p), int(o), _unhex(k), _unhex(v), _headers_parse(h), tag, int(ts)))
    return out


def expected_offsets(recs: list[Rec], base: dict[int, int] | None = None) -> list[tuple[int, int]]:
    """(partition, offset) each record gets when appended in order to partitions starting at `base` (default 0)."""
    nxt = defaultdict(int, base or {})
    out = []
    for r in recs:
        out.append((r.partition, nxt[r.partition]))
        nxt[r.partition] += 1
    return out


def _view(partition: int, offset: int, key: bytes | None, value: bytes | None, headers: Headers) -> tuple:
    return (partition, offset, key, value, headers)


def assert_exact(expected: list[Rec], got: list[Got], base: dict[int, int] | None = None) -> None:
    """Every expected record exactly once at its offset, in order per partition, and nothing else."""
    want = defaultdict(list)
    for r, (p, o) in zip(expected, expected_offsets(expected, base), strict=True):
        want[p].append(_view(p, o, r.key, r.value, r.headers))
    have = defaultdict(list)
    for g in got:
        have[g.partition].append(_view(g.partition, g.offset, g.key, g.value, g.headers))
    assert sorted(have) == sorted(want), f"partitions with records: got {sorted(have)}, want {sorted(want)}"
    for p in sorted(want):
        assert have[p] == want[p], _first_difference(p, have[p], want[p])


def _first_difference(partition: int, have: list[tuple], want: list[tuple]) -> str:
    for i, (h, w) in enumerate(zip(have, want, strict=False)):
        if h != w:
            return f"partition {partition} record #{i}: got {h!r:.300}, want {w!r:.300}"
    return f"partition {partition}: got {len(have)} records, want {len(want)}"
