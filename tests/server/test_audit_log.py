"""The audit log's writer (server/audit_writer.py) on real files: lines rotate by size within a bounded number
of files, and a writer stuck on its file drops and counts events instead of making the caller wait, then says
so in the log."""

from __future__ import annotations

import json
import os
import threading

from logway.server.audit import MAX_ITEMS, MAX_STRING, Client, authentication, change
from logway.server.audit_writer import AuditLog, AuditSettings, audit_families

ALICE = Client("User:alice", "127.0.0.1:5000", "PLAINTEXT", "app")


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_log_rotates_by_size_and_keeps_a_bounded_number_of_files(tmp_path):
    path = tmp_path / "audit.log"
    audit = AuditLog(AuditSettings(str(path), max_bytes=4096, backups=2))
    for i in range(2000):
        audit.record(change(ALICE, "CreateTopics", "TOPIC", f"topic-{i}"))
    audit.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.log", "audit.log.1", "audit.log.2"]
    for p in tmp_path.iterdir():
        assert 0 < p.stat().st_size <= 4096
    kept = _lines(path.with_name("audit.log.2")) + _lines(path.with_name("audit.log.1")) + _lines(path)
    names = [e["resource_name"] for e in kept]
    assert names == [f"topic-{i}" for i in range(2000 - len(names), 2000)]  # the newest, in order, whole lines
    assert audit.written == 2000 and audit.dropped == 0


def test_the_log_goes_on_where_it_was_after_a_restart(tmp_path):
    path = tmp_path / "audit.log"
    for name in ("first", "second"):
        audit = AuditLog(AuditSettings(str(path)))
        audit.record(authentication(ALICE, "PLAIN"))
        audit.record(authentication(Client("User:mallory", "10.0.0.9:4000"), "PLAIN", f"{name}: wrong password"))
        audit.close()
    events = _lines(path)
    assert [(e["outcome"], e["principal"]) for e in events] == [("success", "User:alice"), ("failure", "User:mallory")] * 2
    assert events[0]["time"].endswith("Z") and events[0]["client_address"] == "127.0.0.1:5000"


def test_a_stuck_disk_drops_and_counts_events_and_the_log_says_so(tmp_path):
    """The file is a FIFO nobody reads: the writer thread blocks once the pipe is full, its queue fills, and
    record() goes on returning at once, counting what it drops. Once read, the log tells the gap."""
    path = tmp_path / "audit.fifo"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    audit = AuditLog(AuditSettings(str(path), queue_events=10))
    total = 5000  # ~130 bytes a line: far more than the pipe (64 KiB) and the queue hold
    for i in range(total):
        audit.record(change(ALICE, "DeleteGroups", "GROUP", f"g{i}"))
    assert audit.dropped > 0
    os.set_blocking(reader, True)
    chunks: list[bytes] = []

    def drain() -> None:
        while data := os.read(reader, 65536):
            chunks.append(data)
    thread = threading.Thread(target=drain)
    thread.start()
    audit.close()
    thread.join(10)
    os.close(reader)
    events = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
    groups = [e for e in events if e["event"] == "change"]
    gaps = [e for e in events if e["event"] == "audit"]  # one per time the writer found events had been dropped
    assert gaps and {e["outcome"] for e in gaps} == {"dropped"}
    assert sum(e["dropped"] for e in gaps) == audit.dropped
    assert len(groups) + audit.dropped == total
    assert audit_families([({}, audit)])[1].samples[0].value == audit.dropped  # logway_audit_events_dropped_total


def test_a_line_is_bounded_whatever_a_request_holds(tmp_path):
    path = tmp_path / "audit.log"
    audit = AuditLog(AuditSettings(str(path)))
    audit.record(change(ALICE, "CreateTopics", "TOPIC", "x" * 100_000,
                        details={"configs": {f"k{i}": "v" * 5000 for i in range(1000)}}))
    audit.close()
    (event,) = _lines(path)
    assert len(event["resource_name"]) == MAX_STRING + 3
    assert len(event["details"]["configs"]) == MAX_ITEMS + 1  # and a count of the rest
    assert len(path.read_bytes()) < 200_000
