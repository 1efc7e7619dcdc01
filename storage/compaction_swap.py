"""One log's compaction: its cleaner offset, the compaction in flight, and the swap of its output into the log.

Compaction is two calls: `CompactionSwap.compact` (worker thread) reads inactive segments of a
snapshot of the log's segment tuple and writes ``.cleaned`` segments (storage.cleaner);
`CompactionSwap.finish` (loop thread, no lock needed) swaps them into the tuple if their sources
are still live. While a compaction runs the log defers closing the files of removed segments, so
the worker never reads a closed (or reused) descriptor. A truncation meanwhile (counted here)
makes the whole result stale: it is discarded.

Crash safety of the swap follows Kafka's LocalLog.replaceSegments: ``.cleaned`` files are
fsynced, renamed ``.swap`` (the log file last: a ``<base>.log.swap`` commits the swap), the
directory is fsynced (so no later rename reaches the disk first: a power loss, not only a kill,
keeps the order), the sources are renamed ``.deleted``, then the ``.swap`` files get their final
names. Loading
(storage.log_loader) deletes ``.cleaned`` files (an unfinished compaction: the old segments
stay) and completes a ``.swap`` (the segments it replaced are deleted first), so a kill at any
point recovers either the old or the new segments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from logway.storage import fs
from logway.storage.cleaner import (
    CleanableRange,
    CompactionResult,
    CompactionStats,
    clean_log,
    cleanable_range,
    discard,
)
from logway.storage.producer_state import ProducerStateManager
from logway.storage.segment import SWAP_SUFFIX, LogSegment
from logway.storage.txn_index import AbortedTxns, write_entries

if TYPE_CHECKING:
    from logway.storage.partition_log import PartitionLog


class CompactionSwap:
    """The compaction state of one PartitionLog (Kafka keeps it in LogCleanerManager) and the swap into it."""

    def __init__(
        self,
        log: PartitionLog,
        producers: ProducerStateManager,
        aborted: AbortedTxns,
        cleaner_offset: int | None,
        clock_ms: Callable[[], int],
    ) -> None:
        self._log = log
        self._producers = producers
        self._aborted = aborted
        self._clock = clock_ms
        self.cleaner_offset = cleaner_offset  # first dirty offset (Kafka's cleaner-offset-checkpoint entry)
        self.compacting = False  # `compact` has started and `finish` has not run yet
        self.failed = False  # the last compaction raised (Kafka then marks the partition uncleanable)
        self._prepared: tuple[CompactionResult, int] | None = None
        self._truncations = 0

    def cleanable_range(self, now_ms: int) -> CleanableRange:
        """Dirty section, cleanable bytes and ratio as Kafka's LogCleanerManager computes them (loop thread)."""
        log = self._log
        return cleanable_range(
            log.segments, log.log_start_offset, log.log_end_offset, self.cleaner_offset, log.config, now_ms,
            self._producers.first_unstable_offset(),
        )

    def compact(self, now_ms: int) -> CompactionStats:
        """Compact the cleanable dirty section into ``.cleaned`` segments; safe in a worker thread.

        Reads only inactive segments of the tuple as it is now and writes new files; the loop
        thread keeps appending and reading meanwhile. Nothing is visible until the loop thread
        calls `finish`, which must follow every call (also when this one raised).
        """
        log = self._log
        if self.compacting:
            raise RuntimeError(f"a compaction of {log.topic}-{log.partition} is already in progress")
        # Set before taking the snapshot: from here on the loop keeps removed segments' files open.
        self.compacting = True
        truncations = self._truncations
        try:
            segments = log.segments
            rng = cleanable_range(segments, log.log_start_offset, log.log_end_offset, self.cleaner_offset, log.config,
                                  now_ms, self._producers.first_unstable_offset())
            aborted = self._aborted.by_producer()
            result = clean_log(
                log.dir, segments, rng, log.config, log.cleaner_config, self._producers.last_data_offsets(), now_ms,
                aborted,
            )
            for group in result.groups:
                # The aborted transactions of the replaced segments move with their markers (which compaction
                # keeps), in a txnindex written durably with the rest of the output.
                write_entries(group.cleaned.txn_index_path,
                              self._aborted.with_markers_in(group.sources[0].base_offset, group.sources[-1].end_offset))
        except BaseException:
            # A truncation under a running compaction can make it read short segments: not the log's fault.
            self.failed = truncations == self._truncations
            self.compacting = False
            raise
        self.failed = False
        self._prepared = (result, truncations)
        return result.stats

    def finish(self, log_closed: bool) -> bool:
        """Swap the segments `compact` wrote into the live tuple (loop thread; a few renames, a directory fsync).

        A group whose source segments are no longer all live (retention or truncation got there
        first) is discarded, and so is everything when the log closed. Returns whether any cleaned
        segment was swapped in.
        """
        prepared, self._prepared = self._prepared, None
        self.compacting = False
        if prepared is None:
            return False
        result, truncations = prepared
        if log_closed or truncations != self._truncations:
            discard(result)
            return False
        now = self._clock()
        swapped = False
        groups, result.groups = result.groups, []
        for i, group in enumerate(groups):
            try:
                installed = self._swap_in(group.sources, group.cleaned, now)
            except OSError:
                # A failed rename leaves this group to load-time recovery; the rest are not attempted.
                for rest in groups[i + 1 :]:
                    rest.cleaned.delete_files()
                raise
            if installed:
                swapped = True
            else:
                group.cleaned.delete_files()
        self.cleaner_offset = min(max(result.stats.end_offset, self.cleaner_offset or 0), self._log.log_end_offset)
        return swapped

    def _swap_in(self, sources: tuple[LogSegment, ...], cleaned: LogSegment, now_ms: int) -> bool:
        """Replace ``sources`` (if still live and consecutive) by ``cleaned`` with Kafka's rename order."""
        segments = self._log.segments
        try:
            i = segments.index(sources[0])
        except ValueError:
            return False
        if segments[i : i + len(sources)] != sources or i + len(sources) >= len(segments):
            return False
        cleaned.change_suffix(SWAP_SUFFIX)  # from here a crash completes the swap at load
        # The renames that follow must not reach the disk before this one (Kafka's replaceSegments flushes the
        # directory here too): one fsync on the event loop per swapped group, at most every log.cleaner.backoff.ms.
        fs.sync_dir(self._log.dir)
        self._log.replace_segments(i, len(sources), cleaned, now_ms)
        cleaned.change_suffix("")
        self._log.directory_changed()
        return True

    def truncated(self, log_end_offset: int) -> None:
        """The log was truncated: a compaction planned before this point is not swapped in."""
        self._truncations += 1
        if self.cleaner_offset is not None and self.cleaner_offset > log_end_offset:
            self.cleaner_offset = log_end_offset  # Kafka's maybeTruncateCheckpoint

    def abandon(self) -> None:
        """The log is closing: remove what a finished compaction wrote and was not swapped in yet."""
        if self._prepared is not None:
            discard(self._prepared[0])
            self._prepared = None
        self.compacting = False
