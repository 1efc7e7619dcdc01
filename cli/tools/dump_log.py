"""`logway dump-log PATH...`: Kafka's DumpLogSegments (kafka-dump-log.sh) for Logway's and Kafka's segment files.

The lines are Kafka 4.3's, field for field, so scripts written against kafka-dump-log read ours:

- ``.log``: one line per batch (baseOffset ... isvalid), with --deep-iteration one ``| offset: ...`` line per
  record (--print-data adds ``key:`` and ``payload:`` as UTF-8), control records with their endTxnMarker;
  bytes after the last whole batch are reported as "Found N invalid bytes at the end of NAME".
- ``.index`` / ``.timeindex``: the entries, each checked against the segment's log as Kafka checks them
  (the batch at an offset entry's position must end at that offset; a time entry's offset must end a batch
  whose largest record timestamp is the entry's, timestamps increasing); problems are listed on stderr at
  the end, in Kafka's words. --index-sanity-check runs only the start-up check instead.

Files are only read (never opened for writing, unlike storage's index classes, whose load repairs files), so
a running broker's files can be dumped. Batches are read with wire.batch / wire.records. Two deliberate
differences: a broken batch length or an undecodable batch is one line on stderr (Kafka throws), and the
"Non-consecutive offsets" check starts from the segment's base offset (Kafka 4.3 starts every file at -1, so
it reports "-1 is followed by N" for every segment but the first).
"""

from __future__ import annotations

import argparse
import mmap
import struct
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from logway.cli.tools.errors import ToolError
from logway.wire import compression as codecs
from logway.wire.batch import (
    BATCH_HEADER_SIZE,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_SEQUENCE,
    BatchHeader,
    CorruptBatch,
    compute_crc,
    parse_header,
)
from logway.wire.records import Record, decode_batch, decode_legacy

HEADER_SIZE_UP_TO_MAGIC = 17  # Kafka's Records.HEADER_SIZE_UP_TO_MAGIC: offset, length, leader epoch, magic
RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0, the smallest size FileLogInputStream accepts
OFFSET_ENTRY = struct.Struct(">ii")  # storage.offset_index: relative offset, position
TIME_ENTRY = struct.Struct(">qi")  # storage.time_index: timestamp, relative offset
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}  # Kafka's ControlRecordType
_LEGACY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes (magic 0/1 message)


@dataclass
class Problems:
    """What Kafka's tool reports on stderr after every file: index mismatches and offset gaps."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)

    def print(self) -> None:
        out = sys.stderr
        for path, by_offset in self.index_mismatches.items():
            print(f"Mismatches in :{path}", file=out)
            for index_offset, log_offset in sorted(by_offset.items(), reverse=True):
                print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=out)
        for path, pairs in self.time_mismatches.items():
            print(f"Found timestamp mismatch in :{path}", file=out)
            for indexed, logged in pairs:
                print(f"  Index timestamp: {indexed}, log timestamp: {logged}", file=out)
        for path, pairs in self.out_of_order.items():
            print(f"Found out of order timestamp in :{path}", file=out)
            for indexed, previous in pairs:
                print(f"  Index timestamp: {indexed}, Previously indexed timestamp: {previous}", file=out)
        for path, pairs in self.not_found.items():
            print(f"The following indexed offsets are not found in :{path}", file=out)  # Kafka 4.3.1's words
            for indexed, found in pairs:
                print(f"Indexed offset: {indexed}, found log offset: {found}", file=out)
        for path, gaps in self.non_consecutive.items():
            print(f"Non-consecutive offsets in {path}", file=out)
            for before, after in sorted(gaps.items()):
                print(f"  {before} is followed by {after}", file=out)


@dataclass(frozen=True)
class Batch:
    """One batch as FileLogInputStream finds it: where it starts, its size and magic, the file's bytes."""

    data: memoryview
    position: int
    size: int
    magic: int

    @property
    def header(self) -> BatchHeader:
        return parse_header(self.data, self.position)

    @property
    def last_offset(self) -> int:
        if self.magic >= MAGIC_V2:
            return self.header.last_offset
        return struct.unpack_from(">q", self.data, self.position)[0]


def dump_log_command(args: argparse.Namespace) -> int:
    """Dump each file in turn, then Kafka's end-of-run problem report; 1 when a file could not be read."""
    problems = Problems()
    deep = args.deep_iteration or args.print_data
    status = 0
    for name in args.paths:
        path = Path(name)
        print(f"Dumping {name}", flush=True)
        try:
            if path.suffix == ".log":
                dump_log_file(path, deep, args.print_data, problems)
            elif path.suffix == ".index":
                dump_offset_index(path, args, problems)
            elif path.suffix == ".timeindex":
                dump_time_index(path, args, problems)
            else:
                print(f"Ignoring unknown file {name}", file=sys.stderr)
        except OSError as exc:
            other = f" ({exc.filename})" if exc.filename and str(exc.filename) != name else ""  # e.g. the index's log
            print(f"logway: dump-log: {name}: {exc.strerror or exc}{other}", file=sys.stderr)
            status = 1
        except ToolError as exc:
            print(f"logway: dump-log: {name}: {exc}", file=sys.stderr)
            status = 1
        sys.stdout.flush()
    problems.print()
    return status


# -- .log ---------------------------------------------------------------------------------------------------


def dump_log_file(path: Path, deep: bool, print_data: bool, problems: Problems) -> None:
    """DumpLogSegments.dumpLog: a line per batch, with ``deep`` a line per record."""
    start_offset = _start_offset(path)
    print(f"Log starting offset: {start_offset}")
    with _mapped(path) as data:
        last_offset = start_offset - 1
        valid_bytes = 0
        for batch in iter_batches(data, path):
            print_batch(batch)
            if deep:
                last_offset = _print_records(batch, path, last_offset, print_data, problems)
            valid_bytes += batch.size
        trailing = len(data) - valid_bytes
        if trailing > 0:
            print(f"Found {trailing} invalid bytes at the end of {path.name}")


def iter_batches(data: memoryview, path: Path, position: int = 0) -> Iterator[Batch]:
    """Batches from ``position`` as Kafka's FileLogInputStream reads them: stop at a partial batch at the end."""
    end = len(data)
    while position < end - HEADER_SIZE_UP_TO_MAGIC:
        length = struct.unpack_from(">i", data, position + 8)[0]
        size = length + LOG_OVERHEAD
        if size < RECORD_OVERHEAD_V0:
            raise ToolError(f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}) "
                            f"in file {path} (position {position}).")
        if size > end - position:
            return
        magic = data[position + 16]
        if magic >= MAGIC_V2 and size < BATCH_HEADER_SIZE:
            raise ToolError(f"batch at position {position}: size {size} is smaller than a record batch header "
                            f"({BATCH_HEADER_SIZE} bytes)")
        yield Batch(data, position, size, magic)
        position += size


def print_batch(batch: Batch) -> None:
    """DumpLogSegments.printBatchLevel."""
    if batch.magic >= MAGIC_V2:
        h = batch.header
        last_sequence = h.last_sequence if h.base_sequence != NO_SEQUENCE else NO_SEQUENCE
        horizon = f"OptionalLong[{h.base_timestamp}]" if h.attributes & DELETE_HORIZON_MASK else "OptionalLong.empty"
        valid = compute_crc(batch.data, batch.position, batch.size) == h.crc
        print(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
              f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
              f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
              f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
              f"deleteHorizonMs: {horizon} position: {batch.position} "
              f"{'LogAppendTime' if h.log_append_time else 'CreateTime'}: {h.max_timestamp} size: {batch.size} "
              f"magic: {batch.magic} compresscodec: {_codec(h.compression)} crc: {h.crc} isvalid: {_bool(valid)}")
        return
    offset, _size, crc, magic, attributes = _LEGACY.unpack_from(batch.data, batch.position)
    if magic == 1:
        timestamp = struct.unpack_from(">q", batch.data, batch.position + _LEGACY.size)[0]
        kind = "LogAppendTime" if attributes & 0x08 else "CreateTime"
    else:
        timestamp, kind = -1, "NoTimestampType"
    valid = _legacy_crc(batch) == crc
    print(f"offset: {offset} position: {batch.position} {kind}: {timestamp} size: {batch.size} magic: {magic} "
          f"compresscodec: {_codec(attributes & 0x07)} crc: {crc} isvalid: {_bool(valid)}")


def _print_records(batch: Batch, path: Path, last_offset: int, print_data: bool, problems: Problems) -> int:
    """DumpLogSegments.dumpBatchRecords: one line per record; returns the last offset seen."""
    records, header = _records(batch, path)
    if batch.magic >= MAGIC_V2:
        kind = "LogAppendTime" if header.log_append_time else "CreateTime"
    else:
        kind = "CreateTime" if batch.magic == 1 else "NoTimestampType"
    for record in records:
        if record.offset != last_offset + 1:
            problems.non_consecutive.setdefault(str(path.absolute()), {})[last_offset] = record.offset
        last_offset = record.offset
        line = (f"| offset: {record.offset} {kind}: {record.timestamp} keySize: {_size(record.key)} "
                f"valueSize: {_size(record.value)}")
        if header is not None:
            line += (f" sequence: {_sequence(header, record)} "
                     f"headerKeys: [{','.join(h.key for h in record.headers)}]")
            if header.is_control:
                line += _control(record)
        if print_data and not (header is not None and header.is_control):
            if record.key is not None:
                line += f" key: {_text(record.key)}"
            if record.value is not None:
                line += f" payload: {_text(record.value)}"
        print(line)
    return last_offset


def _records(batch: Batch, path: Path) -> tuple[list[Record], BatchHeader | None]:
    """The batch's records (decompressed); an undecodable batch is one line on stderr and no records."""
    raw = batch.data[batch.position : batch.position + batch.size]
    try:
        if batch.magic >= MAGIC_V2:
            decoded = decode_batch(raw, verify_crc=False)
            return decoded.records, decoded.header
        return list(decode_legacy(raw, verify_crc=False)), None
    except CorruptBatch as exc:
        print(f"logway: dump-log: {path}: records of the batch at position {batch.position}: {exc}", file=sys.stderr)
        return [], (batch.header if batch.magic >= MAGIC_V2 else None)


def _control(record: Record) -> str:
    """DumpLogSegments.printControlRecord for the record of a control batch."""
    key = record.key or b""
    if len(key) < 4:
        return " controlType: UNKNOWN(-1)"
    type_id = struct.unpack_from(">h", key, 2)[0]
    name = CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id in (0, 1) and record.value is not None and len(record.value) >= 6:
        epoch = struct.unpack_from(">i", record.value, 2)[0]
        return f" endTxnMarker: {name} coordinatorEpoch: {epoch}"
    return f" controlType: {name}({type_id})"


def _sequence(header: BatchHeader, record: Record) -> int:
    """DefaultRecord.sequence: the batch's base sequence plus the offset delta, wrapping at Int32.MAX_VALUE."""
    if header.base_sequence < 0:
        return NO_SEQUENCE
    return (header.base_sequence + record.offset - header.base_offset) % 2**31


# -- .index and .timeindex ----------------------------------------------------------------------------------


def dump_offset_index(path: Path, args: argparse.Namespace, problems: Problems) -> None:
    """DumpLogSegments.dumpIndex: entries, each checked against the batch at its position."""
    base = _start_offset(path)
    raw = path.read_bytes()
    entries = [(base + rel, pos) for rel, pos in OFFSET_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % 8])]
    log_path = path.with_suffix(".log")
    with _mapped(log_path) as log:
        if not entries:
            print(f"{path} is empty.")
            return
        if args.index_sanity_check:
            _offset_index_sanity(path, raw, entries, base, len(log))
            print(f"{path} passed sanity check.")
            return
        for i, (offset, position) in enumerate(entries):
            if offset == base and i > 0:  # Kafka: a preallocated, zero-filled tail after a crash
                return
            found = _first_batch_last_offset(log, log_path, position, args.max_message_size)
            if found != offset:
                problems.index_mismatches.setdefault(str(path.absolute()), {})[offset] = found
            if not args.verify_index_only:
                print(f"offset: {offset} position: {position}")


def _first_batch_last_offset(log: memoryview, log_path: Path, position: int, max_size: int) -> int:
    """Last offset of the batch at ``position`` (-1 when no whole batch starts there)."""
    if not 0 <= position < len(log):
        return -1
    window = log[: min(len(log), position + max_size)]
    try:
        for batch in iter_batches(window, log_path, position):
            return batch.last_offset
    except ToolError:
        pass
    return -1


def _offset_index_sanity(path: Path, raw: bytes, entries: list[tuple[int, int]], base: int, log_size: int) -> None:
    """OffsetIndex.sanityCheck, plus the checks Logway's start-up load makes (storage.offset_index)."""
    where = path.absolute()
    last_offset = entries[-1][0]
    if last_offset < base:
        raise ToolError(f"Corrupt index found, index file ({where}) has non-zero size but the last offset is "
                        f"{last_offset} which is less than the base offset {base}.")
    if len(raw) % OFFSET_ENTRY.size:
        raise ToolError(f"Index file {where} is corrupt, found {len(raw)} bytes which is neither positive nor a "
                        f"multiple of {OFFSET_ENTRY.size}.")
    for (o1, p1), (o2, p2) in zip(entries, entries[1:], strict=False):
        if o2 <= o1 or p2 <= p1:
            raise ToolError(f"Index file {where} is corrupt: entry (offset {o2}, position {p2}) does not follow "
                            f"(offset {o1}, position {p1})")
    if entries[-1][1] >= log_size:
        raise ToolError(f"Index file {where} is corrupt: position {entries[-1][1]} is past the end of the "
                        f"{log_size}-byte log")


def dump_time_index(path: Path, args: argparse.Namespace, problems: Problems) -> None:
    """DumpLogSegments.dumpTimeIndex: entries, each checked against the batch ending at its offset."""
    base = _start_offset(path)
    raw = path.read_bytes()
    entries = [(ts, base + rel) for ts, rel in TIME_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % 12])]
    log_path = path.with_suffix(".log")
    index_path = path.with_suffix(".index")
    index_raw = index_path.read_bytes() if index_path.exists() else b""
    index = [(base + rel, pos) for rel, pos in OFFSET_ENTRY.iter_unpack(index_raw[: len(index_raw) // 8 * 8])]
    with _mapped(log_path) as log:
        if args.index_sanity_check:
            _time_index_sanity(path, raw, entries, base)
            print(f"{path} passed sanity check.")
            return
        where = str(path.absolute())
        previous = -1  # RecordBatch.NO_TIMESTAMP
        for i, (timestamp, offset) in enumerate(entries):
            if offset == base and i > 0:
                return
            batch = _batch_ending_at_or_after(log, log_path, _lookup(index, offset), offset)
            if batch is None:
                problems.not_found.setdefault(where, []).append((offset, -1))
            elif batch.last_offset != offset:
                problems.not_found.setdefault(where, []).append((offset, batch.last_offset))
            else:
                records, _header = _records(batch, log_path)
                largest = max((r.timestamp for r in records), default=-1)
                if largest != timestamp:
                    problems.time_mismatches.setdefault(where, []).append((timestamp, largest))
                if previous >= timestamp:
                    problems.out_of_order.setdefault(where, []).append((timestamp, previous))
            if not args.verify_index_only:
                print(f"timestamp: {timestamp} offset: {offset}")
            previous = timestamp


def _lookup(index: list[tuple[int, int]], offset: int) -> int:
    """OffsetIndex.lookup: the position of the greatest entry with offset <= ``offset`` (0 when none)."""
    position = 0
    for entry_offset, entry_position in index:
        if entry_offset > offset:
            break
        position = entry_position
    return position


def _batch_ending_at_or_after(log: memoryview, log_path: Path, position: int, offset: int) -> Batch | None:
    try:
        for batch in iter_batches(log, log_path, position):
            if batch.last_offset >= offset:
                return batch
    except ToolError:
        pass
    return None


def _time_index_sanity(path: Path, raw: bytes, entries: list[tuple[int, int]], base: int) -> None:
    """TimeIndex.sanityCheck, plus the ordering Logway's start-up load requires (storage.time_index)."""
    where = path.absolute()
    if entries:
        first_ts, (last_ts, last_offset) = entries[0][0], entries[-1]
        if last_ts < first_ts:
            raise ToolError(f"Corrupt time index found, time index file ({where}) has non-zero size but the last "
                            f"timestamp is {last_ts} which is less than the first timestamp {first_ts}")
        if last_offset < base:
            raise ToolError(f"Corrupt time index found, time index file ({where}) has non-zero size but the last "
                            f"offset is {last_offset} which is less than the first offset {base}")
    if len(raw) % TIME_ENTRY.size:
        raise ToolError(f"Time index file {where} is corrupt, found {len(raw)} bytes which is neither positive nor "
                        f"a multiple of {TIME_ENTRY.size}.")
    for (t1, o1), (t2, o2) in zip(entries, entries[1:], strict=False):
        if t2 <= t1 or o2 < o1:
            raise ToolError(f"Time index file {where} is corrupt: entry (timestamp {t2}, offset {o2}) does not "
                            f"follow (timestamp {t1}, offset {o1})")


# -- helpers ------------------------------------------------------------------------------------------------


def _start_offset(path: Path) -> int:
    """The base offset in a segment file's name (00000000000000000042.log -> 42), as Kafka parses it."""
    stem = path.name.split(".")[0]
    if not stem.isdigit():
        raise ToolError(f"not a segment file name (expected <base offset>{path.suffix}, e.g. "
                        f"00000000000000000000{path.suffix})")
    return int(stem)


@contextmanager
def _mapped(path: Path) -> Iterator[memoryview]:
    """The file's bytes, memory-mapped read-only (segments can be large)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                yield view
            finally:
                view.release()


def _legacy_crc(batch: Batch) -> int:
    """LegacyRecord's CRC-32 covers magic to the end of the message."""
    return zlib.crc32(batch.data[batch.position + 16 : batch.position + batch.size])


def _codec(code: int) -> str:
    return codecs.CODEC_BY_CODE.get(code, f"unknown({code})")


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _size(value: bytes | None) -> int:
    return -1 if value is None else len(value)


def _text(value: bytes) -> str:
    """StringDecoder: the bytes as UTF-8, malformed sequences replaced."""
    return bytes(value).decode("utf-8", "replace")

