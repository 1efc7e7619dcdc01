"""Fetch (key 1), v4-v17.

v4: isolation_level, last_stable_offset, aborted_transactions; v5: log_start_offset; v7: fetch sessions
(KIP-227) — gateway/fetch_sessions.py keeps them: incremental requests and answers carry only the
partitions that changed; v9: current_leader_epoch; v11: rack_id and
preferred_read_replica; v12: flexible, last_fetched_epoch/diverging_epoch (one leader epoch here, so the
log never diverges and the tagged field is never sent); v13: topic ids replace names (unknown ids get
UNKNOWN_TOPIC_ID); v15: replica_state; v17: replica_directory_id (follower fields, ignored).

Long poll: the answer waits up to max_wait_ms until min_bytes have accumulated, woken by appends to the
partitions asked for. Record data goes out with os.sendfile from the segment files (wire.fetch).
KIP-74: max_bytes and partition_max_bytes are soft for the first batch of the first non-empty partition.

Errors are per partition, as Kafka's ReplicaManager.readFromLog answers them: a corrupt stored batch gets
CORRUPT_MESSAGE, an I/O error KAFKA_STORAGE_ERROR, anything unexpected UNKNOWN_SERVER_ERROR (logged); the
other partitions of the request are served and the connection stays open.
"""

from __future__ import annotations

import logging
import uuid

import trio

from logway.gateway.security.authorizer import Operation
from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.fetch import FetchPartitionResult, FetchTopicResult, FileSlice, encode_fetch_response

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17

READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)


class _Denied(str):
    """A topic name the principal may not read (its partitions answer TOPIC_AUTHORIZATION_FAILED)."""


def _collect(ctx, request, names: list[str | None]) -> tuple[list[FetchTopicResult], int, bool]:
    """One pass over the requested partitions: (topics, bytes found, any error)."""
    broker = ctx.broker
    remaining = request.max_bytes
    min_one = True
    total = 0
    error = False
    topics = []
    for topic, name in zip(request.topics, names, strict=True):
        results = []
        info = broker.logs.topics.get(name) if name is not None else None
        for p in topic.partitions:
            # Kafka answers an unknown topic or partition with an empty aborted-transactions list (its error
            # response), and a failed read (OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, ...) with a null list and -1
            # offsets (ReplicaManager's LogReadResult of the exception, FetchDataInfo.empty).
            result = FetchPartitionResult(p.partition, aborted_transactions=[])
            results.append(result)
            if name is None:
                result.error_code = ErrorCode.unknown_topic_id
                error = True
                continue
            if isinstance(name, _Denied):
                result.error_code = ErrorCode.topic_authorization_failed
                error = True
                continue
            try:
                plog = broker.partition(name, p.partition)
                budget = max(0, min(p.partition_max_bytes, remaining))
                read = plog.read(p.fetch_offset, budget, min_one=min_one) if budget or min_one else None
            except UnknownTopicOrPartition as exc:
                result.error_code = exc.error_code
                error = True
                continue
            except Exception as exc:  # OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR, ...
                result.error_code = _error_code(exc, name, p.partition, p.fetch_offset)
                result.aborted_transactions = None
                error = True
                continue
            result.aborted_transactions = None
            result.high_watermark = plog.high_watermark
            result.last_stable_offset = plog.high_watermark
            result.log_start_offset = plog.log_start_offset
            if request.isolation_level == READ_COMMITTED:
                result.aborted_transactions = []
            if read is not None and read.size:
                result.records = FileSlice(read.fd, read.position, read.size)
                total += read.size
                remaining -= read.size
                min_one = False
        # v4-v12 name topics (no topic_id field), and kio reads the zero uuid as None: an unknown topic is
        # answered with the zero uuid, as Kafka does.
        topic_id = info.topic_id if info else getattr(topic, "topic_id", None) or ZERO_UUID
        topics.append(FetchTopicResult(name or "", topic_id, results))
    return topics, total, error


def _error_code(exc: Exception, topic: str, partition: int, offset: int) -> int:
    """The partition's error code; storage faults are logged (Kafka logs them in readFromLog)."""
    if isinstance(exc, KafkaError):
        if exc.error_code != ErrorCode.offset_out_of_range:
            log.error("Fetch of %s-%d at offset %d failed: %s", topic, partition, offset, exc)
        return exc.error_code
    log.exception("Fetch of %s-%d at offset %d failed unexpectedly", topic, partition, offset)
    return ErrorCode.unknown_server_error


async def handle(ctx, request):
    broker = ctx.broker
    session = broker.fetch_sessions.context(ctx.version, request)
    if session.error:
        return encode_fetch_response(ctx.version, ctx.header.correlation_id, [], error_code=session.error)
    request = session.request
    if ctx.version >= 13:
        by_id = {t.topic_id: t.name for t in broker.logs.topics.values()}
        names = [by_id.get(t.topic_id) for t in request.topics]
    else:
        names = [t.topic for t in request.topics]
    max_wait = request.max_wait.total_seconds()
    deadline = trio.current_time() + max_wait
    keys = [(n, p.partition) for t, n in zip(request.topics, names, strict=True) if n for p in t.partitions]
    # KafkaApis.handleFetchRequest: a consumer needs TOPIC READ; other topics answer TOPIC_AUTHORIZATION_FAILED.
    denied = ctx.denied_topics(Operation.READ, (n for n in names if n is not None))
    if denied:
        names = [_Denied(n) if n in denied else n for n in names]
        keys = [k for k in keys if k[0] not in denied]
    while True:
        topics, total, error = _collect(ctx, request, names)
        if total >= request.min_bytes or error or not keys or trio.current_time() >= deadline:
            break
        await broker.wait_for_append(keys, deadline)
    topics = session.response_topics(topics)
    return encode_fetch_response(ctx.version, ctx.header.correlation_id, topics, session_id=session.session_id)
