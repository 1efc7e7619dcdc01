"""Appends that must be fsynced before they are acknowledged (flush.messages reached, flush.acks.all.enable with
acks=all): readable only once flushed, as Kafka's append fsyncs before it moves the high watermark."""

from __future__ import annotations

import os

from storage_helpers import NOW, make_batch

from logway.storage import fs
from logway.wire.batch import iter_headers


def offsets(plog) -> list[int]:
    """The base offsets a consumer reading from the start would get."""
    return [h.base_offset for _, h in iter_headers(plog.read_bytes(0, 1 << 20))]


def test_flush_messages_1_hides_an_append_until_it_is_flushed(open_log):
    plog = open_log({"flush.messages": "1"})
    result = plog.append(make_batch([b"a"]), now_ms=NOW)
    assert result.flush_needed
    assert plog.log_end_offset == 1 and plog.high_watermark == 0 and plog.fetch_offsets() == (0, 0, 0)
    assert offsets(plog) == []
    plog.flush()
    assert plog.high_watermark == 1 and offsets(plog) == [0]


def test_flush_acks_all_waits_for_acks_all_only(open_log):
    plog = open_log({"flush.acks.all.enable": "true"})
    assert not plog.append(make_batch([b"acks=1"]), now_ms=NOW).flush_needed
    assert plog.high_watermark == 1  # visible at once, as without the setting
    assert plog.append(make_batch([b"acks=all"]), now_ms=NOW, acks_all=True).flush_needed
    assert not plog.append(make_batch([b"acks=1 after"]), now_ms=NOW).flush_needed
    assert plog.high_watermark == 1  # the acks=1 append behind the waiting one waits with it
    plog.flush()
    assert plog.high_watermark == 3 and offsets(plog) == [0, 1, 2]


def test_the_defaults_flush_nothing_before_an_acknowledgement(open_log):
    plog = open_log()
    assert not plog.append(make_batch([b"a"]), now_ms=NOW, acks_all=True).flush_needed
    assert plog.high_watermark == 1 and plog.recovery_point == 0


def test_flush_messages_n_shows_up_to_n_minus_1_unflushed_records(open_log):
    plog = open_log({"flush.messages": "3"})
    assert not plog.append(make_batch([b"a"]), now_ms=NOW).flush_needed
    assert not plog.append(make_batch([b"b"]), now_ms=NOW).flush_needed
    assert plog.high_watermark == 2  # Kafka: below flush.messages, appends are acknowledged and read unflushed
    assert plog.append(make_batch([b"c"]), now_ms=NOW).flush_needed
    assert plog.high_watermark == 2  # never goes back, and not past the append waiting for its fsync
    plog.flush()
    assert plog.high_watermark == 3 and plog.recovery_point == 3


def test_a_flush_syncs_rolled_segments_whole_and_the_active_log_alone(open_log, monkeypatch):
    plog = open_log({"flush.messages": "1", "segment.bytes": "300", "index.interval.bytes": "1"})
    for i in range(6):
        plog.append(make_batch([b"%d" % i * 40]), now_ms=NOW)
    synced: list[str] = []
    real = fs.fdatasync

    def fdatasync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[1])
        real(fd)

    monkeypatch.setattr(fs, "fdatasync", fdatasync)
    plog.flush()
    rolled = [f"{base:020d}" for base in plog.segment_base_offsets[:-1]]
    active = f"{plog.segment_base_offsets[-1]:020d}"
    assert len(rolled) >= 2
    snapshots = sorted(name for name in synced if name.endswith(".snapshot"))  # the producer state of each roll
    assert snapshots == [f"{b:020d}.snapshot" for b in plog.segment_base_offsets[1:]]
    assert sorted(n for n in synced if n not in snapshots) == sorted(
        [f"{b}.{kind}" for b in rolled for kind in ("log", "index", "timeindex")] + [f"{active}.log"])
    synced.clear()
    plog.append(make_batch([b"more"]), now_ms=NOW)
    plog.flush()
    assert synced == [f"{active}.log"]  # the rolled segments were synced whole once
    plog.flush()
    assert synced == [f"{active}.log"]  # nothing new: no fsync at all
