"""`logway dump-log` and Kafka's own DumpLogSegments on the same files print the same lines.

The files: a partition Logway wrote (idempotent and plain batches; gzip, zstd, lz4 and snappy batches; headers,
null keys and values; an offset-index entry every 100 bytes), one of a LogAppendTime topic, and a hand-built
segment with transaction markers whose offset index points at a wrong batch. One JVM run dumps them all, deep, with data.
"""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

from confluent_kafka import Producer

from compat_tests.kafka.cluster import java
from logway.cli.main import main
from logway.wire.records import ControlType, build_batch, build_end_txn_marker

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"


def _logway(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _write_partition(bootstrap: str) -> None:
    code, _out, err = _logway("topics", "create", "--bootstrap-server", bootstrap, "--topic", "dump-compare",
                              "--partitions", "1", "--config", "index.interval.bytes=100")
    assert code == 0, err
    for codec in ("none", "gzip", "zstd", "lz4", "snappy"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                             "enable.idempotence": codec in ("none", "zstd")})
        for i in range(8):
            producer.produce("dump-compare", key=None if i == 0 else f"{codec}-key-{i}".encode(),
                             value=None if i == 7 else f"{codec} é {i} ".encode() * (i + 1),
                             headers=[("trace", b"abc"), ("empty", None)] if i == 3 else None)
            if i % 3 == 2:
                producer.flush()
        producer.flush()


def _write_log_append_time_partition(bootstrap: str) -> None:
    code, _out, err = _logway("topics", "create", "--bootstrap-server", bootstrap, "--topic", "dump-compare-lat",
                              "--partitions", "1", "--config", "message.timestamp.type=LogAppendTime")
    assert code == 0, err
    for codec in ("none", "gzip"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20})
        for i in range(3):
            producer.produce("dump-compare-lat", key=b"k%d" % i, value=b"v%d" % i, timestamp=1_600_000_000_000 + i)
        producer.flush()


def _transaction_segment(folder: Path) -> list[Path]:
    """A segment with a transactional batch, a COMMIT and an ABORT marker, and indexes that lie."""
    folder.mkdir()
    data = build_batch([(b"k", b"v", ()), (None, b"w", ())], base_offset=0, producer_id=7, producer_epoch=1,
                       base_sequence=0, is_transactional=True, base_timestamp=1_700_000_000_000)
    commit_at = len(data)
    data += build_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                 timestamp=1_700_000_000_005, base_offset=2)
    data += build_end_txn_marker(ControlType.ABORT, producer_id=8, producer_epoch=0, coordinator_epoch=4,
                                 timestamp=1_700_000_000_009, base_offset=3)
    log = folder / "00000000000000000000.log"
    log.write_bytes(data)
    index = folder / "00000000000000000000.index"
    index.write_bytes((1).to_bytes(4, "big") + (0).to_bytes(4, "big")  # right: batch 0 ends at offset 1
                      + (3).to_bytes(4, "big") + commit_at.to_bytes(4, "big"))  # wrong: the COMMIT ends at 2
    timeindex = folder / "00000000000000000000.timeindex"
    entries = [(1_700_000_000_001, 1),  # batch 0 ends at 1 but its largest timestamp is ...000: a mismatch
               (1_700_000_000_000, 2),  # the COMMIT ends at 2 (timestamp ...005), and this goes backwards
               (1_700_000_000_010, 5)]  # no batch ends at 5
    timeindex.write_bytes(b"".join(ts.to_bytes(8, "big") + off.to_bytes(4, "big") for ts, off in entries))
    return [log, index, timeindex]


def _wait_for_index_files(part: Path, timeout: float = 30.0) -> None:
    """Logway holds new index entries in memory and writes them in one write at a flush, a roll or its
    maintenance pass (every 5 s here). Wait for that write, so the two tools read the same files: Kafka's
    DumpLogSegments read an empty index in one CI run and Logway's dump, a moment later, the written one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(f.stat().st_size > 0 for f in part.iterdir() if f.suffix in (".index", ".timeindex")):
            return
        time.sleep(0.2)
    raise AssertionError(f"index entries of {part} not written within {timeout} s")


def test_dump_log_prints_what_kafkas_dump_log_segments_prints(logway_ref, tmp_path: Path) -> None:
    _write_partition(logway_ref.bootstrap)
    _write_log_append_time_partition(logway_ref.bootstrap)
    part = logway_ref.data_dir / "dump-compare-0"
    _wait_for_index_files(part)
    files = sorted(p for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    files += sorted((logway_ref.data_dir / "dump-compare-lat-0").glob("*.log"))
    files += _transaction_segment(tmp_path / "txn-0")
    names = [str(f) for f in files]

    kafka = java(DUMP_LOG, "--deep-iteration", "--print-data-log", "--files", ",".join(names))
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    code, out, err = _logway("dump-log", "--deep-iteration", "--print-data", *names)
    assert code == 0, err

    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in out and "headerKeys: [trace,empty]" in out
    assert " LogAppendTime: " in out and "| offset: 0 LogAppendTime: " in out
    assert "timestamp: " in out  # the time index has entries
    for codec in ("none", "gzip", "zstd", "lz4", "snappy"):
        assert f" compresscodec: {codec} " in out, codec
    assert out.splitlines() == kafka.stdout.splitlines()
    # The lying index entries, reported by both in the same words.
    assert err.splitlines() == [
        f"Mismatches in :{files[-2]}", "  Index offset: 3, log offset: 2",
        f"Found timestamp mismatch in :{files[-1]}",
        "  Index timestamp: 1700000000001, log timestamp: 1700000000000",
        "  Index timestamp: 1700000000000, log timestamp: 1700000000005",
        f"Found out of order timestamp in :{files[-1]}",
        "  Index timestamp: 1700000000000, Previously indexed timestamp: 1700000000001",
        f"The following indexed offsets are not found in :{files[-1]}",
        "Indexed offset: 5, found log offset: -1"]
    assert err.splitlines() == kafka.stderr.splitlines(), kafka.stderr
