"""Property: after any sequence of writes, tombstones and compactions the log equals a model of Kafka's rules."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NOW, keyed_batch, log_records

from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog

RETENTION = 1000
PROPS = {"cleanup.policy": "compact", "segment.bytes": "400", "delete.retention.ms": str(RETENTION)}

records = st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=4)  # (key, is tombstone)
write = st.tuples(st.just("write"), records)
steps = st.lists(
    st.one_of(write, write, write, st.tuples(st.just("compact"), st.integers(0, 1500))), min_size=10, max_size=50
)


def compact_model(model, horizons, end, now):
    """Kafka's cleaner on the model: below ``end`` the newest record of each key, minus expired tombstones."""
    latest = {}
    for offset, key, _, _ in model:
        if offset < end:
            latest[key] = offset
    kept, stamped = [], {}
    for offset, key, value, batch in model:
        if offset < end:
            if latest[key] != offset:
                continue
            if value is None:
                horizon = horizons.get(batch)
                if horizon is not None and now >= horizon:
                    continue
                if horizon is None:
                    stamped[batch] = now + RETENTION  # KIP-534: first clean that keeps it stamps the batch
        kept.append((offset, key, value, batch))
    horizons.update(stamped)
    return kept


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps)
def test_compaction_matches_the_model(tmp_path_factory, ops):
    directory = tmp_path_factory.mktemp("prop") / "t-0"
    plog = PartitionLog(directory, "t", 0, LogConfig.from_properties(PROPS))
    model, horizons, now = [], {}, NOW
    try:
        for batch_id, (kind, arg) in enumerate(ops):
            if kind == "write":
                base = plog.log_end_offset
                pairs = [(b"k%d" % key, None if dead else b"v%d" % (base + i)) for i, (key, dead) in enumerate(arg)]
                plog.append(keyed_batch(pairs, timestamp=now), now_ms=now)
                model += [(base + i, k, v, batch_id) for i, (k, v) in enumerate(pairs)]
            else:
                now += arg
                stats = plog.compact(now)
                plog.finish_compaction()
                if stats.end_offset > stats.first_dirty_offset:
                    assert stats.end_offset == plog.segment_base_offsets[-1]
                    model = compact_model(model, horizons, stats.end_offset, now)
            assert log_records(plog) == [(o, k, v) for o, k, v, _ in model]
        plog.close()
        again = PartitionLog(directory, "t", 0, LogConfig.from_properties(PROPS))
        assert log_records(again) == [(o, k, v) for o, k, v, _ in model]
        again.close()
    finally:
        plog._close_files()
