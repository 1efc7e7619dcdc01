"""Produce (key 0), v3-v12.

v3: transactional_id, record batch v2 only (Kafka 4 removed v0-v2 and message format v0/v1), exactly one batch
per partition (ProduceRequest.validateRecords); every record of it is read before it is appended (LogValidator).
v5: log_start_offset in the response; v8: record_errors (a refused batch names its offending records by index,
as Kafka's RecordValidationException: keyless records on a compacted topic, timestamps out of range) + error_message; v9: flexible; v10/v11: the
current_leader / node_endpoints tagged fields for NOT_LEADER errors (never sent: we are every leader).
acks 0, 1 and -1 are accepted (one replica: -1 is answered as soon as the leader has it, like acks=1, unless
flush.acks.all.enable makes it wait for the fsync; flush.messages reached makes every acks wait, as in Kafka);
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
from typing import TYPE_CHECKING

import trio

from logway.gateway.broker import now_ms
from logway.gateway.group_commit import Flush
from logway.gateway.metrics.stats import BrokerStats
from logway.server.connection import Deferred
from logway.server.security.request_acls import ProduceDenials, produce_denials
from logway.storage.errors import RecordErrors, UnknownTopicOrPartition
from logway.wire.batch import (
    ATTRIBUTES_POS,
    LENGTH_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    MAGIC_V2,
    PRODUCER_ID_POS,
    TRANSACTIONAL_MASK,
    parse_header,
)
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.produce import (
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    decode_produce_request,
    encode_produce_response,
)
from logway.wire.protocol import MalformedRequest

if TYPE_CHECKING:
    from logway.gateway.context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12
RAW = True
_MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest batch length Kafka's iterator accepts
_LENGTH = struct.Struct(">i")
_MAGIC = struct.Struct(">b")
_I64 = struct.Struct(">q")


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


def _check_transactional(ctx: RequestContext, transactional_id: str | None, id_denied: bool, topic: str, index: int,
                         records: memoryview) -> bool:
    """A transactional batch: the request's transactional id present and authorized, the partition in its ongoing
    transaction or, from v12 (transaction version 2), added to it now. True when that wrote to __transaction_state."""
    if not records[ATTRIBUTES_POS + 1] & TRANSACTIONAL_MASK:  # one byte read on the hot path
        return False
    header = parse_header(records)
    if transactional_id is None or id_denied:
        raise KafkaError("Transactional records need an authorized transactional id",
                         ErrorCode.transactional_id_authorization_failed)
    coordinator, version = ctx.broker.transactions.coordinator, ctx.version
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


def _check_producer_owner(ctx: RequestContext, records: memoryview | None) -> None:
    """Under ACLs, where principals are many: a batch's producer id must be one this principal was handed (or one
    nobody holds here: trust on first use, server/security/ownership.py), so no principal writes into another's
    sequence. Without an authorizer every client is alike, as in Kafka: not checked."""
    if records is None or len(records) < PRODUCER_ID_POS + 8:
        return
    (producer_id,) = _I64.unpack_from(records, PRODUCER_ID_POS)
    if producer_id >= 0 and not ctx.broker.producer_owners.claim(producer_id, ctx.owner):
        raise KafkaError(f"producer id {producer_id} was not issued to {ctx.principal}",
                         ErrorCode.invalid_producer_id_mapping)


def _denials(ctx: RequestContext, request: ProduceRequest) -> ProduceDenials | None:
    """KafkaApis.handleProduceRequest's ACL checks (request_acls, by name); None without an authorizer."""
    if ctx.connection.realm.authorizer is None:
        return None
    acl = ctx.acl
    denials = produce_denials(acl, request.transactional_id, (t.name or "" for t in request.topics))
    ctx.audit_denials(acl)
    return denials


async def _append_topic(ctx: RequestContext, request: ProduceRequest, id_denied: bool, topic: str,
                        partitions: list[ProducePartition], now: int, failures: list,
                        durable: list) -> list[ProducePartitionResult]:
    """Each partition's batch checked and appended: their results (the failures also noted in ``failures``, the
    appends to fsync before answering in ``durable``: the log, this topic's results, the index of its result)."""
    broker = ctx.broker
    version = ctx.header.api_version
    out = []
    for part in partitions:
        try:
            _check_one_v2_batch(part.records, version)
            added = _check_transactional(ctx, request.transactional_id, id_denied, topic, part.index, part.records)
            if ctx.connection.realm.authorizer is not None:
                _check_producer_owner(ctx, part.records)
            plog = broker.partition(topic, part.index)
            plog.counters.produce_requests += 1
            result = plog.append(part.records, now_ms=now, acks_all=request.acks == -1)
        except UnknownTopicOrPartition as exc:
            failures.append((topic, part.index, exc))
            out.append(ProducePartitionResult(part.index, exc.error_code))
            continue
        except RecordErrors as exc:
            failures.append((topic, part.index, exc))
            out.append(await _record_errors(ctx, part.index, exc))
            continue
        except KafkaError as exc:
            failures.append((topic, part.index, exc))
            _count_failure(broker.stats, exc)
            out.append(ProducePartitionResult(part.index, exc.error_code, error_message=str(exc)))
            continue
        if not result.duplicate:
            # Kafka's BytesInPerSec / MessagesInPerSec: what was appended (ReplicaManager.appendToLocalLog).
            plog.counters.bytes_in += len(part.records)
            plog.counters.messages_in += result.last_offset - result.base_offset + 1
        out.append(ProducePartitionResult(part.index, ErrorCode.none, result.base_offset, result.log_append_time_ms,
                                          result.log_start_offset))
        if result.flush_needed:  # fsynced before the answer; the group commit then wakes the fetches
            durable.append((plog, out, len(out) - 1))
        elif not result.duplicate:
            broker.notify_append(topic, part.index)
        if added:  # v12: the partition's place in the transaction is as durable as the append it answers
            durable += [(txn_log, out, len(out) - 1) for txn_log in broker.transactions.take_unflushed()]
    return out


async def _record_errors(ctx: RequestContext, index: int, exc: RecordErrors) -> ProducePartitionResult:
    """A refused batch's result; v8+ names the offending records, off the event loop (it reads every record)."""
    named = ()
    if ctx.version >= 8:
        await ctx.connection.send_held()
        named = await trio.to_thread.run_sync(exc.name_records)
    return ProducePartitionResult(index, exc.error_code, error_message=exc.message_with(named), record_errors=named)


def _refused(name: str, partitions: list[ProducePartition], failures: list) -> list[ProducePartitionResult]:
    """A topic without TOPIC WRITE: each partition TOPIC_AUTHORIZATION_FAILED (a failure for acks=0 too)."""
    exc = KafkaError(f"Not authorized to access topics: [{name}]", ErrorCode.topic_authorization_failed)
    failures += [(name, part.index, exc) for part in partitions]
    return [ProducePartitionResult(part.index, exc.error_code) for part in partitions]


async def handle(ctx: RequestContext, request: None) -> list[bytes] | None:
    """Decode the request (records stay views of the frame), append each partition's batch, answer."""
    version = ctx.header.api_version
    produce = decode_produce_request(ctx.frame, ctx.body_pos, version)
    acks = produce.acks
    denials = _denials(ctx, produce)
    id_denied = denials is not None and denials.transactional_id
    topics_out = []
    failures: list[tuple[str, int, Exception]] = []
    durable: list = []  # appends to fsync before answering (see _append_topic)
    now = now_ms()
    for topic in produce.topics:
        name = topic.name or ""
        if denials is not None and name in denials.topics:
            results = _refused(name, topic.partitions, failures)
        elif acks not in (0, 1, -1):
            results = [ProducePartitionResult(part.index, ErrorCode.invalid_required_acks) for part in topic.partitions]
        else:
            results = await _append_topic(ctx, produce, id_denied, name, topic.partitions, now, failures, durable)
        topics_out.append((name, results))
    return await _respond(ctx, acks, topics_out, failures, durable)


async def _flush(broker, durable: list, failures: list, flush: Flush | None = None) -> None:
    """Kafka fsyncs an append that reached flush.messages before acknowledging it; here the appends waiting so in
    every connection share fsyncs (gateway.group_commit; ``flush``: requested already). A failed fsync takes its
    log offline: that partition answers KAFKA_STORAGE_ERROR."""
    flush = flush or broker.group_commit.request([plog for plog, _, _ in durable])
    failed = await flush.wait()
    for plog, results, i in durable:
        exc = failed.get(plog)
        if exc is not None:
            results[i] = ProducePartitionResult(results[i].index, exc.error_code, error_message=str(exc))
            failures.append((plog.topic, plog.partition, exc))
            _count_failure(broker.stats, exc)


def _answer_when_flushed(broker, durable: list, version: int, correlation_id: int, topics_out: list) -> Deferred:
    """The response, once the appends that must be are fsynced. Meanwhile the connection goes on with the Produce
    requests the client sent after this one, so their appends join the same fsync (server.connection.Deferred)."""
    flush = broker.group_commit.request([plog for plog, _, _ in durable])

    async def result() -> list:
        await _flush(broker, durable, [], flush)
        return [encode_produce_response(version, correlation_id, topics_out)]

    return Deferred(result, lambda: flush.done)


async def _respond(ctx: RequestContext, acks: int, topics_out: list, failures: list, durable: list) -> list | None:
    """The answer: once the appends that must be are fsynced (``durable``), none with acks=0, where a failed
    append closes the connection instead: how Kafka tells an acks=0 producer that something went wrong."""
    version, correlation_id = ctx.header.api_version, ctx.header.correlation_id
    if durable:
        if acks != 0:
            return [_answer_when_flushed(ctx.broker, durable, version, correlation_id, topics_out)]
        await ctx.connection.send_held()  # the responses held for pipelined requests need no fsync
        await _flush(ctx.broker, durable, failures)
    if acks == 0:
        if failures:
            name, index, exc = failures[0]
            raise MalformedRequest(f"acks=0 produce to {name}-{index} failed: {exc}")
        return None
    return [encode_produce_response(version, correlation_id, topics_out)]
