"""DescribeLogDirs (key 35), v1-v5 (Kafka 4 serves the same; v0 was removed).

Every log dir of this broker with the partitions it holds (all of them for a null topic list; the named
ones otherwise, unknown topics and partitions left out as Kafka does): size in bytes (the segment files),
offset lag 0 (no future replica catching up), is_future false. v1: no change; v2: flexible; v3: a top-level
error code; v4: total and usable bytes of the dir's file system; v5: is_cordoned (KIP-1066: never here). A
log dir taken offline after an I/O error answers KAFKA_STORAGE_ERROR with no topics. Needs DESCRIBE on the
cluster: otherwise CLUSTER_AUTHORIZATION_FAILED (v3+) and no dirs, as KafkaApis.handleDescribeLogDirsRequest.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from logway.wire.errors import ErrorCode
from logway.wire.protocol import build, response_type

if TYPE_CHECKING:
    from kio.schema.describe_log_dirs.v5.request import DescribeLogDirsRequest
    from kio.schema.describe_log_dirs.v5.response import DescribeLogDirsResponse

    from logway.gateway.context import RequestContext

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


def _wanted(broker, topics) -> dict[str, set[int] | None]:
    """topic -> partitions asked for (None: all), only for topics that exist."""
    if topics is None:
        return dict.fromkeys(broker.logs.topics)
    wanted: dict[str, set[int] | None] = {}
    for t in topics:
        if t.topic in broker.logs.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    return wanted


def _space(log_dir: Path) -> tuple[int, int]:
    """Total and usable bytes of the file system holding ``log_dir`` (Kafka: FileStore total/usable space)."""
    try:
        st = os.statvfs(log_dir)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def _results(broker, wanted: dict[str, set[int] | None]) -> list[dict]:
    by_dir: dict[Path, dict[str, list[dict]]] = {d: defaultdict(list) for d in broker.logs.log_dirs}
    offline: set[Path] = set()
    for name, partitions in wanted.items():
        for plog in broker.logs.topics[name].partitions:
            if partitions is not None and plog.partition not in partitions:
                continue
            log_dir = plog.dir.parent
            if plog.offline:
                offline.add(log_dir)
                continue
            by_dir[log_dir][name].append({"partition_index": plog.partition, "partition_size": plog.size_bytes,
                                          "offset_lag": 0, "is_future_key": False})
    results = []
    for log_dir, topics in by_dir.items():
        total, usable = _space(log_dir)
        failed = log_dir in offline
        results.append({
            "error_code": ErrorCode.kafka_storage_error if failed else ErrorCode.none,
            "log_dir": str(log_dir.resolve()),
            "topics": [] if failed else [{"name": n, "partitions": p} for n, p in topics.items()],
            "total_bytes": total, "usable_bytes": usable, "is_cordoned": False,
        })
    return results


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    response = response_type(API_KEY, ctx.version)
    results = _results(ctx.broker, _wanted(ctx.broker, request.topics))
    return build(response, {"throttle_time": 0, "error_code": ErrorCode.none, "results": results})
