"""Produce (key 0), v3-v11.

v3: transactional_id, record batch v2 only (Kafka 4 removed v0-v2 and message format v0/v1).
v5: log_start_offset in the response; v8: record_errors + error_message; v9: flexible; v10/v11: the
current_leader / node_endpoints tagged fields for NOT_LEADER errors (never sent: we are every leader).
acks 0, 1 and -1 are accepted (one replica: -1 is answered as soon as the leader has it, like acks=1);
any other value gets INVALID_REQUIRED_ACKS. With acks=0 nothing is answered, and a failed append closes
the connection, which is how Kafka tells an acks=0 producer that something went wrong.
The request is decoded by wire.produce without copying the records (the log patches offsets into the
received buffer and writes it out), and the response is encoded by hand there too.
"""

from __future__ import annotations

import logging

import trio

from logway.gateway.broker import now_ms
from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.produce import ProducePartitionResult, decode_produce_request, encode_produce_response
from logway.wire.protocol import MalformedRequest

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
RAW = True


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
                partitions_out.append(ProducePartitionResult(part.index, ErrorCode.invalid_required_acks))
                continue
            if request.transactional_id is not None:
                # Transactions are not served (no AddPartitionsToTxn/EndTxn in ApiVersions).
                partitions_out.append(ProducePartitionResult(
                    part.index, ErrorCode.transactional_id_authorization_failed, error_message="transactions are not supported"))
                continue
            try:
                if part.records is None or len(part.records) == 0:
                    raise KafkaError("produce request without record batches", ErrorCode.invalid_record)
                plog = broker.partition(name, part.index)
                result = plog.append(part.records, now_ms=now)
                if result.flush_needed:
                    # flush.messages reached: Kafka flushes before acknowledging; fsync runs off the event loop.
                    # A failed fsync takes the log offline and answers KAFKA_STORAGE_ERROR (KafkaStorageError).
                    await trio.to_thread.run_sync(plog.flush)
            except UnknownTopicOrPartition as exc:
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code))
                failures.append((name, part.index, exc))
                continue
            except KafkaError as exc:
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code, error_message=str(exc)))
                failures.append((name, part.index, exc))
                continue
            if not result.duplicate:
                broker.notify_append(name, part.index)
            partitions_out.append(ProducePartitionResult(
                part.index, ErrorCode.none, result.base_offset, result.log_append_time_ms, result.log_start_offset,
            ))
        topics_out.append((name, partitions_out))
    if acks == 0:
        if failures:
            name, index, exc = failures[0]
            raise MalformedRequest(f"acks=0 produce to {name}-{index} failed: {exc}")
        return None
    return [encode_produce_response(ctx.version, ctx.header.correlation_id, topics_out)]
