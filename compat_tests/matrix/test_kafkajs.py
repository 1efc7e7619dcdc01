"""kafkajs against the broker; each test runs one scenario of node/compat.js.

kafkajs compresses with gzip natively and snappy through kafkajs-snappy; lz4/zstd need native add-ons, so
they are not in its cells. kafkajs has no assign(): every consumer joins a group, so its round trip needs
FindCoordinator/JoinGroup/SyncGroup/Heartbeat too.
"""

from __future__ import annotations

import time
from pathlib import Path

from programs import node
from records import assert_exact, expected_offsets, make_records, unique, write_spec

CODECS = ("none", "gzip", "snappy")


def test_admin(bootstrap: str) -> None:
    out = node("admin", bootstrap, unique("js-admin"))
    assert out.facts == {
        "listed": "true",
        "partitions": "3",
        "leaders": "true",
        "config.retention.ms": "3600000",
        "config.cleanup.policy": "compact",
        "cluster.nodes": "1",
        "cluster.id.present": "true",
        "partitions.after": "5",
        "deleted": "true",
    }


def test_roundtrip(bootstrap: str, tmp_path: Path) -> None:
    recs = make_records(240, 6, CODECS)
    out = node("roundtrip", bootstrap, unique("js-rt"), "6", write_spec(tmp_path, "rt", recs))
    assert out.sent == expected_offsets(recs)
    assert_exact(recs, out.records)


def test_idempotent(bootstrap: str, tmp_path: Path) -> None:
    recs = make_records(300, 3, ("gzip",))
    out = node("roundtrip", bootstrap, unique("js-idem"), "3", write_spec(tmp_path, "idem", recs), "idempotent")
    assert out.sent == expected_offsets(recs)
    assert_exact(recs, out.records)


def test_group(bootstrap: str, tmp_path: Path) -> None:
    first, second = make_records(40, 4), make_records(20, 4, start=40)
    out = node("group", bootstrap, unique("js-group"), unique("js-g"),
               write_spec(tmp_path, "first", first), write_spec(tmp_path, "second", second), timeout=150)
    assert int(out.facts["assigned.a"]) > 0 and int(out.facts["assigned.b"]) > 0
    assert int(out.facts["assigned.a"]) + int(out.facts["assigned.b"]) == 4
    phase1 = [g for g in out.records if g.tag in ("a", "b")]
    assert_exact(first, phase1)
    counts = {p: sum(1 for r in first if r.partition == p) for p in range(4)}
    assert {k: int(v) for k, v in out.facts.items() if k.startswith("committed.")} == {
        f"committed.{p}": n for p, n in counts.items()}
    assert_exact(second, [g for g in out.records if g.tag == "c"], counts)


def test_offsets(bootstrap: str) -> None:
    base_ts = (int(time.time()) - 3600) * 1000
    out = node("offsets", bootstrap, unique("js-offsets"), str(base_ts), "10")
    assert [(g.offset, g.value, g.timestamp) for g in out.records] == [
        (i, f"v{i}".encode(), base_ts + i * 1000) for i in range(10)]
    # kafkajs's fetchTopicOffsetsByTimestamp turns Kafka's "no such record" (-1) into the high watermark.
    assert out.facts == {"offsets.0": "0..10", "offsets.1": "0..0", "time.offset": "5", "future.offset": "10"}
