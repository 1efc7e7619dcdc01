"""PartitionLog.read_extent: the file range a read will touch, known without I/O (the fetch path pages it in
off the event loop when it is not cached, gateway/cold_reads.py). A slice outside it would be read cold on
the loop."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.partition_log import PartitionLog


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 600)), min_size=1, max_size=60),
    interval=st.sampled_from([0, 64, 300, 4096]),
    data=st.data(),
)
def test_the_extent_holds_every_slice_read(tmp_path_factory, clock, sizes, interval, data):
    directory = tmp_path_factory.mktemp("extent") / "t-0"
    config = LogConfig.from_properties({"segment.bytes": "6000", "index.interval.bytes": str(interval)})
    plog = PartitionLog(directory, "t", 0, config, clock_ms=clock)
    try:
        for records, size in sizes:
            plog.append(make_batch([b"v" * size] * records), now_ms=NOW)
        assert plog.read_extent(plog.log_end_offset, 1 << 20) is None
        offsets = st.lists(st.integers(0, plog.log_end_offset - 1), min_size=1, max_size=20)
        for offset in data.draw(offsets):
            max_bytes = data.draw(st.sampled_from([0, 100, 1000, 1 << 20]))
            read = plog.read(offset, max_bytes, min_one=True)
            fd, position, size = plog.read_extent(offset, max_bytes)
            assert fd == read.fd
            assert position <= read.position
            if read.size <= max_bytes:  # (KIP-74's oversized first batch may run past it)
                assert read.position + read.size <= position + size
    finally:
        plog._close_files()
