"""The Java client (kafka-clients, what Spark uses) against the broker; each test runs one JVM scenario of Compat.java."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

from programs import ClientFailed, java, java_cmd
from records import assert_exact, expected_offsets, make_records, parse_output, unique, write_spec

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def test_admin(bootstrap: str) -> None:
    out = java("admin", bootstrap, unique("java-admin"))
    assert out.facts == {
        "listed": "true",
        "partitions": "3",
        "leaders": "true",
        "config.retention.ms": "3600000",
        "config.cleanup.policy": "compact",
        "cluster.nodes": "1",
        "cluster.id.present": "true",
        "cluster.controller.present": "true",
        "partitions.after": "5",
        "deleted": "true",
    }


def test_roundtrip(bootstrap: str, tmp_path: Path) -> None:
    recs = make_records(250, 6, CODECS)
    out = java("roundtrip", bootstrap, unique("java-rt"), "6", write_spec(tmp_path, "rt", recs))
    assert out.sent == expected_offsets(recs)
    assert_exact(recs, out.records)


def test_idempotent(bootstrap: str, tmp_path: Path) -> None:
    recs = make_records(300, 3, ("lz4",))
    out = java("roundtrip", bootstrap, unique("java-idem"), "3", write_spec(tmp_path, "idem", recs),
               "enable.idempotence=true", "acks=all", "max.in.flight.requests.per.connection=5")
    assert out.sent == expected_offsets(recs)
    assert_exact(recs, out.records)


def test_idempotent_restart(restartable, tmp_path: Path) -> None:
    """Kill -9 the broker while an idempotent producer has batches in flight; its retries must not duplicate."""
    recs = make_records(600, 3, ("none",))
    cmd = java_cmd("paced", restartable.bootstrap, unique("java-restart"), "3", write_spec(tmp_path, "paced", recs),
                   "enable.idempotence=true", "acks=all", "delivery.timeout.ms=120000", "request.timeout.ms=5000",
                   "retry.backoff.ms=100", "reconnect.backoff.max.ms=500")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    acked = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("ACK ") and int(line.split()[1]) >= len(recs) // 3:
                acked.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert acked.wait(60), "producer never got a third of its records acknowledged:\n" + "".join(lines[-20:])
        restartable.stop("KILL")
        time.sleep(0.5)
        restartable.start()
        proc.wait(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise ClientFailed(f"java exited {proc.returncode}\n{''.join(lines[-20:])}\n{stderr[-3000:]}")
    out = parse_output("".join(lines))
    assert out.sent == expected_offsets(recs)
    assert_exact(recs, out.records)


def test_group(bootstrap: str, tmp_path: Path) -> None:
    first, second = make_records(40, 4), make_records(20, 4, start=40)
    # The members' session and heartbeat times of the other clients' group cells: with Java's defaults (45 s,
    # 3 s) each rebalance on Tansu 0.6 took about 24 s, with these 4-7 s.
    out = java("group", bootstrap, unique("java-group"), unique("java-g"),
               write_spec(tmp_path, "first", first), write_spec(tmp_path, "second", second),
               "session.timeout.ms=10000", "heartbeat.interval.ms=1000", timeout=150)
    assert int(out.facts["assigned.a"]) > 0 and int(out.facts["assigned.b"]) > 0
    assert int(out.facts["assigned.a"]) + int(out.facts["assigned.b"]) == 4
    phase1 = [g for g in out.records if g.tag in ("a", "b")]
    assert_exact(first, phase1)
    assert {g.partition for g in phase1 if g.tag == "a"}.isdisjoint({g.partition for g in phase1 if g.tag == "b"})
    counts = {p: sum(1 for r in first if r.partition == p) for p in range(4)}
    assert {k: int(v) for k, v in out.facts.items() if k.startswith("committed.")} == {
        f"committed.{p}": n for p, n in counts.items()}
    assert_exact(second, [g for g in out.records if g.tag == "c"], counts)


def test_offsets(bootstrap: str) -> None:
    base_ts = (int(time.time()) - 3600) * 1000
    out = java("offsets", bootstrap, unique("java-offsets"), str(base_ts), "10")
    assert [(g.offset, g.value, g.timestamp) for g in out.records] == [
        (i, f"v{i}".encode(), base_ts + i * 1000) for i in range(10)]
    assert out.facts == {
        "admin.earliest": "0",
        "admin.latest": "10",
        "admin.time.offset": "5",
        "admin.time.timestamp": str(base_ts + 5000),
        "admin.future.offset": "-1",
        "consumer.beginning": "0",
        "consumer.end": "10",
        "consumer.empty.end": "0",
        "consumer.time.offset": "5",
        "consumer.time.timestamp": str(base_ts + 5000),
        "consumer.future": "null",
        "leader.epoch.present": "true",
        "after.seek.first": "3",
        "position.after": "10",
    }


def test_spark(bootstrap: str) -> None:
    """Spark's Kafka source/sink call sequence over a 200k-record backlog in 4 partitions."""
    total, partitions = 200_000, 4
    out = java("spark", bootstrap, unique("java-spark"), str(partitions), str(total), timeout=180)
    assert out.facts["partitions"] == str(partitions)
    assert {out.facts[f"range.{p}"] for p in range(partitions)} == {f"0..{total // partitions}"}
    assert (out.facts["expected"], out.facts["read"], out.facts["bad"]) == (str(total), str(total), "0"), out.facts["first.bad"]
    assert out.facts["results"] == ",".join(f"{p}:{total // partitions}" for p in range(partitions))
