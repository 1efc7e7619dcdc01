"""A share session belongs to the connection that opened it (Kafka's ShareSessionCache disconnect listener):
when that connection closes, the records its member acquired are delivered again at once, not once their
30 s acquisition locks run out."""

from __future__ import annotations

import datetime
import socket
import time
import uuid

from raw_requests import exchange, share_join

from logway.gateway.in_process import InProcessGateway
from logway.wire.errors import ErrorCode as E
from logway.wire.records import NewRecord, build_batch


def fetch(s: socket.socket, group: str, member: str, epoch: int, topic_id: uuid.UUID, wait_ms: int):
    resp = exchange(s, 78, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": datetime.timedelta(milliseconds=wait_ms), "min_bytes": 1, "max_bytes": 1 << 20,
        "max_records": 100, "batch_size": 100, "forgotten_topics_data": [],
        "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})
    assert resp.error_code == E.none, resp
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def join(s: socket.socket, member: str):
    return share_join(s, "g", member, ["t"])


def test_records_held_by_a_closed_connection_are_delivered_again_at_once(tmp_path) -> None:
    gw = InProcessGateway(tmp_path / "data", {"group.share.assignment.interval.ms": "0"}).start()
    try:
        gw.broker.logs.create_topic("t", 1)
        topic_id = gw.broker.logs.topics["t"].topic_id
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        with socket.create_connection(("127.0.0.1", gw.port), timeout=20) as other:
            exchange(other, 44, 1, {"resources": [{"resource_type": 32, "resource_name": "g", "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
                "validate_only": False})
            batch = build_batch([NewRecord(b"k", b"v%d" % i) for i in range(3)])
            produced = exchange(other, 0, 9, {"acks": -1, "timeout": 10_000, "transactional_id": None, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch}]}]})
            assert produced.responses[0].partition_responses[0].error_code == E.none
            for member in (a, b):  # one partition, two members: they share it
                joined = join(other, member)
                assert joined.error_code == E.none, joined
            with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as first:
                assert fetch(first, "g", a, 0, topic_id, 5000) == [(0, 2, 1)]
                assert fetch(other, "g", b, 0, topic_id, 0) == []  # a holds them all
            started = time.monotonic()  # a's connection is gone: b long-polls for what a held
            assert fetch(other, "g", b, 1, topic_id, 15_000) == [(0, 2, 2)]
            assert time.monotonic() - started < 10  # at once, not after the 30 s lock
    finally:
        gw.stop()
