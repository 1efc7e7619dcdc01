"""ListOffsets (key 2), v1-v8.

Special timestamps: -1 LATEST (the log end offset: the next offset to be written, which Spark's reader
depends on; with read_committed, the last stable offset, equal here as there are no transactions), -2
EARLIEST (log start offset), -3 MAX_TIMESTAMP (v7+, KIP-734), -4 EARLIEST_LOCAL (v8+, KIP-405: the
local log start, the same as earliest without tiered storage). Other values: the first offset whose
timestamp is >= the target, or offset -1 / timestamp -1 if none.
v2: isolation_level (READ_COMMITTED: LATEST is the last stable offset); v4: current_leader_epoch and leader_epoch (we have one epoch: 0); v6: flexible.
Errors are per partition: a corrupt stored batch met by a lookup by time answers CORRUPT_MESSAGE, an I/O
error KAFKA_STORAGE_ERROR, anything unexpected UNKNOWN_SERVER_ERROR (logged, as Kafka's
KafkaApis.handleListOffsetRequest does); the other partitions are answered.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from logway.storage.errors import UnknownTopicOrPartition
from logway.wire.errors import ErrorCode, KafkaError
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.list_offsets.v8.request import ListOffsetsRequest
    from kio.schema.list_offsets.v8.response import ListOffsetsResponse

    from logway.gateway.context import RequestContext

log = logging.getLogger(__name__)

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 8

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


def _lookup(plog, timestamp: int, read_committed: bool) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets target; LATEST is the last stable offset for READ_COMMITTED (Kafka)."""
    if timestamp == LATEST:
        return (plog.last_stable_offset if read_committed else plog.log_end_offset), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
    elif timestamp < 0:
        raise KafkaError(f"invalid ListOffsets timestamp {timestamp}", ErrorCode.invalid_request)
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    return found


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    topics_out = []
    for topic in request.topics:
        partitions_out = []
        for p in topic.partitions:
            entry = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                     "timestamp": -1, "offset": -1, "leader_epoch": -1}
            try:
                plog = broker.partition(topic.name, p.partition_index)
                offset, timestamp = _lookup(plog, p.timestamp, getattr(request, "isolation_level", 0) == 1)
                entry.update(offset=offset, timestamp=timestamp, leader_epoch=0 if offset >= 0 else -1)
            except (UnknownTopicOrPartition, KafkaError) as exc:
                entry["error_code"] = exc.error_code
                if exc.error_code in (ErrorCode.corrupt_message, ErrorCode.kafka_storage_error):
                    log.error("ListOffsets of %s-%d failed: %s", topic.name, p.partition_index, exc)
            except Exception:
                log.exception("ListOffsets of %s-%d failed unexpectedly", topic.name, p.partition_index)
                entry["error_code"] = ErrorCode.unknown_server_error
            partitions_out.append(entry)
        topics_out.append({"name": topic.name, "partitions": partitions_out})
    return build(response_type(API_KEY, ctx.version), {"throttle_time": 0, "topics": topics_out})
