"""Fetch (key 1), v4-v17.

v4: isolation_level, last_stable_offset, aborted_transactions (READ_COMMITTED stops at the last stable offset
and lists the aborted transactions of the data sent, from the partitions' txnindex); v5: log_start_offset; v7:
fetch sessions (KIP-227) — gateway/fetch_sessions.py keeps them: incremental requests and answers carry only the
partitions that changed; v9: current_leader_epoch; v11: rack_id and
preferred_read_replica; v12: flexible, last_fetched_epoch/diverging_epoch (one leader epoch here, so the
log never diverges and the tagged field is never sent); v13: topic ids replace names (unknown ids get
UNKNOWN_TOPIC_ID); v15: replica_state; v17: replica_directory_id (follower fields, ignored).

Long poll: the answer waits up to max_wait_ms until min_bytes have accumulated, woken by appends to the
partitions asked for. Record data goes out with os.sendfile from the segment files (wire.fetch); data not in
the page cache is paged in by a worker thread first (gateway/cold_reads.py), so a cold read does not stall the
event loop.
KIP-74: max_bytes and partition_max_bytes are soft for the first batch of the first non-empty partition.

The request is read once, here (RAW): wire.fetch_request reads the common shape into tuples (served as they
are, or as a _Request in kio's shape), kio reads anything else. A sessionless fetch whose every partition is
known and at its high watermark (a caught-up consumer polling 1,000 partitions) is answered by _serve_empty,
from its topics' heads kept while they do not change (gateway/fetch_heads.py), else one pack per partition
read, and no per-partition objects; any other fetch, or one that an append wakes, by _serve.
tests/gateway/test_fetch_fast_path.py holds both to the same bytes. Under ACLs the topics are checked by name
(request_acls.fetch_denials, the proxy's rule too); without an authorizer that is one branch.

"Nothing to read" is a fetch offset at the partition's high watermark (fetch_offsets()[0]). It is tested inline
in the three per-partition loops (_read_heads, _collect, _quiet_session) on purpose: they run per partition
of every poll, and a shared helper measured +30% instructions per call (1,000-partition empty fetch) and a
shared walk +46% on the quiet session check (callgrind).

Client quotas (gateway/throttling.py), for consumers: max_bytes is capped at what consumer_byte_rate allows over
the quota's windows; the answer's size (and the request's time) is recorded once; a throttled answer carries no
partitions and its throttle_time_ms, and the connection is muted for it (KafkaApis.handleFetchRequest).

Errors are per partition, as Kafka's ReplicaManager.readFromLog answers them: a corrupt stored batch gets
CORRUPT_MESSAGE, an I/O error KAFKA_STORAGE_ERROR, anything unexpected UNKNOWN_SERVER_ERROR (logged); the
other partitions of the request are served and the connection stays open.
"""

from __future__ import annotations

import datetime
import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from logway.gateway.cold_reads import page_in
from logway.gateway.fetch_sessions import FINAL_EPOCH, SessionContext
from logway.gateway.metrics.stats import BrokerStats
from logway.gateway.throttling import fetch_max_bytes, fetch_throttle
from logway.server.security.request_acls import fetch_denials, fetch_replica_id
from logway.storage.errors import UnknownTopicOrPartition
from logway.storage.partition_log import PartitionLog
from logway.storage.residency import cached
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.fetch import (
    Chunk,
    FetchPartitionResult,
    FetchTopicResult,
    FileSlice,
    empty_partition_packer,
    encode_empty_fetch_response,
    encode_fetch_response,
)
from logway.wire.fetch_request import FastFetchRequest, read_fetch_request
from logway.wire.protocol import decode_body

if TYPE_CHECKING:
    from logway.gateway.context import RequestContext
    from logway.storage.topic import Topic

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17
RAW = True  # the handler reads the request: wire.fetch_request for the common shape, kio for the rest

READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)
ZERO_ID_BYTES = bytes(16)
NOTHING_DENIED: frozenset[str] = frozenset()
_I32 = struct.Struct(">i").unpack_from

log = logging.getLogger(__name__)


class _Denied(str):
    """A topic name the principal may not read (its partitions answer TOPIC_AUTHORIZATION_FAILED)."""


def _collect(ctx: RequestContext, request: Any, names: list[str | None], reads: list[tuple[PartitionLog, int]],
             cold: list[tuple[int, int, int]] | None = None) -> tuple[list[FetchTopicResult], int, bool]:
    """One pass over the requested partitions: (topics, bytes found, any error); ``reads`` gets (log, bytes)
    of each partition read. With ``cold``, a partition whose data is not in the page cache is not read: its
    file range goes to ``cold`` (the pass is then to be repeated once a worker thread has paged it in)."""
    broker = ctx.broker
    read_committed = request.isolation_level == READ_COMMITTED
    remaining = request.max_bytes
    min_one = True
    total = 0
    error = False
    topics = []
    reads.clear()
    for topic, name in zip(request.topics, names, strict=True):
        results = []
        info = broker.logs.topics.get(name) if name is not None else None
        # Kafka answers an unknown topic or partition with an empty aborted-transactions list (its error
        # response), and a failed read (OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, ...) with a null list and -1
        # offsets (ReplicaManager's LogReadResult of the exception, FetchDataInfo.empty).
        partitions = _partitions(topic)
        if name is None or isinstance(name, _Denied):
            code = ErrorCode.unknown_topic_id if name is None else ErrorCode.topic_authorization_failed
            results = [FetchPartitionResult(index, code, aborted_transactions=[]) for index, _, _ in partitions]
            error = error or bool(results)
            partitions = ()
        plogs = info.partitions if info is not None else ()  # Broker.partition's lookup, once per topic
        count = len(plogs)
        add, note_read = results.append, reads.append
        for index, offset, max_bytes in partitions:
            if not 0 <= index < count:
                add(FetchPartitionResult(index, ErrorCode.unknown_topic_or_partition, aborted_transactions=[]))
                error = True
                continue
            plog = plogs[index]
            high, lso_now, start_now = plog.fetch_offsets()
            if offset == high:  # a consumer reads up to the high watermark: nothing new here
                add(FetchPartitionResult(index, 0, high, lso_now, start_now, b"", [] if read_committed else None))
                note_read((plog, 0))
                continue
            try:
                budget = max(0, min(max_bytes, remaining))
                # READ_COMMITTED reads stop at the last stable offset (Kafka's FetchIsolation.TXN_COMMITTED).
                lso = plog.last_stable_offset if read_committed else None
                if cold is not None and (budget or min_one):
                    extent = plog.read_extent(offset, budget)
                    if extent is not None and not cached(*extent):
                        cold.append(extent)
                        continue
                read = plog.read(offset, budget, min_one=min_one, max_offset=lso) if budget or min_one else None
            except UnknownTopicOrPartition as exc:
                add(FetchPartitionResult(index, exc.error_code, aborted_transactions=[]))
                error = True
                continue
            except Exception as exc:  # OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR, ...
                add(FetchPartitionResult(index, _error_code(exc, name, index, offset, broker.stats)))
                error = True
                continue
            result = FetchPartitionResult(index, 0, high, plog.last_stable_offset, plog.log_start_offset, b"", None)
            if read_committed:
                # The aborted transactions overlapping the data sent (Kafka's collectAbortedTransactions).
                has_data = read is not None and read.size
                result.aborted_transactions = plog.aborted_transactions(offset, lso) if has_data else []
            add(result)
            if read is not None and read.size:
                note_read((plog, read.size))
                result.records = FileSlice(read.fd, read.position, read.size)
                total += read.size
                remaining -= read.size
                min_one = False
            else:
                note_read((plog, 0))
        # v4-v12 name topics (no topic_id field), and kio reads the zero uuid as None: an unknown topic is
        # answered with the zero uuid, as Kafka does.
        topic_id = info.topic_id if info else getattr(topic, "topic_id", None) or ZERO_UUID
        topics.append(FetchTopicResult(name or "", topic_id, results))
    return topics, total, error


def _error_code(exc: Exception, topic: str, partition: int, offset: int, stats: BrokerStats) -> int:
    """The partition's error code; storage faults are logged (Kafka logs them in readFromLog) and counted."""
    if isinstance(exc, KafkaError) and exc.error_code == ErrorCode.offset_out_of_range:
        return exc.error_code
    # Kafka's FailedFetchRequestsPerSec: readFromLog failures other than the client's own mistakes.
    stats.failed_fetch_requests += 1
    if isinstance(exc, KafkaError):
        if exc.error_code in (ErrorCode.kafka_storage_error, ErrorCode.corrupt_message):
            stats.storage_errors["read"] += 1
        log.error("Fetch of %s-%d at offset %d failed: %s", topic, partition, offset, exc)
        return exc.error_code
    log.exception("Fetch of %s-%d at offset %d failed unexpectedly", topic, partition, offset)
    return ErrorCode.unknown_server_error


@dataclass(slots=True)
class _Topic:
    """A topic of the request: its name (v4-v12) or id (v13+), and its partitions as (partition, fetch_offset,
    partition_max_bytes) tuples, as wire.fetch_request reads them (no object per partition)."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: list[tuple[int, int, int]]


@dataclass(slots=True)
class _Request:
    """The request _serve and the fetch sessions read: as wire.fetch_request read it (never decoded a second
    time), or as kio did when it is not of the common shape."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[_Topic]
    forgotten_topics_data: Any = ()  # kio's entries (only requests kio reads have any)


def _as_request(ctx: RequestContext, fast: FastFetchRequest) -> _Request:
    by_id = ctx.version >= 13
    topics = [_Topic("", _topic_id(t.key), t.partitions) if by_id else _Topic(t.key, None, t.partitions)
              for t in fast.topics]
    return _Request(_replica_id(ctx), datetime.timedelta(milliseconds=fast.max_wait_ms), fast.min_bytes,
                    fast.max_bytes, fast.isolation_level, fast.session_id, fast.session_epoch, topics)


def _from_kio(request: Any) -> _Request:
    """A request kio read (one not of the common shape), in the same form."""
    topics = [_Topic(getattr(t, "topic", ""), getattr(t, "topic_id", None),
                     [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
              for t in request.topics]
    return _Request(fetch_replica_id(request), request.max_wait, request.min_bytes, request.max_bytes,
                    request.isolation_level, getattr(request, "session_id", 0), getattr(request, "session_epoch", -1),
                    topics, getattr(request, "forgotten_topics_data", ()))


def _partitions(topic: Any) -> list[tuple[int, int, int]]:
    """(partition, fetch_offset, partition_max_bytes) of a request topic, or of a session topic's cached
    partitions (made when a pass reads them: the quiet check does not)."""
    if isinstance(topic, _Topic):
        return topic.partitions
    return [(c.partition, c.fetch_offset, c.partition_max_bytes) for c in topic.partitions]


def _topic_id(key: bytes) -> uuid.UUID | None:
    return uuid.UUID(bytes=key) if key != ZERO_ID_BYTES else None  # kio reads the zero uuid as None


def _replica_id(ctx: RequestContext) -> int:
    """The replica id of a request of the common shape: the body's first field up to v14 (v15+ carries it in a
    tagged field, which wire.fetch_request leaves to kio: -1 when absent)."""
    return _I32(ctx.frame, ctx.body_pos)[0] if ctx.version < 15 else -1


def _denied(ctx: RequestContext, replica_id: int, names: list[str | None]) -> frozenset[str]:
    """The topics the principal may not fetch (request_acls.fetch_denials); one branch without an authorizer."""
    if ctx.authorizer is None:
        return NOTHING_DENIED
    acl = ctx.acl
    denied = fetch_denials(acl, replica_id, (n for n in names if n is not None)).topics
    ctx.audit_denials(acl)
    return denied


def _names(ctx: RequestContext, keys: list) -> list[str | None]:
    """The topic names of the request's topic keys: names up to v12, ids from v13 (None for an unknown id)."""
    if ctx.version < 13:
        return keys
    by_id = {t.topic_id: t.name for t in ctx.broker.logs.topics.values()}
    return [by_id.get(key) for key in keys]


async def handle(ctx: RequestContext, request: None) -> list[Chunk]:
    """Read the request once (the common shape by hand, anything else with kio) and answer it; a sessionless
    fetch in which every partition is at its high watermark takes a path without per-partition objects."""
    fast = read_fetch_request(ctx.version, ctx.frame, ctx.body_pos)
    if fast is None:  # not of the common shape (tagged fields, forgotten topics, ...): kio reads it
        return await _serve(ctx, decode_body(API_KEY, ctx.version, bytes(ctx.frame), ctx.body_pos), None, None)
    if fast.session_epoch != FINAL_EPOCH or fast.session_id:
        return await _serve(ctx, _as_request(ctx, fast), None, None)
    deadline = trio.current_time() + fast.max_wait_ms / 1000
    keys = [_topic_id(t.key) for t in fast.topics] if ctx.version >= 13 else [t.key for t in fast.topics]
    names = _names(ctx, keys)
    denied = _denied(ctx, _replica_id(ctx), names)
    if not denied:
        answer = await _serve_empty(ctx, fast, names, deadline)
        if answer is not None:
            return [answer]
    return await _serve(ctx, _as_request(ctx, fast), deadline, denied)


async def _serve_empty(ctx: RequestContext, fast: FastFetchRequest, names: list[str | None],
                       deadline: float) -> bytes | None:
    """The answer when no partition has records or an error, waiting up to max_wait for an append as _serve does;
    else None: _serve answers then, from the start or, after an append, with a new read."""
    infos = ctx.broker.logs.topics
    topics = []
    served: list[tuple[Topic, int]] = []  # each topic and the partitions answered in it
    pack = empty_partition_packer(ctx.version)
    with_start = ctx.version >= 5
    kept = ctx.broker.fetch_heads
    for topic, name in zip(fast.topics, names, strict=True):
        info = infos.get(name) if name is not None else None
        if info is None:
            return None
        wanted = topic.partitions
        # The heads kept of the topic while it does not change (gateway/fetch_heads.py), else its partitions read.
        made = kept.current(info, with_start)
        heads = _heads(wanted, made.highs, made.heads) if made else None
        if heads is None:
            count = info.changes.count  # before the partitions are read
            highs: list[int] = []
            heads = _read_heads(wanted, info.partitions, pack, highs)
            if heads is None:  # records to read, an unknown partition or an offset out of range: the general path
                return None
            kept.add(info, with_start, count, [index for index, _, _ in wanted], highs, heads)
        served.append((info, len(heads)))
        topics.append((name, info.topic_id, heads))
    if fast.min_bytes > 0 and await _appended_while_waiting(ctx, fast, names, deadline):
        return None
    read_committed = fast.isolation_level == READ_COMMITTED
    answer = encode_empty_fetch_response(ctx.version, ctx.header.correlation_id, topics, read_committed)
    quotas = ctx.broker.quotas
    if (quotas.fetch.enabled or quotas.request.enabled) and _replica_id(ctx) < 0:
        delay = fetch_throttle(ctx, len(answer) - 4)
        if delay:  # throttled: no partitions at all, as Kafka's throttled answer
            return b"".join(encode_fetch_response(ctx.version, ctx.header.correlation_id, [], throttle_time_ms=delay))
    for info, answered in served:  # Kafka's TotalFetchRequestsPerSec, for the answer sent (counted per topic here)
        info.fetch_requests += answered
    return answer


def _heads(wanted: list[tuple[int, int, int]], highs: list[int | None], made: list[bytes | None]) -> list | None:
    """The heads of the partitions asked for from their topic's kept heads, if each is kept and asked at its high
    watermark (a high watermark not kept is None: never equal to an offset)."""
    count = len(highs)
    heads: list[bytes] = []
    add = heads.append
    for index, offset, _ in wanted:
        if not 0 <= index < count or offset != highs[index]:
            return None
        add(made[index])
    return heads


def _read_heads(wanted: list[tuple[int, int, int]], plogs: list[PartitionLog],
                pack: Callable[[int, int, int, int], bytes], highs: list[int]) -> list[bytes] | None:
    """The heads of the partitions asked for, read from their logs (their high watermarks into ``highs``), if each
    is asked at its high watermark."""
    count = len(plogs)
    heads: list[bytes] = []
    add, note = heads.append, highs.append
    for index, offset, _ in wanted:
        if not 0 <= index < count:
            return None
        high, lso, start = plogs[index].fetch_offsets()
        if offset != high:
            return None
        add(pack(index, high, lso, start))
        note(high)
    return heads


async def _appended_while_waiting(ctx: RequestContext, fast: FastFetchRequest, names: list[str | None],
                                  deadline: float) -> bool:
    """Wait for an append to the partitions asked for until the deadline; whether one came."""
    if trio.current_time() >= deadline:
        return False
    # The partitions as the request lists them: FetchWaiters reads them only if their topic gets an append.
    keys = [(name, (p for p, _, _ in topic.partitions)) for topic, name in zip(fast.topics, names, strict=True)
            if name and topic.partitions]
    # No append while waiting: the answer collected before the wait, as _serve answers then.
    return bool(keys) and await ctx.broker.wait_for_append(keys, deadline)


async def _serve(ctx: RequestContext, request: Any, deadline: float | None, denied: frozenset[str] | None, *,
                 quiet_check: bool = True) -> list[Chunk]:
    """The general path: sessions, reads, errors. ``deadline`` and ``denied`` when handle already has them.
    An incremental session with nothing new anywhere is answered without reading (``quiet_check``: the tests
    turn it off to compare with the full pass)."""
    broker = ctx.broker
    if not isinstance(request, _Request):
        request = _from_kio(request)
    session = broker.fetch_sessions.context(ctx.version, request, ctx.owner)
    if session.error:
        return encode_fetch_response(ctx.version, ctx.header.correlation_id, [], error_code=session.error)
    replica_id = fetch_replica_id(request)  # the request's, not its session's
    request = session.request
    quota = _within_quota(ctx, request, replica_id)
    by_id = ctx.version >= 13
    names = _names(ctx, [t.topic_id if by_id else t.topic for t in request.topics])
    if deadline is None:
        deadline = trio.current_time() + request.max_wait.total_seconds()
    # KafkaApis.handleFetchRequest: a consumer needs TOPIC READ; other topics answer TOPIC_AUTHORIZATION_FAILED.
    if denied is None:
        denied = _denied(ctx, replica_id, names)
    if denied:
        names = [_Denied(n) if n in denied else n for n in names]
    keys: list[tuple[str, Iterable[int]]] | None = None  # the partitions to wake up for, once a wait is needed
    reads: list[tuple[PartitionLog, int]] = []
    quiet_check = quiet_check and session.incremental and not denied
    while True:
        topics, total, error = await _pass(ctx, request, names, reads, quiet_check)
        if total >= request.min_bytes or error or trio.current_time() >= deadline:
            break
        if keys is None:
            keys = session.watched(names, denied)
        if not keys:
            break
        if not await broker.wait_for_append(keys, deadline) and not total:
            # No append to these partitions while waiting: the answer is the one just collected (nothing was
            # read, so it holds no file slices), as if sent when the wait began; Kafka's DelayedFetch reads
            # again on expiry, which would find the same (empty) data at 1,000 partitions' cost.
            break
    return _answer(ctx, session, topics, reads, quota)


def _answer(ctx: RequestContext, session: SessionContext, topics: list[FetchTopicResult] | None,
            reads: list[tuple[PartitionLog, int]], quota: bool) -> list[Chunk]:
    """The answer to send; under client quotas recorded first, and if throttled replaced by one with no
    partitions (Kafka's getThrottledResponse; its bytes are taken back and not counted as sent)."""
    topics = session.response_topics(topics) if topics is not None else []
    chunks = encode_fetch_response(ctx.version, ctx.header.correlation_id, topics, session_id=session.session_id)
    if quota:
        delay = fetch_throttle(ctx, sum(c.size if isinstance(c, FileSlice) else len(c) for c in chunks) - 4)
        if delay:
            return encode_fetch_response(ctx.version, ctx.header.correlation_id, [], throttle_time_ms=delay,
                                         session_id=session.throttled(ctx.broker.fetch_sessions))
    _count_reads(reads)
    return chunks


def _within_quota(ctx: RequestContext, request: Any, replica_id: int) -> bool:
    """Whether the answer is measured against client quotas (a consumer's, with a quota set); if so, max_bytes
    capped at what its consumer_byte_rate allows over the quota's windows (Kafka's getMaxValueInQuotaWindow)."""
    quotas = ctx.broker.quotas
    if not (quotas.fetch.enabled or quotas.request.enabled) or replica_id >= 0:  # followers: no client quotas
        return False
    request.max_bytes = fetch_max_bytes(ctx, request.max_bytes)
    request.min_bytes = min(request.min_bytes, request.max_bytes)
    return True


def _count_reads(reads: list[tuple[PartitionLog, int]]) -> None:
    """Kafka's BytesOutPerSec and TotalFetchRequestsPerSec, for the answer sent."""
    for plog, size in reads:
        counters = plog.counters
        counters.fetch_requests += 1
        if size:
            counters.bytes_out += size


async def _pass(ctx: RequestContext, request: Any, names: list[str | None], reads: list[tuple[PartitionLog, int]],
                quiet_check: bool) -> tuple[list[FetchTopicResult] | None, int, bool]:
    """One pass of _serve's loop: (topics, bytes found, any error), topics None for a quiet session."""
    quiet = _quiet_session(ctx.broker.logs.topics, request, names) if quiet_check else None
    if quiet is not None:  # what _collect and response_topics would answer: no partition
        reads[:] = [(plog, 0) for plog in quiet]
        return None, 0, False
    cold: list[tuple[int, int, int]] = []
    found = _collect(ctx, request, names, reads, cold)
    if cold:  # data to come from disk: paged in by a worker thread, then read from the cache on the loop
        await page_in(cold)
        found = _collect(ctx, request, names, reads)
    return found


def _quiet_session(infos, request, names: list[str | None]) -> list[PartitionLog] | None:
    """The logs of an incremental session's partitions if none has news, else None: every one known, at its
    high watermark, with the watermarks the client last got (an incremental answer then lists no partition)."""
    quiet = []
    note = quiet.append
    for topic, name in zip(request.topics, names, strict=True):
        info = infos.get(name) if name is not None else None
        if info is None:
            return None
        plogs = info.partitions
        count = len(plogs)
        for known in topic.partitions:
            index = known.partition
            if not 0 <= index < count:
                return None
            plog = plogs[index]
            high, lso, start = plog.fetch_offsets()
            if (known.fetch_offset != high or high != known.high_watermark or lso != known.last_stable_offset
                    or start != known.log_start_offset):
                return None
            note(plog)
    return quiet
