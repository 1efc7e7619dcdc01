"""Produce (key 0), v3-v12.

v3: transactional_id, record batch v2 only (Kafka 4 removed v0-v2 and message format v0/v1), exactly one batch
per partition (ProduceRequest.validateRecords); every record of it is read before it is appended (LogValidator).
v5: log_start_offset in the response; v8: record_errors (a refused batch names its offending records by index,
as Kafka's RecordValidationException: keyless records on a compacted topic, timestamps out of range) + error_message; v9: flexible; v10/v11: the
current_leader / node_endpoints tagged fields for NOT_LEADER errors (never sent: we are every leader).
acks 0, 1 and -1 are accepted (one replica: -1 is answered as soon as the leader has it, like acks=1);
any other value gets INVALID_REQUIRED_ACKS. With acks=0 nothing is answered, and a failed append closes
the connection, which is how Kafka tells an acks=0 producer that something went wrong.
The request is decoded by wire.produce without copying the records (the log patches offsets into the
received buffer and writes it out), and the response is encoded by hand there too.
Transactional batches need the request's transactional_id with TRANSACTIONAL_ID WRITE (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as KafkaApis.handleProduceRequest) and, as Kafka 3.6+ verifies them
(KIP-890 part 1), a partition already added to the producer's ongoing transaction (else INVALID_TXN_STATE, from
v11 TRANSACTION_ABORTABLE);
v12 (transaction version 2, KIP-890 part 2) adds the partition to the transaction itself (starting one), as
Kafka's AddPartitionsToTxnManager asks the coordinator. v13 (topic ids) is not advertised.
"""

from __future__ import annotations

import logging
import struct

import trio

from logway.gateway.broker import now_ms
from logway.gateway.metrics.stats import BrokerStats
from logway.server.security.authorizer import Operation, ResourceType
from logway.storage.errors import RecordErrors, UnknownTopicOrPartition
from logway.wire.batch import (
    ATTRIBUTES_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAGIC_V2,
    TRANSACTIONAL_MASK,
    parse_header,
)
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.produce import ProducePartitionResult, decode_produce_request, encode_produce_response
from logway.wire.protocol import MalformedRequest

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12
RAW = True
_MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest batch length Kafka's iterator accepts
_LENGTH = struct.Struct(">i")
_MAGIC = struct.Struct(">b")


def _check_one_v2_batch(records: memoryview | None, version: int) -> None:
    """Kafka's ProduceRequest.validateRecords (v3+) over its batch iterator: exactly one whole v2 batch per partition."""
    size = 0 if records is None else len(records)
    batch_length = _LENGTH.unpack_from(records, LENGTH_POS)[0] if size >= LOG_OVERHEAD else 0
    if size >= LOG_OVERHEAD and batch_length < _MIN_RECORD_OVERHEAD:  # ByteBufferLogInputStream.nextBatch
        raise KafkaError(f"Record size {batch_length} is less than the minimum record overhead ({_MIN_RECORD_OVERHEAD})",
                         ErrorCode.corrupt_message)
    if size < LOG_OVERHEAD or batch_length > size - LOG_OVERHEAD:  # no whole batch: the iterator yields none
        raise KafkaError(f"Produce requests with version {version} must have at least one record batch per partition",
                         ErrorCode.invalid_record)
    magic = _MAGIC.unpack_from(records, MAGIC_POS)[0]
    if not 0 <= magic <= MAGIC_V2:
        raise KafkaError(f"Invalid magic found in record: {magic}", ErrorCode.corrupt_message)
    if magic != MAGIC_V2:
        raise KafkaError(f"Produce requests with version {version} are only allowed to contain record batches with "
                         "magic version 2", ErrorCode.invalid_record)
    if batch_length < size - LOG_OVERHEAD:
        raise KafkaError(f"Produce requests with version {version} are only allowed to contain exactly one record "
                         "batch per partition", ErrorCode.invalid_record)


def _count_failure(stats: BrokerStats, exc: KafkaError) -> None:
    """Kafka's FailedProduceRequestsPerSec (an append that failed), and storage errors by themselves."""
    stats.failed_produce_requests += 1
    if exc.error_code == ErrorCode.kafka_storage_error:
        stats.storage_errors["append"] += 1


# Kafka's ReplicaManager: what a failed transaction check answers a producer (retriable ones as
# NOT_ENOUGH_REPLICAS, which older clients retry without a metadata refresh; CONCURRENT_TRANSACTIONS stays for
# transaction version 2, where it is common while the previous transaction completes).
_VERIFY_ERRORS = {ErrorCode.coordinator_load_in_progress: ErrorCode.not_enough_replicas,
                  ErrorCode.coordinator_not_available: ErrorCode.not_enough_replicas,
                  ErrorCode.not_coordinator: ErrorCode.not_enough_replicas,
                  ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch}


def _check_transactional(ctx, transactional_id: str | None, topic: str, index: int, records: memoryview,
                         version: int) -> bool:
    """A transactional batch: its transactional id authorized and the partition in its ongoing transaction, or,
    from v12 (transaction version 2), added to it now. True when that wrote to __transaction_state."""
    if not records[ATTRIBUTES_POS + 1] & TRANSACTIONAL_MASK:  # one byte read on the hot path
        return False
    header = parse_header(records)
    if transactional_id is None or not ctx.authorized(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise KafkaError("Transactional records need an authorized transactional id",
                         ErrorCode.transactional_id_authorization_failed)
    coordinator = ctx.broker.transactions.coordinator
    if version >= 12:
        error = coordinator.add_partitions(transactional_id, header.producer_id, header.producer_epoch,
                                           [(topic, index)], now_ms(), client_version=2)
        error = _VERIFY_ERRORS.get(error, error)
    else:
        error = coordinator.verify_partition(
            transactional_id, header.producer_id, header.producer_epoch, (topic, index))
        if error == ErrorCode.invalid_txn_state and version >= 11:
            error = ErrorCode.transaction_abortable  # KIP-890: clients from v11 abort and go on
    if error != ErrorCode.none:
        raise KafkaError(f"Partition {topic}-{index} is not in an ongoing transaction of {transactional_id}", error)
    return version >= 12


async def _flush(ctx, plog, transaction_written: bool) -> None:
    """flush.messages reached: Kafka flushes before acknowledging; fsync runs off the event loop. A failed
    fsync takes the log offline and answers KAFKA_STORAGE_ERROR (KafkaStorageError). Responses held for
    pipelined requests (gateway.connection) go out first: they need no fsync. A partition added to a
    transaction here (v12) has its __transaction_state write flushed under the same policy."""
    await ctx.connection.send_held()
    if transaction_written:
        await ctx.broker.transactions.flush_pending()
    if plog is not None:
        await trio.to_thread.run_sync(plog.flush)


async def handle(ctx, _request):
    version = ctx.header.api_version
    request = decode_produce_request(ctx.frame, ctx.body_pos, version)
    broker = ctx.broker
    acks = request.acks
    topics_out = []
    failures = []
    now = now_ms()
    # KafkaApis.handleProduceRequest: TOPIC WRITE per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
    denied = None
    if ctx.realm.authorizer is not None:
        denied = ctx.denied_topics(Operation.WRITE, (t.name or "" for t in request.topics))
    for topic in request.topics:
        name = topic.name or ""
        partitions_out = []
        for part in topic.partitions:
            if denied and name in denied:
                exc = KafkaError(f"Not authorized to access topics: [{name}]", ErrorCode.topic_authorization_failed)
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code))
                failures.append((name, part.index, exc))
                continue
            if acks not in (0, 1, -1):
                partitions_out.append(ProducePartitionResult(part.index, ErrorCode.invalid_required_acks))
                continue
            try:
                _check_one_v2_batch(part.records, version)
                added = _check_transactional(ctx, request.transactional_id, name, part.index, part.records, version)
                plog = broker.partition(name, part.index)
                plog.counters.produce_requests += 1
                result = plog.append(part.records, now_ms=now)
                if result.flush_needed or added:
                    await _flush(ctx, plog if result.flush_needed else None, added)
            except UnknownTopicOrPartition as exc:
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code))
                failures.append((name, part.index, exc))
                continue
            except RecordErrors as exc:
                # v8+: name the offending records, off the event loop (it reads every record of the batch).
                named = ()
                if version >= 8:
                    await ctx.connection.send_held()
                    named = await trio.to_thread.run_sync(exc.name_records)
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code,
                                                             error_message=exc.message_with(named), record_errors=named))
                failures.append((name, part.index, exc))
                continue
            except KafkaError as exc:
                partitions_out.append(ProducePartitionResult(part.index, exc.error_code, error_message=str(exc)))
                failures.append((name, part.index, exc))
                _count_failure(broker.stats, exc)
                continue
            if not result.duplicate:
                # Kafka's BytesInPerSec / MessagesInPerSec: what was appended (ReplicaManager.appendToLocalLog).
                plog.counters.bytes_in += len(part.records)
                plog.counters.messages_in += result.last_offset - result.base_offset + 1
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
    return [encode_produce_response(version, ctx.header.correlation_id, topics_out)]
