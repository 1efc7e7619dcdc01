"""Produce (key 0), v3-v11.

v3: transactional_id, record batch v2 only (Kafka 4 removed v0-v2 and message format v0/v1).
v5: log_start_offset in the response; v8: record_errors + error_message; v9: flexible; v10/v11: the
current_leader / node_endpoints tagged fields for NOT_LEADER errors (never sent: we are every leader).
acks 0, 1 and -1 are accepted (one replica: -1 is answered as soon as the leader has it, like acks=1);
any other value gets INVALID_REQUIRED_ACKS. With acks=0 nothing is answered, and a failed append closes
the connection, which is how Kafka tells an acks=0 producer that something went wrong.
The request is decoded by wire.produce without copying the records: the log patches offsets into the
received buffer and writes it out.
"""

from __future__ import annotations

import logging

import trio

from gateway.broker import now_ms
from storage.errors import UnknownTopicOrPartition
from wire.errors import ErrorCode, KafkaError
from wire.produce import decode_produce_request
from wire.protocol import MalformedRequest, build, response_type

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
RAW = True


def _partition_response(index: int, error: int, message: str | None = None) -> dict:
    return {"index": index, "error_code": error, "base_offset": -1, "log_append_time": None,
            "log_start_offset": -1, "error_message": message}


async def handle(ctx, _request):
    request = decode_produce_request(ctx.frame, ctx.body_pos, ctx.version)
    broker = ctx.broker
    acks = request.acks
    topics_out = []
    failures = []
    now = now_ms()
    for topic in request.topics:
        name = topic.name or ""
        partitions_out = []
        for part in topic.partitions:
            if acks not in (0, 1, -1):
                partitions_out.append(_partition_response(part.index, ErrorCode.invalid_required_acks))
                continue
            if request.transactional_id is not None:
                # Transactions are not served (no AddPartitionsToTxn/EndTxn in ApiVersions).
                partitions_out.append(_partition_response(
                    part.index, ErrorCode.transactional_id_authorization_failed, "transactions are not supported"))
                continue
            try:
                if part.records is None or len(part.records) == 0:
                    raise KafkaError("produce request without record batches", ErrorCode.invalid_record)
                plog = broker.partition(name, part.index)
                result = plog.append(part.records, now_ms=now)
            except UnknownTopicOrPartition as exc:
                partitions_out.append(_partition_response(part.index, exc.error_code))
                failures.append((name, part.index, exc))
                continue
            except KafkaError as exc:
                partitions_out.append(_partition_response(part.index, exc.error_code, str(exc)))
                failures.append((name, part.index, exc))
                continue
            if result.flush_needed:
                # flush.messages reached: Kafka flushes before acknowledging; fsync runs off the event loop.
                await trio.to_thread.run_sync(plog.flush)
            if not result.duplicate:
                broker.notify_append(name, part.index)
            partitions_out.append({
                "index": part.index, "error_code": ErrorCode.none, "base_offset": result.base_offset,
                "log_append_time": result.log_append_time_ms if result.log_append_time_ms >= 0 else None,
                "log_start_offset": result.log_start_offset, "error_message": None,
            })
        topics_out.append({"name": name, "partition_responses": partitions_out})
    if acks == 0:
        if failures:
            name, index, exc = failures[0]
            raise MalformedRequest(f"acks=0 produce to {name}-{index} failed: {exc}")
        return None
    return build(response_type(API_KEY, ctx.version), {"responses": topics_out, "throttle_time": 0})
