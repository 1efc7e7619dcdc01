"""Which segments retention removes from a log: Kafka's deleteLogStartOffsetBreachedSegments, then
deleteRetentionMsBreachedSegments and deleteRetentionSizeBreachedSegments (UnifiedLog), oldest first, whole
segments only and never the active one. PartitionLog.delete_old_segments drops them."""

from __future__ import annotations

import os
from collections.abc import Sequence

from logway.storage.config import LogConfig
from logway.storage.segment import LogSegment


def expired_segments(
    segments: Sequence[LogSegment], log_start_offset: int, config: LogConfig, now_ms: int, high_watermark: int,
) -> tuple[list[LogSegment], list[LogSegment], list[str]]:
    """(the oldest segments to delete, the segments kept, what made them go: for the log line).

    Time: a segment goes when now - its largest timestamp > retention.ms (seed 001; the file's mtime when it
    has no timestamps, as Kafka). Size: oldest segments go while the log stays at least retention.bytes large
    without them (Kafka's retentionSizeBreached rule). Neither takes a segment holding offsets at or above the
    high watermark (appends waiting for their fsync), so the log start offset never passes it (Kafka's
    deletableSegments: highWatermark >= the next segment's base offset).
    """
    kept = list(segments)
    doomed: list[LogSegment] = []
    reasons: list[str] = []
    # Whatever the cleanup policy: a segment whose successor starts at or below the log start offset (moved
    # by DeleteRecords) holds nothing readable.
    while len(kept) > 1 and kept[1].base_offset <= log_start_offset:
        doomed.append(kept.pop(0))
    if doomed:
        reasons.append("the log start offset")
    if not config.delete_enabled:
        return doomed, kept, reasons
    if config.retention_ms >= 0:
        before = len(doomed)
        while (len(kept) > 1 and kept[1].base_offset <= high_watermark
               and now_ms - _largest_timestamp(kept[0]) > config.retention_ms):
            doomed.append(kept.pop(0))
        if len(doomed) > before:
            reasons.append(f"retention.ms={config.retention_ms}")
    if config.retention_bytes >= 0:
        before = len(doomed)
        excess = sum(s.size for s in kept) - config.retention_bytes
        while len(kept) > 1 and kept[1].base_offset <= high_watermark and excess - kept[0].size >= 0:
            excess -= kept[0].size
            doomed.append(kept.pop(0))
        if len(doomed) > before:
            reasons.append(f"retention.bytes={config.retention_bytes}")
    return doomed, kept, reasons


def _largest_timestamp(seg: LogSegment) -> int:
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return int(os.stat(seg.log_path).st_mtime * 1000)
    except OSError:
        return 0
