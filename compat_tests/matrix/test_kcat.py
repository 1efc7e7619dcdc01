"""kcat (Debian's build on its librdkafka) against the broker.

kcat has no admin commands, so its topics are created with kafka-python's admin client and its admin cell
checks what kcat itself reads: metadata (-L). Text keys/values only (kcat reads delimited lines); headers
(-H) apply to every record of one kcat run, so each (codec, partition) run gets its own headers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

from kafka.admin import KafkaAdminClient, NewTopic
from programs import kcat
from records import Got, Rec, assert_exact, unique

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def create(bootstrap: str, topic: str, partitions: int) -> None:
    """Create the topic with kafka-python's admin client (kcat cannot)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=15000)
    finally:
        admin.close()


def produce_run(bootstrap: str, topic: str, recs: list[Rec], *extra: str) -> None:
    """One kcat -P run: all records share partition, codec and headers; an empty key is sent as null (-Z)."""
    r0 = recs[0]
    headers = [arg for k, v in r0.headers for arg in ("-H", f"{k}={v.decode()}")]
    lines = "".join(f"{(r.key or b'').decode()}\t{(r.value or b'').decode()}\n" for r in recs)
    kcat("-b", bootstrap, "-P", "-t", topic, "-p", str(r0.partition), "-z", r0.codec, "-K", "\t", "-Z",
         *headers, *extra, stdin=lines)


def runs(codecs: tuple[str, ...], partitions: int, per_run: int, start: int = 0) -> list[list[Rec]]:
    """Records grouped by kcat run: for each codec, one run per partition; every run's first key is null."""
    out = []
    for codec in codecs:
        for p in range(partitions):
            headers = (("codec", codec.encode()), ("part", str(p).encode()))
            out.append([Rec(p, None if j == 0 else f"k-{codec}-{p}-{start + j}".encode(),
                            f"value {codec} {p} {start + j}".encode(), headers, codec) for j in range(per_run)])
    return out


def parse(lines: str, tag: str = "") -> list[Got]:
    """kcat -J output lines as consumed records."""
    out = []
    for line in lines.splitlines():
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        h = m.get("headers") or []
        headers = tuple((h[i], (h[i + 1] or "").encode()) for i in range(0, len(h), 2))
        key = None if m["key"] is None else m["key"].encode()
        value = None if m["payload"] is None else m["payload"].encode()
        out.append(Got(m["partition"], m["offset"], key, value, headers, tag, m.get("ts", -1)))
    return out


def consume_all(bootstrap: str, topic: str, *extra: str) -> list[Got]:
    """Everything in the topic: -o beginning, exit at the end of every partition (-e)."""
    return parse(kcat("-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-Z", *extra))


def test_admin(bootstrap: str) -> None:
    topic = unique("kcat-admin")
    create(bootstrap, topic, 3)
    md = json.loads(kcat("-b", bootstrap, "-L", "-J", "-t", topic))
    assert len(md["brokers"]) == 1
    (t,) = md["topics"]
    assert t["topic"] == topic and "error" not in t
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == md["brokers"][0]["id"] for p in t["partitions"])


def test_roundtrip(bootstrap: str) -> None:
    topic, partitions = unique("kcat-rt"), 4
    create(bootstrap, topic, partitions)
    batches = runs(CODECS, partitions, 6)
    for recs in batches:
        produce_run(bootstrap, topic, recs)
    assert_exact([r for recs in batches for r in recs], consume_all(bootstrap, topic))


def test_idempotent(bootstrap: str) -> None:
    topic, partitions = unique("kcat-idem"), 3
    create(bootstrap, topic, partitions)
    batches = runs(("lz4",), partitions, 50)
    for recs in batches:
        produce_run(bootstrap, topic, recs, "-X", "enable.idempotence=true")
    assert_exact([r for recs in batches for r in recs], consume_all(bootstrap, topic))


class Member:
    """A kcat -G balanced consumer running in the background; SIGINT makes it commit and leave."""

    def __init__(self, bootstrap: str, group: str, topic: str, tag: str) -> None:
        self.tag = tag
        self.proc = subprocess.Popen(
            # -u: unbuffered output, so records() sees each record when kcat prints it (a pipe is
            # block-buffered: without -u nothing shows before kcat exits and every wait runs to its deadline).
            ["kcat", "-b", bootstrap, "-G", group, topic, "-u", "-J", "-Z", "-X", "auto.offset.reset=earliest",
             "-X", "session.timeout.ms=10000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=lambda s=stream, k=sink: k.extend(s), daemon=True).start()

    def records(self) -> list[Got]:
        return parse("".join(list(self.out)), self.tag)

    def events(self) -> list[str]:
        """The rebalance lines kcat printed on stderr so far."""
        return [line for line in list(self.err) if "rebalanced" in line or "assigned" in line.lower()]

    def assigned(self) -> bool:
        """True when the latest rebalance line on stderr gave this member partitions."""
        events = self.events()
        return bool(events) and "assigned:" in events[-1] and "revoked" not in events[-1].lower()

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def test_group(bootstrap: str) -> None:
    topic, group, partitions = unique("kcat-group"), unique("kcat-g"), 4
    create(bootstrap, topic, partitions)
    first = runs(("none",), partitions, 10)
    second = runs(("none",), partitions, 5, start=10)
    a, b = Member(bootstrap, group, topic, "a"), Member(bootstrap, group, topic, "b")
    try:
        deadline = time.monotonic() + 30
        while not (a.assigned() and b.assigned()) and a.running() and b.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert a.assigned() and b.assigned(), f"both members own partitions:\n{''.join(a.err)}\n{''.join(b.err)}"
        for recs in first:
            produce_run(bootstrap, topic, recs)
        deadline = time.monotonic() + 30
        while len(a.records()) + len(b.records()) < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        seen = len(b.events())
        a.stop()
        # Let b finish the rebalance a's leave starts before stopping it: a member that exits between its
        # JoinGroup and SyncGroup stalls the group until its rebalance timeout, with Kafka as here.
        deadline = time.monotonic() + 20
        while not (len(b.events()) >= seen + 2 and b.assigned()) and b.running() and time.monotonic() < deadline:
            time.sleep(0.1)
        b.stop()
    assert_exact([r for recs in first for r in recs], a.records() + b.records())
    assert {g.partition for g in a.records()}.isdisjoint({g.partition for g in b.records()})
    for recs in second:
        produce_run(bootstrap, topic, recs)
    c = Member(bootstrap, group, topic, "c")
    try:
        deadline = time.monotonic() + 30
        while len(c.records()) < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        c.stop()
    assert_exact([r for recs in second for r in recs], c.records(), {p: 10 for p in range(partitions)})


def query(bootstrap: str, topic: str, timestamp: int) -> int:
    """kcat -Q: the offset of the first record at or after `timestamp` (-1: latest, -2: earliest)."""
    out = kcat("-b", bootstrap, "-Q", "-t", f"{topic}:0:{timestamp}")
    return int(out.strip().split()[-1])


def test_offsets(bootstrap: str) -> None:
    topic = unique("kcat-offsets")
    create(bootstrap, topic, 2)
    for i in range(10):  # one kcat run per record, so timestamps increase from record to record
        produce_run(bootstrap, topic, [Rec(0, None, f"v{i}".encode())])
    got = consume_all(bootstrap, topic)
    assert [(g.offset, g.value) for g in got] == [(i, f"v{i}".encode()) for i in range(10)]
    ts = [g.timestamp for g in got]
    assert query(bootstrap, topic, -2) == 0
    assert query(bootstrap, topic, -1) == 10
    assert query(bootstrap, topic, ts[5]) == ts.index(ts[5])  # first record with that timestamp
    assert query(bootstrap, topic, ts[5] + 1) == next(i for i, t in enumerate(ts) if t > ts[5])
    assert query(bootstrap, topic, ts[-1] + 60_000) == -1
    from_time = parse(kcat("-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", f"s@{ts[5]}", "-e", "-J", "-Z"))
    assert [g.offset for g in from_time] == list(range(ts.index(ts[5]), 10))
