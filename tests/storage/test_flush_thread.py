"""flush() from a worker thread while the loop thread keeps appending and reading."""

from __future__ import annotations

import threading

from storage_helpers import NOW, make_batch

from logway.wire.batch import iter_headers


def test_flush_from_a_thread_while_appending(open_log):
    plog = open_log({"segment.bytes": "4000", "index.interval.bytes": "256"})
    stop = threading.Event()
    flushed: list[int] = []
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set() and len(flushed) < 10_000:
                plog.flush()
                flushed.append(plog.recovery_point)
        except BaseException as e:  # surfaced by the assertion below
            errors.append(e)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(1500):
            plog.append(make_batch([b"%05d" % i] * 2), now_ms=NOW)
            if i % 100 == 0:
                assert list(iter_headers(plog.read_bytes(max(0, 2 * i - 10), 600)))
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not thread.is_alive() and not errors
    assert flushed == sorted(flushed)  # the recovery point only moves forward
    assert len(plog.segment_base_offsets) > 10
    plog.flush()
    assert plog.recovery_point == plog.log_end_offset == 3000
    plog._close_files()
    # everything below the recovery point is trusted on reopen and reads back whole
    again = open_log({"segment.bytes": "4000", "index.interval.bytes": "256"}, recovery_point=3000)
    assert again.log_end_offset == 3000
    assert [h.base_offset for _, h in iter_headers(again.read_bytes(2990, 10_000))] == [2990, 2992, 2994, 2996, 2998]
