"""A partition log's change count (PartitionLog.changes) moves whenever what a Fetch answers of it without reading
records moves: its high watermark, last stable offset or log start offset (fetch_offsets()). The broker keeps a
connection's last "nothing new" Fetch answer while its topics' counts stay the same (gateway/quiet_fetches.py),
so a change that did not count would leave a consumer with a stale answer.

Random sequences of every operation that can move them: plain and transactional appends, commit and abort
markers, appends waiting for their fsync (flush.acks.all.enable) and the flushes that make them visible,
truncation, DeleteRecords and retention."""

from __future__ import annotations

import random

import pytest
from storage_helpers import NOW

from logway.storage.errors import KafkaStorageError, OffsetOutOfRange
from logway.wire.records import build_batch


def batch(n: int, pid: int = -1, seq: int = -1, transactional: bool = False) -> bytearray:
    return bytearray(build_batch([(None, b"v" * 200, ())] * n, base_timestamp=NOW, producer_id=pid,
                                 producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                                 is_transactional=transactional))


@pytest.mark.parametrize("seed", range(6))
def test_every_change_of_the_fetch_offsets_is_counted(open_log, clock, seed):
    rng = random.Random(seed)
    plog = open_log({"segment.bytes": "1024", "flush.acks.all.enable": str(seed % 2 == 0).lower(),
                     "retention.ms": "20000"})
    sequences = {100: 0, 200: 0}  # the producers appending, and their next sequence numbers
    open_txns: set[int] = set()

    def append_plain() -> None:
        plog.append(batch(rng.randrange(1, 4)), now_ms=clock(), acks_all=rng.random() < 0.5)

    def append_txn() -> None:
        pid = rng.choice(sorted(sequences))
        n = rng.randrange(1, 3)
        plog.append(batch(n, pid, sequences[pid], transactional=True), now_ms=clock(), acks_all=rng.random() < 0.5)
        sequences[pid] += n
        open_txns.add(pid)

    def marker() -> None:
        if open_txns:
            pid = rng.choice(sorted(open_txns))
            plog.append_marker(pid, 0, rng.random() < 0.5, now_ms=clock())
            open_txns.discard(pid)

    def flush() -> None:
        plog.flush(full=rng.random() < 0.3)

    def truncate() -> None:
        if plog.log_end_offset > plog.log_start_offset:
            plog.truncate_to(rng.randrange(plog.log_start_offset, plog.log_end_offset + 1))
            # Truncation rebuilds the producers' state: a transaction cut off is no longer open, and sequence
            # numbers go back; new producers go on from here.
            open_txns.intersection_update(plog._producers.ongoing)
            for pid in list(sequences):
                del sequences[pid]
                sequences[pid + 1000] = 0

    def delete_records() -> None:
        try:
            plog.delete_records_before(rng.randrange(plog.log_start_offset, plog.high_watermark + 1))
        except OffsetOutOfRange:
            pass

    def retention() -> None:
        clock.now += rng.randrange(0, 10_000)
        plog.delete_old_segments(clock())

    operations = [append_plain, append_plain, append_txn, marker, flush, truncate, delete_records, retention]
    moved: dict[str, int] = {}
    for _ in range(600):
        operation = rng.choice(operations)
        before, count = plog.fetch_offsets(), plog.changes.count
        try:
            operation()
        except KafkaStorageError:
            continue
        after = plog.fetch_offsets()
        if after != before:
            moved[operation.__name__] = moved.get(operation.__name__, 0) + 1
            assert plog.changes.count != count, (operation.__name__, before, after)
    # The property was checked against real moves of every kind (a flush moves a high watermark only when
    # appends wait for their fsync).
    kinds = {"append_plain", "append_txn", "marker", "truncate", "delete_records", "retention"}
    assert kinds | ({"flush"} if seed % 2 == 0 else set()) <= set(moved), moved


def test_a_topics_partitions_share_its_count(tmp_path):
    """Partitions made for a topic and partitions loaded at start-up count in the topic's one count."""
    from logway.storage.config import LogConfig
    from logway.storage.log_manager import LogManager

    logs = LogManager([tmp_path], LogConfig())
    logs.open()
    topic = logs.create_topic("t", 3)
    assert all(plog.changes is topic.changes for plog in topic.partitions)
    topic.partitions[1].append(batch(1), now_ms=NOW)
    assert topic.changes.count > 0
    logs.close()
    again = LogManager([tmp_path], LogConfig())
    again.open()
    loaded = again.topics["t"]
    assert all(plog.changes is loaded.changes for plog in loaded.partitions)
    again.close()
