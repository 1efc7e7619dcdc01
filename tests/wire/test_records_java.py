"""Our record batches against Apache Kafka's own Java client (kafka-clients 3.9.1).

JAVA_BATCHES below were written by Kafka's MemoryRecordsBuilder, MemoryRecords.withEndTransactionMarker
and DefaultRecordBatch.writeEmptyHeader (JAVA_SOURCE). CASES holds the
same inputs for build_batch: our bytes must equal Java's for every codec but snappy (see
wire/compression.py), and we must decode Java's bytes to the records that went in. When java and the
kafka-clients jars are present (compat_tests/matrix/java/lib, or $LOGWAY_KAFKA_JARS) the live tests
run JAVA_SOURCE (one JVM, source-file mode): it must still write these bytes and must read every batch
we build to the same records we decode.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from logway.wire import compression
from logway.wire.batch import parse_header
from logway.wire.records import (
    ControlType,
    Header,
    NewRecord,
    Record,
    build_batch,
    build_end_txn_marker,
    decode_batch,
    decode_legacy,
)

TS = 1_700_000_000_000
JAR_DIR = Path(
    os.environ.get("LOGWAY_KAFKA_JARS", Path(__file__).resolve().parents[2] / "compat_tests/matrix/java/lib")
)
JARS = ["kafka-clients.jar", "lz4-java.jar", "snappy-java.jar", "zstd-jni.jar", "slf4j-api.jar"]


def _small() -> list[NewRecord]:
    records = []
    for i in range(20):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else f"value-{i}-{'x' * (i * 3)}".encode()
        headers = [] if i % 3 == 0 else [(f"h{i}", None if i % 2 == 0 else bytes([i, 0, 255]))]
        records.append(NewRecord(key, value, headers, TS + i * 7))
    return records


def _big() -> list[NewRecord]:
    return [NewRecord(f"k{i}".encode(), (f"r{i}-" * 500)[:1000].encode(), (), TS + i) for i in range(100)]


# name -> (build_batch records, build_batch keywords, the records a reader must see)
CASES: dict[str, tuple[list[NewRecord], dict, list[Record]]] = {}
for _name, _code in compression.CODEC_NAMES.items():
    for _size, _records in (("small", _small()), ("big", _big())):
        CASES[f"{_size}_{_name}"] = (
            _records,
            {"compression": _code},
            [
                Record(i, r.timestamp, r.key, r.value, tuple(Header(*h) for h in r.headers))
                for i, r in enumerate(_records)
            ],
        )
CASES["producer"] = (
    [
        NewRecord(b"a", b"1", [("trace", b"t1"), ("empty", b"")], TS),
        NewRecord(b"", b"", [], -1),
        NewRecord(None, None, [("n", None)], TS + 5),
    ],
    dict(
        base_offset=1000,
        producer_id=4242,
        producer_epoch=7,
        base_sequence=100,
        is_transactional=True,
        partition_leader_epoch=5,
    ),
    [
        Record(1000, TS, b"a", b"1", (Header("trace", b"t1"), Header("empty", b""))),
        Record(1001, -1, b"", b"", ()),
        Record(1002, TS + 5, None, None, (Header("n", None),)),
    ],
)
CASES["append_time"] = (
    [NewRecord(None, f"v{i}".encode(), (), TS + i) for i in range(3)],
    dict(log_append_time=True, max_timestamp=TS + 9999),
    [Record(i, TS + 9999, None, f"v{i}".encode(), ()) for i in range(3)],
)
CASES["empty"] = (
    [],
    dict(
        base_offset=2000,
        last_offset_delta=9,
        max_timestamp=TS + 777,
        producer_id=4242,
        producer_epoch=7,
        base_sequence=100,
        is_transactional=True,
        partition_leader_epoch=5,
    ),
    [],
)


def _java(name: str) -> bytes:
    return bytes.fromhex("".join(JAVA_BATCHES[name]))


def _ours(name: str) -> bytes:
    records, kwargs, _ = CASES[name]
    return build_batch(records, **kwargs)


# big_none (200 KB) is not recorded below; the live test compares it.
RECORDED = sorted(name for name in CASES if name != "big_none")
EXACT = [name for name in RECORDED if "snappy" not in name]


@pytest.mark.parametrize("name", EXACT)
def test_build_batch_writes_the_java_clients_bytes(name: str) -> None:
    assert _ours(name) == _java(name)


@pytest.mark.parametrize("name", ["small_snappy", "big_snappy"])
def test_snappy_batch_matches_java_except_encoder_choices(name: str) -> None:
    ours, java = _ours(name), _java(name)
    ours_header, java_header = parse_header(ours), parse_header(java)
    for field in ("base_offset", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "records_count"):
        assert getattr(ours_header, field) == getattr(java_header, field)
    assert compression.decompress(compression.SNAPPY, ours[61:]) == compression.decompress(
        compression.SNAPPY, java[61:]
    )
    assert ours[61:81][:16] == java[61:77]  # same xerial header


@pytest.mark.parametrize("name", RECORDED)
def test_decode_batch_reads_java_batches(name: str) -> None:
    assert decode_batch(_java(name)).records == CASES[name][2]


@pytest.mark.parametrize(
    ("name", "control", "kwargs"),
    [
        (
            "end_txn_commit",
            ControlType.COMMIT,
            dict(
                producer_id=4242,
                producer_epoch=7,
                coordinator_epoch=11,
                timestamp=TS + 123,
                base_offset=50,
                partition_leader_epoch=3,
            ),
        ),
        (
            "end_txn_abort",
            ControlType.ABORT,
            dict(producer_id=4242, producer_epoch=8, coordinator_epoch=0, timestamp=TS),
        ),
    ],
)
def test_end_txn_marker_equals_javas(name: str, control: ControlType, kwargs: dict) -> None:
    assert build_end_txn_marker(control, **kwargs) == _java(name)
    decoded = decode_batch(_java(name))
    assert decoded.header.is_control and decoded.header.is_transactional


LEGACY = {
    f"legacy_v{magic}_{codec}": [
        Record(100 + i, -1 if magic == 0 else TS + i * 3, None if i == 0 else b"lk%d" % i, b"legacy-%d" % i * 5)
        for i in range(4)
    ]
    for magic, codec in [(0, "none"), (0, "gzip"), (0, "snappy"), (1, "none"), (1, "gzip"), (1, "snappy"), (1, "lz4")]
}
LEGACY["legacy_v1_append_time"] = [Record(7 + i, TS + 9999, None, b"a%d" % i) for i in range(3)]


@pytest.mark.parametrize("name", sorted(LEGACY))
def test_decode_legacy_reads_java_message_sets(name: str) -> None:
    # v1 compressed sets carry relative inner offsets under the wrapper's absolute last offset.
    assert list(decode_legacy(_java(name))) == LEGACY[name]


def _java_available() -> bool:
    return bool(shutil.which("java")) and all((JAR_DIR / jar).is_file() for jar in JARS)


def _ours_for_java() -> dict[str, bytes]:
    ours = {name: _ours(name) for name in CASES}
    ours["marker"] = build_end_txn_marker(
        ControlType.COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=3, timestamp=TS
    )
    return ours


@pytest.fixture(scope="module")
def java_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], list[str]]:
    """Run JAVA_SOURCE once (one JVM): the batches Java writes, and its reading of the batches we build."""
    if not _java_available():
        pytest.skip(f"java or the kafka-clients jars in {JAR_DIR} are missing")
    source = tmp_path_factory.mktemp("java") / "JavaRecords.java"
    source.write_text(JAVA_SOURCE)
    done = subprocess.run(
        # C1 only and the serial GC: a short run starts faster.
        [
            "java",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseSerialGC",
            "-cp",
            os.pathsep.join(str(JAR_DIR / jar) for jar in JARS),
            str(source),
        ],
        input="".join(f"{name} {raw.hex()}\n" for name, raw in _ours_for_java().items()),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    written, read = {}, []
    for line in done.stdout.splitlines():
        if line.startswith("written "):
            _, name, hex_batch = line.split(" ")
            written[name] = bytes.fromhex(hex_batch)
        else:
            read.append(line)
    return written, read


def test_java_still_writes_the_recorded_batches(java_run) -> None:
    written, _ = java_run
    assert sorted(written) == sorted(set(JAVA_BATCHES) | {"big_none"})
    for name, raw in written.items():
        assert raw == (_java(name) if name in JAVA_BATCHES else _ours(name)), name


def _describe(batches: dict[str, bytes]) -> list[str]:
    """Our decoding in the line format JavaRecords.read prints."""
    lines = []
    for name, raw in batches.items():
        decoded = decode_batch(raw)
        h = decoded.header
        lines.append(
            f"{name} batch {h.base_offset} {h.last_offset} {h.partition_leader_epoch} {h.compression} "
            f"{int(h.log_append_time)} {str(h.is_transactional).lower()} {str(h.is_control).lower()} "
            f"{h.max_timestamp} {h.producer_id} {h.producer_epoch} {h.base_sequence} {h.records_count}"
        )
        for r in decoded.records:
            parts = [name, "record", str(r.offset), str(r.timestamp), _hex(r.key), _hex(r.value)]
            parts += [f"{hd.key}={_hex(hd.value)}" for hd in r.headers]
            lines.append(" ".join(parts))
    return lines


def _hex(blob: bytes | None) -> str:
    return "null" if blob is None else "x" + blob.hex()


def test_java_reads_every_batch_we_build(java_run) -> None:
    _, read = java_run
    assert read == _describe(_ours_for_java())


JAVA_SOURCE = r"""
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.*;

/** Writes reference batches with Kafka's MemoryRecordsBuilder, then decodes the batches given on stdin. */
public class JavaRecords {
    static String hex(ByteBuffer b) {
        if (b == null) return "null";
        StringBuilder sb = new StringBuilder("x");
        ByteBuffer d = b.duplicate();
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get()));
        return sb.toString();
    }

    static MemoryRecordsBuilder builder(String codec, TimestampType tt, long baseOffset, long appendTime, long pid,
                                        short epoch, int seq, boolean txn, int ple) {
        return MemoryRecords.builder(ByteBuffer.allocate(1 << 21), RecordBatch.MAGIC_VALUE_V2,
            Compression.of(codec).build(), tt, baseOffset, appendTime, pid, epoch, seq, txn, false, ple);
    }

    static void emit(String name, ByteBuffer buf) { System.out.println("written " + name + " " + hex(buf).substring(1)); }

    public static void main(String[] args) throws Exception {
        write();
        read();
    }

    static void write() {
        for (String c : new String[]{"none", "gzip", "snappy", "lz4", "zstd"}) {
            MemoryRecordsBuilder b = builder(c, TimestampType.CREATE_TIME, 0L, RecordBatch.NO_TIMESTAMP, -1L, (short) -1, -1, false, -1);
            for (int i = 0; i < 20; i++) {
                byte[] key = i % 5 == 0 ? null : ("key-" + i).getBytes(StandardCharsets.UTF_8);
                byte[] val = i % 7 == 3 ? null : ("value-" + i + "-" + "x".repeat(i * 3)).getBytes(StandardCharsets.UTF_8);
                Header[] hs = i % 3 == 0 ? new Header[0]
                    : new Header[]{new RecordHeader("h" + i, i % 2 == 0 ? null : new byte[]{(byte) i, 0, -1})};
                b.appendWithOffset(i, 1700000000000L + i * 7, key, val, hs);
            }
            emit("small_" + c, b.build().buffer());
            b = builder(c, TimestampType.CREATE_TIME, 0L, RecordBatch.NO_TIMESTAMP, -1L, (short) -1, -1, false, -1);
            for (int i = 0; i < 100; i++) {
                String v = ("r" + i + "-").repeat(500).substring(0, 1000);
                b.appendWithOffset(i, 1700000000000L + i, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    v.getBytes(StandardCharsets.UTF_8), new Header[0]);
            }
            emit("big_" + c, b.build().buffer());
        }
        MemoryRecordsBuilder b = builder("none", TimestampType.CREATE_TIME, 1000L, RecordBatch.NO_TIMESTAMP, 4242L, (short) 7, 100, true, 5);
        b.appendWithOffset(1000L, 1700000000000L, "a".getBytes(StandardCharsets.UTF_8), "1".getBytes(StandardCharsets.UTF_8),
            new Header[]{new RecordHeader("trace", "t1".getBytes(StandardCharsets.UTF_8)), new RecordHeader("empty", new byte[0])});
        b.appendWithOffset(1001L, RecordBatch.NO_TIMESTAMP, new byte[0], new byte[0], new Header[0]);
        b.appendWithOffset(1002L, 1700000000005L, (byte[]) null, (byte[]) null, new Header[]{new RecordHeader("n", null)});
        emit("producer", b.build().buffer());
        b = builder("none", TimestampType.LOG_APPEND_TIME, 0L, 1700000009999L, -1L, (short) -1, -1, false, -1);
        for (int i = 0; i < 3; i++)
            b.appendWithOffset(i, 1700000000000L + i, (byte[]) null, ("v" + i).getBytes(StandardCharsets.UTF_8), new Header[0]);
        emit("append_time", b.build().buffer());
        emit("end_txn_commit", MemoryRecords.withEndTransactionMarker(50L, 1700000000123L, 3, 4242L, (short) 7,
            new EndTransactionMarker(ControlRecordType.COMMIT, 11)).buffer());
        emit("end_txn_abort", MemoryRecords.withEndTransactionMarker(0L, 1700000000000L, -1, 4242L, (short) 8,
            new EndTransactionMarker(ControlRecordType.ABORT, 0)).buffer());
        String[][] legacy = {{"0", "none"}, {"0", "gzip"}, {"0", "snappy"}, {"1", "none"}, {"1", "gzip"},
            {"1", "snappy"}, {"1", "lz4"}};
        for (String[] l : legacy) {
            b = MemoryRecords.builder(ByteBuffer.allocate(1 << 16), Byte.parseByte(l[0]), Compression.of(l[1]).build(),
                TimestampType.CREATE_TIME, 100L);
            for (int i = 0; i < 4; i++)
                b.appendWithOffset(100L + i, 1700000000000L + i * 3, i == 0 ? null : ("lk" + i).getBytes(StandardCharsets.UTF_8),
                    ("legacy-" + i).repeat(5).getBytes(StandardCharsets.UTF_8));
            emit("legacy_v" + l[0] + "_" + l[1], b.build().buffer());
        }
        b = MemoryRecords.builder(ByteBuffer.allocate(1 << 16), (byte) 1, Compression.gzip().build(),
            TimestampType.LOG_APPEND_TIME, 7L, 1700000009999L);
        for (int i = 0; i < 3; i++)
            b.appendWithOffset(7L + i, 1700000000000L + i, (byte[]) null, ("a" + i).getBytes(StandardCharsets.UTF_8));
        emit("legacy_v1_append_time", b.build().buffer());
        ByteBuffer empty = ByteBuffer.allocate(DefaultRecordBatch.RECORD_BATCH_OVERHEAD);
        DefaultRecordBatch.writeEmptyHeader(empty, RecordBatch.MAGIC_VALUE_V2, 4242L, (short) 7, 100, 2000L, 2009L, 5,
            TimestampType.CREATE_TIME, 1700000000777L, true, false);
        empty.flip();
        emit("empty", empty);
    }

    static void read() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ");
            byte[] raw = new byte[parts[1].length() / 2];
            for (int i = 0; i < raw.length; i++) raw[i] = (byte) Integer.parseInt(parts[1].substring(2 * i, 2 * i + 2), 16);
            for (MutableRecordBatch batch : MemoryRecords.readableRecords(ByteBuffer.wrap(raw)).batches()) {
                batch.ensureValid();
                System.out.println(parts[0] + " batch " + batch.baseOffset() + " " + batch.lastOffset() + " "
                    + batch.partitionLeaderEpoch() + " " + batch.compressionType().id + " " + batch.timestampType().id + " "
                    + batch.isTransactional() + " " + batch.isControlBatch() + " " + batch.maxTimestamp() + " "
                    + batch.producerId() + " " + batch.producerEpoch() + " " + batch.baseSequence() + " " + batch.countOrNull());
                for (org.apache.kafka.common.record.Record r : batch) {
                    StringBuilder sb = new StringBuilder(parts[0] + " record " + r.offset() + " " + r.timestamp() + " "
                        + hex(r.key()) + " " + hex(r.value()));
                    for (Header h : r.headers())
                        sb.append(" ").append(h.key()).append("=").append(h.value() == null ? "null" : hex(ByteBuffer.wrap(h.value())));
                    System.out.println(sb);
                }
            }
        }
    }
}
"""


JAVA_BATCHES = {
    "small_none": (
        "0000000000000000000003e5ffffffff020a479cfa0000000000130000018bcfe568000000018bcfe56885ffffffffffffff"
        "ffffffffffffff000000141c000000011076616c75652d302d003a000e020a6b65792d311676616c75652d312d7878780204"
        "6831060100ff3a001c040a6b65792d321c76616c75652d322d787878787878020468320116002a060a6b65792d3301004600"
        "38080a6b65792d342876616c75652d342d78787878787878787878787802046834014800460a012e76616c75652d352d7878"
        "7878787878787878787878787802046835060500ff4a00540c0a6b65792d363476616c75652d362d78787878787878787878"
        "7878787878787878005e00620e0a6b65792d373a76616c75652d372d78787878787878787878787878787878787878787802"
        "046837060700ff5e0070100a6b65792d384076616c75652d382d787878787878787878787878787878787878787878787878"
        "02046838015c007e120a6b65792d394676616c75652d392d7878787878787878787878787878787878787878787878787878"
        "780018008c011401010206683130017e009a01160c6b65792d31315476616c75652d31312d78787878787878787878787878"
        "78787878787878787878787878787878787878780206683131060b00ff7400a801180c6b65792d31325a76616c75652d3132"
        "2d787878787878787878787878787878787878787878787878787878787878787878787878008a0100b6011a0c6b65792d31"
        "336076616c75652d31332d787878787878787878787878787878787878787878787878787878787878787878787878787878"
        "0206683133060d00ff8a0100c4011c0c6b65792d31346676616c75652d31342d787878787878787878787878787878787878"
        "7878787878787878787878787878787878787878787878780206683134017a00d2011e016c76616c75652d31352d78787878"
        "787878787878787878787878787878787878787878787878787878787878787878787878787878787800960100e001200c6b"
        "65792d31367276616c75652d31362d7878787878787878787878787878787878787878787878787878787878787878787878"
        "787878787878787878787878780206683136012a00ee01220c6b65792d3137010206683137061100ff980100fc01240c6b65"
        "792d31387e76616c75652d31382d787878787878787878787878787878787878787878787878787878787878787878787878"
        "78787878787878787878787878787878787800b001008a02260c6b65792d3139840176616c75652d31392d78787878787878"
        "7878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878787878"
        "0206683139061300ff"
    ),
    "small_gzip": (
        "00000000000000000000019dffffffff02d1b16a2e0001000000130000018bcfe568000000018bcfe56885ffffffffffffff"
        "ffffffffffffff000000141f8b08000000000000ff8d92bd4a03411485cf5de2283186f84308b2888888045632bb93fd4965"
        "15c43a95485021123085884ab4486515ac457c024b2b9fc027f0097c029f401893b983a026d96cb5ccf9ce993333d7054085"
        "ebe3ce55cbab78a821ef64cf5a379e2cf29af4baddae93694b41d035b819a3fa2eabfe5065c0a722cac2a801a18e78cefcab"
        "6d2695257f78457ba8676987e5ea2f9989aa9881de4723678242c564f8971c7c68e2246fa8a8c6543482e2d448cc4237715e"
        "307cbccb7c3c9a674b4c87e82d193ea9339f8ce587754ab8a7152247b465857a78a262cedca96cd84b9593ec76df81598a79"
        "e84b3c5389fdfe81f5fbe9fe618f3ee19556d91b1c596f3095d73608c402f420e68d5c8e51a736464d1b639314dde29dd6a8"
        "63fdff5e3ce52c0f840f5ae712e1850d19350ce955422ae39336382b32cf148945e847c2176df272dcb35b8c9f8c94c22f84"
        "beb3c569c91dd9b88983935e3d11cbd0df09755657b4030000"
    ),
    "big_gzip": (
        "00000000000000000000057cffffffff0272cfc1800001000000630000018bcfe568000000018bcfe56863ffffffffffffff"
        "ffffffffffffff000000641f8b08000000000000ffedddefc6565b1486f167e6f148d29b244992244923ebff9a2b49922449"
        "92244992a495e4952449922449922449922449922449923eef63c8feb00f638ffb3d8ce162fc0ee1fa769bf3efdc6432998e"
        "c53f73f385711c17fc267fe7268b164dc7d2932f8de3b8e0a7e4a7d3e95879f295711c17fc94fc6c361d6b4fbe368ee3829f"
        "925fbc783a369e7c631cc7053f25bf64c9746c3df9d6388e0b7e4a7ee9d2e9d879f29d711c17fc94fcb265d3b1f7e47be338"
        "2ef829f9e5cba763f6e4b3711c17fc94fc8a15d371f0e407e3382ef84dfe9d9bac5c391b4bcdefcac200c4a6e657adf2e617"
        "f677dae700884ccdaf5eedcd6b80575606203635bf668d37af055e591b80d8d4fcdab5debc26786563006253f3ebd679f3da"
        "e095ad01884dcdaf5fefcd6b84577606203635bf618337af155ed91b80d8d4fcc68ddebc6678653600b1a9f94d9bbc79edf0"
        "cac100c4a6e6376f9e8d9576785561006253f35bb678f3dae155a501884dcd6fddeacd2f3c84571980d8d4fcb66ddebc7678"
        "556d006253f345e1cd6b875735062036355f55debc7678556b006253f34de3cd6b87577506203635df75debc7678556f0062"
        "53f3397bf3dae155d900c4a6e6b76ff7e6b5c3ab0603109b9adfb16336d6dae1d58501884dcdefdce9cd6b87579706203635"
        "bf6b9737af1d5e5d1980d8d4fceedddefcc28fb4b501884dcdefd9e3cd6b87573706203635bf77af37af1d5edd1a80d8d4fc"
        "be7ddebc76787567006253f3fbf77bf3dae1d5bd01884dcd1f38e0cd6b87576703109b9a3f78d09bd70eaf1e0c406c6afed0"
        "a1d9d86887d714062036357ff8b037af1d5e531a80d8d4fc9123debc76784d65006253f3478f7af3dae135b501884dcd1f3b"
        "e6cd6b87d734062036357ffcb837af1d5ed31a80d8d4fc8913debc76784d67006253f3274f7af3dae135bd01884dcd9f3ae5"
        "cd6b87d76403109b9a3f7dda9bd70eaf190c406c6afecc99d9d86a87d716062036357ff6ac37af1d5e5b1a80d8d4fcb973de"
        "bc76786d65006253f3e7cf7bf3dae1b5b501884dcd5fb8e0cd6b87d736062036357ff1a237af1d5edb1a80d8d4fca54bdebc"
        "76786d67006253f3f3f3debc76786d6f006253f3972f7bf3dae1b5d900c4a6e6af5cf1e6b5c36b0703109b9abf7a753676da"
        "e1758501884dcd5fbbe6cd6b87d795062036357ffdba37af1d5e571980d8d4fc8d1bdebc76785d6d00629bfc3737b9996e26"
        "af5e4bbcae3100b1a9fa5be996aad716af6b0d406caafe76baadeab5c6eb3a03109baabf93eea87aedf1bade00c4a6eaefa6"
        "bbaa5e8bbc2e1b80d854fdbd744fd56b93d70d062036557f3fddf7ea7badf2fac200c4a6ea1fa407aa5ebbbcbe3400b1a9fa"
        "87e9a1aad732afaf0c406caafe517aa4eab5cdeb6b03109baa7f9c1eab7a6df3fac600c4a6ea9fa427aa5edbbcbe3500b1a9"
        "faa7e9a9aad736afef0c406caafe597aa6eab5cdeb7b03109baa7f9e9eab7a6df3fa6c006253f52fd20b55af6d5e3f1880d8"
        "54fdcbf4d2abcfdae6e5c200c4a6ea5fa557aa5edbbc5c1a80d854fdebf45ad56b9b972b03109baa7f93dea87a6df3726d00"
        "6253f56fd35b55af6d5e6e0c406caafe5d7aa7eab5cdcbad01884dd5bf4fef55bdb679b93300b1a9fa0fe983aad7362ff706"
        "203655ff317d54f5dae6e56c006253f59fd22755af6d5e1e0c406caafe73faecd50fdae60d8501884dd57f495f54bdb67943"
        "69006253f55fd35755af6dde501980d854fdb7f44dd56b9b37d406203655ff3d7d57f5dae60d8d01884dd5ff483f54bdb679"
        "436b006253f53fd34f55af6dded01980d854fdaff44bd56b9b37f406203655ff3bfd56f5dae60dd900c4a6eaffa43faa5edb"
        "bc613000b14dfe07a55e16238e8b0100"
    ),
    "small_snappy": (
        "0000000000000000000001f1ffffffff0228f986dc0002000000130000018bcfe568000000018bcfe56885ffffffffffffff"
        "ffffffffffffff0000001482534e41505059000000000100000001000001acb407641c000000011076616c75652d302d003a"
        "000e020a6b65792d3116091440312d78787802046831060100ff3a001c04051e04321c091e0032011e092114320116002a06"
        "051e1833010046003808050c043428092a00340d2a09012802046834014800460a012e091f0035321f0009522035060500ff"
        "4a00540c0549043634092a00363e2a001c787878005e00620e052604373a092600374a260009562037060700ff5e00701005"
        "300438400930003856300009331438015c007e12053004394609300039623000018f4818008c011401010206683130017e00"
        "9a01160c2554043154093e00312556760100013d2431060b00ff7400a80118094004325a0d40317876010018008a0100b601"
        "1a093c0433600d3c00336ebb002e010001822833060d00ff8a0100c4011c09470434660d4736d101760100014a2034017a00"
        "d2011e016c0d4000359e870009011800960100e0012009850436720d454e0d02760100018b1836012a00ee0122094c003725"
        "a72837061100ff980100fc0124091704387e0d630038b6a80015011800b001008a0226094e083984010d4f72390276010020"
        "0206683139061300ff"
    ),
    "big_snappy": (
        "000000000000000000001919ffffffff02abeb4ee80002000000630000018bcfe568000000018bcfe56863ffffffffffffff"
        "ffffffffffffff0000006482534e41505059000000000100000001000007f580800230e20f000000046b30d00f72302dfe03"
        "00fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe03009203003400e20f"
        "000202046b31d00f72312dfe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300"
        "fe0300fe030092030061f3240404046b32d00f72322dfe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe"
        "0300fe0300fe0300fe0300fe0300fe030092030061f3240606046b33d00f72332dfe0300fe0300fe0300fe0300fe0300fe03"
        "00fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe030092030061f3240808046b34d00f72342dfe0300fe0300"
        "fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe030092030061f3240a0a046b35"
        "d00f72352dfe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300"
        "92030061f3240c0c046b36d00f72362dfe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe"
        "0300fe0300fe0300fe030092030061f3240e0e046b37d00f72372dfe0300fe0300fe0300fe0300fe0300fe0300fe0300fe03"
        "00fe0300fe0300fe0300fe0300fe0300fe0300fe030092030061f3241010046b38d00f72382dfe0300fe0300fe0300fe0300"
        "fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe030092030061f3241212046b39d00f72392dfe"
        "0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe0300fe03009203002000e4"
        "0f001414066b310e7f270831302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe04008e040061f4101616066b311280270e8127fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe040086040061f4101818066b310e81270831322dfe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4101a1a066b310e82270831"
        "332dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e0400"
        "61f4101c1c066b310e83270831342dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe04008e040061f4101e1e066b310e84270831352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4102020066b310e85270831362dfe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4102222066b310e8627"
        "0831372dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e"
        "040061f4102424066b310e87270831382dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe04008e040061f4102626066b310e88270831392dfe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4102828066b320e88270832302dfe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4102a2a066b320e"
        "88270832312dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "008e040061f4102c2c066b320e882700320e0a4ffe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe040086040061f4102e2e066b320e88270832332dfe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4103030066b320e88270832342dfe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f410323206"
        "6b320e88270832352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe04008e040061f4103434066b320e88270832362dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe04008e040061f4103636066b320e88270832372dfe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4103838066b320e88270832382dfe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4103a"
        "3a066b320e88270832392dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe04008e040061f4103c3c066b330e88270833302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe04008e040061f4103e3e066b330e88270833312dfe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4104040066b330e88270833322d"
        "fe0400fe0400fe0400fe0400fe0400ea0400000008008080020c2d723332fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe04009204003c00e40f004242066b3333d00f7233332dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4144444066b333461f408342d72fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f4144646066b333561f408"
        "352d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a04"
        "0061f4144848066b333661f408362d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe04008a040061f4144a4a066b333761f408372d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f4144c4c066b333861f408382d72fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f4144e4e066b333961"
        "f408392d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "8a040061f42c5050066b3430d00f7234302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe04008e040061f4145252066b343161f408312d72fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f4145454066b343261f408322d72fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f4105656066b34"
        "0e88270834332dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "04008e040061f4105858066b340e88270834342dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe04008e040061f4105a5a066b340e88270834352dfe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4105c5c066b340e88270834362dfe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4105e5e06"
        "6b340e88270834372dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe04008e040061f4106060066b340e88270834382dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe04008e040061f4106262066b340e88270834392dfe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4106464066b350e88270835302dfe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f41066"
        "66066b350e88270835312dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe04008e040061f4106868066b350e88270835322dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe04008e040061f4106a6a066b350e88270835332dfe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4106c6c066b350e88270835342d"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4"
        "106e6e066b350e88270835352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe04008e040061f4107070066b350e88270835362dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4107272066b350e88270835372dfe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4107474066b350e88270835"
        "382dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e0400"
        "61f4107676066b350e88270835392dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe04008e040061f4107878066b360e88270836302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4107a7a066b360e88270836312dfe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f4107c7c066b360e8827"
        "0836322dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e"
        "040061f4107e7e066b360e88270836332dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe04008e04002800e80f0080018001066b360e8a270836342dfe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400e204000000081a8080020c36342d72fe0400fe0400fe04009a04004400e80f0082"
        "018201066b3635d00f7236352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe04008e040061f60884018461f6003661f608362d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f60886018661f6003761f608372d72fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f60888018861f6003861"
        "f608382d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "8a040061f6088a018a61f6003961f608392d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe04008a040061f6348c018c01066b3730d00f7237302dfe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f6088e018e61f6003161f608312d72fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f60890"
        "019061f6003261f608322d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe04008a040061f60892019261f6003361f608332d72fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f60894019461f6003461f608342d72fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a040061f60896019661f60e9c2708"
        "37352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e04"
        "0061f60898019861f60e9c270837362dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe04008e040061f6089a019a61f60e9c270837372dfe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f6089c019c61f60e9c270837382dfe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f6089e019e61f60e9c"
        "270837392dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "8e040061f618a001a001066b380e9c270838302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe04008e040061f608a201a261f60e9c270838312dfe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608a401a461f60e9c270838322dfe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608a601a6"
        "61f60e9c270838332dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe04008e040061f608a801a861f60e9c270838342dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe04008e040061f608aa01aa61f60e9c270838352dfe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608ac01ac61f60e9c270838362dfe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608ae"
        "01ae61f60e9c270838372dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe04008e040061f608b001b061f60e9c270838382dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe04008e040061f608b201b261f60e9c270838392dfe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f618b401b401066b390e9c270839"
        "302dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e0400"
        "61f608b601b661f60e9c270839312dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe04008e040061f608b801b861f60e9c270839322dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608ba01ba61f60e9c270839332dfe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608bc01bc61f60e9c27"
        "0839342dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e"
        "040061f608be01be61f60e9c270839352dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe04008e040061f608c001c061f60e9c270839362dfe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "00fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008e040061f608c201c261f60e9c270839372dee04000d040000"
        "00b98e170c2d723937fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04"
        "007204004400e80f00c401c401066b3938d00f7239382dfe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400"
        "fe0400fe0400fe0400fe0400fe0400fe04008e040061f608c601c661f6003961f608392d72fe0400fe0400fe0400fe0400fe"
        "0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe0400fe04008a04000000"
    ),
    "small_lz4": (
        "0000000000000000000001feffffffff0292e446f50003000000130000018bcfe568000000018bcfe56885ffffffffffffff"
        "ffffffffffffff0000001404224d18604082be010000f20b1c000000011076616c75652d302d003a000e020a6b65792d3116"
        "1400f102312d78787802046831060100ff3a001c041e0022321c1e0010321e0002210061320116002a061e00713301004600"
        "38080c002234282a0013342a00020200b202046834014800460a012e1f0019351f000252009135060500ff4a00540c490022"
        "36342a001c362a0081787878005e00620e260022373a26001f372600000256009137060700ff5e007010300022384030001f"
        "383000030233006138015c007e12300022394630001f39300006008f00f10418008c011401010206683130017e009a01160c"
        "54012231543e00113156010f02000b003d00a231060b00ff7400a80118400023325a40000478010f02000b72008a0100b601"
        "1a3c002333603c001f33bb0009080200008200b233060d00ff8a0100c4011c470023346647000ad1010f02000b004a009334"
        "017a00d2011e016c40000df2010f02000b7200960100e00120850023367245000f0d02010f02000b008b007236012a00ee01"
        "224c001137a701b237061100ff980100fc0124170023387e63000f1a02070f02000b7200b001008a02264e00333984014f00"
        "0f39020a0f02000b900206683139061300ff00000000"
    ),
    "big_lz4": (
        "0000000000000000000008b5ffffffff02468fdf7f0003000000630000018bcfe568000000018bcfe56863ffffffffffffff"
        "ffffffffffffff0000006404224d1860408259050000dfe20f000000046b30d00f72302d0300ffffffd5ef00e20f00020204"
        "6b31d00f72312d0300ffffffd500f303af0404046b32d00f72322d0300ffffffd500f303af0606046b33d00f72332d0300ff"
        "ffffd500f303af0808046b34d00f72342d0300ffffffd500f303af0a0a046b35d00f72352d0300ffffffd500f303af0c0c04"
        "6b36d00f72362d0300ffffffd500f303af0e0e046b37d00f72372d0300ffffffd500f303af1010046b38d00f72382d0300ff"
        "ffffd500f303af1212046b39d00f72392d0300ffffffd59000e40f001414066b317f273f31302d0400ffffffd400f4035116"
        "16066b3180270081270f0400ffffffd200f403501818066b3181273f31322d0400ffffffd400f403501a1a066b3182273f31"
        "332d0400ffffffd400f403501c1c066b3183273f31342d0400ffffffd400f403501e1e066b3184273f31352d0400ffffffd4"
        "00f403502020066b3185273f31362d0400ffffffd400f403502222066b3186273f31372d0400ffffffd400f403502424066b"
        "3187273f31382d0400ffffffd400f403502626066b3188273f31392d0400ffffffd400f403502828066b3288273f32302d04"
        "00ffffffd400f403502a2a066b3288273f32312d0400ffffffd400f403502c2c066b32882710320a4f0f0400ffffffd200f4"
        "03602e2e066b3233fd522f332d0400ffffffd400f403603030066b3234f4032f342d0400ffffffd400f403503232066b3288"
        "273f32352d0400ffffffd400f403503434066b3288273f32362d0400ffffffd400f403503636066b3288273f32372d0400ff"
        "ffffd400f403503838066b3288273f32382d0400ffffffd400f403503a3a066b3288273f32392d0400ffffffd400f403503c"
        "3c066b3388273f33302d0400ffffffd400f403503e3e066b3388273f33312d0400ffffffd400f403504040066b3388273f33"
        "322d0400ffffffd400f403504242066b338827103393760f0400ffffffd200f403504444066b3388273f33342d0400ffffff"
        "d400f403504646066b3388273f33352d0400ffffffd400f403504848066b3388273f33362d0400ffffffd400f403504a4a06"
        "6b3388273f33372d0400ffffffd400f403504c4c066b3388273f33382d0400ffffffd400f403504e4e066b3388273f33392d"
        "0400ffffffd400f403505050066b3488273f34302d0400ffffffd400f403505252066b3488273f34312d0400ffffffd400f4"
        "03505454066b3488273f34322d0400ffffffd400f403505656066b3488273f34332d0400ffffffd400f403505858066b3488"
        "2710341c9e0f0400ffffffd200f403505a5a066b3488273f34352d0400ffffffd400f403505c5c066b3488273f34362d0400"
        "ffffffd400f403505e5e066b3488273f34372d0400ffffffd400f403506060066b3488273f34382d0400ffffffd400f40350"
        "6262066b3488273f34392d0400ffffffd400f403506464066b3588273f35302d0400ffffffd400f403506666066b3588273f"
        "35312d0400ffffffd400f403506868066b3588273f35322d0400ffffffd400f403506a6a066b3588273f35332d0400ffffff"
        "d400f403506c6c066b3588273f35342d0400ffffffd400f403506e6e066b3588271035a5c50f0400ffffffd200f403507070"
        "066b3588273f35362d0400ffffffd400f403507272066b3588273f35372d0400ffffffd400f403507474066b3588273f3538"
        "2d0400ffffffd400f403607676066b353974d52f392d0400ffffffd400f403507878066b3688273f36302d0400ffffffd400"
        "f403507a7a066b3688273f36312d0400ffffffd400f403507c7c066b3688273f36322d0400ffffffd400f403507e7e066b36"
        "88273f36332d0400ffffffd4b000e80f0080018001066b368a273f36342d0400ffffe3507236342d72180300004f36342d72"
        "0400d4ff0300e80f0082018201066b3635d00f7236352d0400ffffffd400f60330840184f6031036f6032f362d0400ffffff"
        "d400f60330860186f6031037f6032f372d0400ffffffd400f60330880188f6031038f6032f382d0400ffffffd400f603308a"
        "018af6031039f6032f392d0400ffffffd400f603ef8c018c01066b3730d00f7237302d0400ffffffd400f603308e018ef603"
        "1031f6032f312d0400ffffffd400f60330900190f6031032f6032f322d0400ffffffd400f60330920192f6031033f6032f33"
        "2d0400ffffffd400f60330940194f6031034f6032f342d0400ffffffd400f60330960196f6031035f6032f352d0400ffffff"
        "d400f60330980198f603009c273f37362d0400ffffffd400f603309a019af603009c273f37372d0400ffffffd400f603309c"
        "019cf603009c273f37382d0400ffffffd400f603309e019ef603009c273f37392d0400ffffffd400f60370a001a001066b38"
        "9c273f38302d0400ffffffd400f60330a201a2f603009c273f38312d0400ffffffd400f60330a401a4f603009c273f38322d"
        "0400ffffffd400f60330a601a6f603009c273f38332d0400ffffffd400f60330a801a8f603009c273f38342d0400ffffffd4"
        "00f60330aa01aaf603009c273f38352d0400ffffffd400f60330ac01acf603009c273f38362d0400ffffffd400f60330ae01"
        "aef603009c273f38372d0400ffffffd400f60330b001b0f603009c273f38382d0400ffffffd400f60330b201b2f603009c27"
        "3f38392d0400ffffffd400f60370b401b401066b399c273f39302d0400ffffffd400f60330b601b6f603009c273f39312d04"
        "00ffffffd400f60330b801b8f603009c273f39322d0400ffffffd400f60330ba01baf603009c273f39332d0400ffffffd400"
        "f60330bc01bcf603009c273f39342d0400ffffffd400f60330be01bef603009c273f39352d0400ffffffd400f60330c001c0"
        "f603009c273f39362d0400ffffffd400f60330c201c2f603009c273f39372d0400ffffffd400f60330c401c4f603009c273f"
        "39382d0400ffffffd400f60330c601c6f603009c273f39392d0400ffffffd0507239392d0000000000"
    ),
    "small_zstd": (
        "00000000000000000000019effffffff028155c8a90004000000130000018bcfe568000000018bcfe56885ffffffffffffff"
        "ffffffffffffff0000001428b52ffd00580c0b00d28f3835506fd201e09ab1c4346964398708c77a788faf8c3e0f23cc45bc"
        "df632db8c743239b48db84f64e1b872244630f379ad6ff12013ba5d307ba6d1fd91cdcc94f7134c586bff826d305aa690c77"
        "b1e7d993eab28e6ce12d7e89411b57388b450e6106acbee29fa609147b52ddee621658c255fc9377f7a2b83a47b1c7f480be"
        "27f58d5e86f3139bfe7952dd8f701277bcbb9b683330b9e23146c40d8749d301aa69214d836192339865469e9806501008e2"
        "1891250e25e5e003148816f9987accf97555175539347d7d9272bb6b3dceb3424a1a18a771c8d6c72a7d6c5c806c6ebb0a3d"
        "20000311a1db014933a0e74a7223824d01afb92be2b01e5d558d3df118168c10871130cb41dd3550be660695abc39458f009"
        "caf81b90bb676cf8f126895085ac891b60f0abb72b00d09d195cb7bc0a98eec1ddcb0c205d1e9c5c35c4731fccfc5e65009d"
        "2bfcf05630dc050d3e9c096c4544606f060ff52e6f3863010000"
    ),
    "big_zstd": (
        "000000000000000000000535ffffffff026cf5374e0004000000630000018bcfe568000000018bcfe56863ffffffffffffff"
        "ffffffffffffff0000006428b52ffd0058c427007a646c1033005b9074c0ebffafbad45a6badb5d65a6badb5d65a6b7d5f28"
        "27b9f7de7befbd4324841042c8a6242779efbd61ed53befc4e01f700f600f900c688e9376279cfe33723c4f40bb13cc6fc66"
        "7c987e1f96c7307e333a4cbf0ecba340c16f46c6f2264cf09bb161fa6d589e04097e33324cbf0ccb8b10c16f46aad12fd5e4"
        "4180e037e3d4e8776af21e3cf09b516af42b35790e1cf8cd1835fa8d9abc060dfc66841afd424d1e03067e333e8d7e9f266f"
        "c102bf199d46bf4e93a74081df8cacd12f6bf21224f09bb169f21020f09b9169f4cb3479070ef8cd48e997ca8b0103fe16e3"
        "a4df292f050af85b8c927ea5bc1020e06f3146fa8df2326080bfc508e917ca8b0001fe16e3a3df272f0102f85b8c8e7e9dbc"
        "dcf95b8c4cbf2c2f978bbfc5d8e8b7c90b0000fe1623a35f262fb6bf25fa65501e0b167e3336907e1b286fc50abf191948bf"
        "0c94a74285df8cd4a35feac94b91c26fc6e9d1eff4e4a140e137a3f4e8577af24e9cf09b317af41b3d79264cf8cd083dfa85"
        "9ebc1225fc667c9e3c1224fc66741efd3a4fde88117e33b247bfecc91321c26fc6e6d16ff3e48508e13723f3e89779f24080"
        "f09b9172f44b39791f3ef8cd3839fa9d9c3c0f1efc66941cfd4a4e5e870e7e33468e7e23278f0307bf192147bf9093b76183"
        "df8c8fa3dfc7c9d3a0c16f46c7c9cb90c16f46e6e89739791830f8cdd838fa6d9cbc0b17fc66641cfd324e9e050b7e33524c"
        "bf14cbab50c16fc689e9776279d3e437a3c4f42bb1bc28f25b91a4df48ca5b43d610bf3242927e21296f095942fccaf848fa"
        "7da4bc156405f12ba323e9d791f2169005c4af8c4cd22f93f2d68ff5c3af8c8da4df46ca5b3e960fbf3232927e19296ff558"
        "3dfcca4845faa5a2bcc563f1f02be314e9778af2d68eb5c3af8c52a45f29ca5b3a960ebf324651decab172f895118af40b45"
        "790bc7c2e157c627d2ef13e5ad1beb865f199d48bf4e9467c386df8c2cd22f8bf26ad4f09bb189f4db44793468f8cdc844fa"
        "65a2bc1933fc66a420fd52509e0c197e334e907e27282f460cbf192548bf1294a7ea376304e93782f260c0f09b1182f25ebc"
        "f09bf181f4fb40792e5cf8cde840fa75a0bc162dfc666450468aca5b5a9616bf324e947e272a6f655959fcca2851fa95a8bc"
        "856561f12b6344e937a2f2d69575c5af8c10a55f88ca5b569615bf323e947e1f2a6f555955fccae850fa75a8bc456551f12b"
        "23a3f4cba8bc35654df12b6343e9b7a1f2969425c5af8c0ca55f86ca5b515614bf3252937ea9296f415950fcca384d79ebc9"
        "7ae2574669d2af34e52d27cb895f19a349bfd194b79aac267e658426fd4253de62b298f895f199f4fb4c796bc95ae2574667"
        "d2af33e52d254b895f19d9a45f36e5ad242b895f199b49bfcd94b7902c247e656426fd3253de3ab28ef8959192f44b4979cb"
        "c832e257c649d2ef24e5ad22ab885f1925296f115944fcca186da8116484250223204ce0fb5187cb8fb401126811fcffffef"
        "1fe197011364854ff8175ee1159ec22bbcc22b3c85af86ffb8a5e351f884bff00a5fe1155ee1159ec22bbc35fc1c6d3585c2"
        "27fc8557f80aaff00aaff0145ee1ade1e7686dda0b9ff0173ee10b5f78c22f7ce10b1f0fbf44765a247ce1253ce10baff085"
        "2f7ce115be0fff41e6e149f8c2277cc217bef0855ff8c2173e1e7e0959a59df0854f78c22b7ce10b5f78852fbc1f7e1e19c3"
        "93f0854f78c22b7ce10b5f78852fbc1f7e1ed9e071c21ff15ffc8a57f1145fc553bc8aa7f8d0c48b9fdc010000"
    ),
    "producer": (
        "00000000000003e8000000600000000502cd2a097f0010000000020000018bcfe568000000018bcfe5680500000000000010"
        "92000700000064000000033000000002610231040a74726163650474310a656d70747900160081a0abfef962020000001200"
        "0a04010102026e01"
    ),
    "append_time": (
        "00000000000000000000004cffffffff020a94699b0008000000020000018bcfe568000000018bcfe58f0fffffffffffffff"
        "ffffffffffffff00000003100000000104763000100002020104763100100004040104763200"
    ),
    "end_txn_commit": (
        "0000000000000032000000420000000302755ec1bc0030000000000000018bcfe5687b0000018bcfe5687b00000000000010"
        "920007ffffffff000000012000000008000000010c00000000000b00"
    ),
    "end_txn_abort": (
        "000000000000000000000042ffffffff02314dac150030000000000000018bcfe568000000018bcfe5680000000000000010"
        "920008ffffffff000000012000000008000000000c00000000000000"
    ),
    "legacy_v0_none": (
        "00000000000000640000003607e76e810000ffffffff000000286c65676163792d306c65676163792d306c65676163792d30"
        "6c65676163792d306c65676163792d300000000000000065000000398bb304fe0000000000036c6b31000000286c65676163"
        "792d316c65676163792d316c65676163792d316c65676163792d316c65676163792d31000000000000006600000039299c4b"
        "d60000000000036c6b32000000286c65676163792d326c65676163792d326c65676163792d326c65676163792d326c656761"
        "63792d32000000000000006700000039fea98cf10000000000036c6b33000000286c65676163792d336c65676163792d336c"
        "65676163792d336c65676163792d336c65676163792d33"
    ),
    "legacy_v0_gzip": (
        "000000000000006700000077f09969a00001ffffffff000000691f8b08000000000000ff63600083142036637f9ed7c8c0f0"
        "1f08803c8d9cd4f4c4e44a5d034234c400865420b6ecdeccf20fcc63cec9364432c490100d35240d6488e61cef6b30438c90"
        "0c312244430d490719f26f65cf479821c648861813a20155a8511011010000"
    ),
    "legacy_v0_snappy": (
        "0000000000000067000000a2b9b3f2b30002ffffffff0000009482534e415050590000000001000000010000008091020000"
        "090168640000003607e76e810000ffffffff000000286c65676163792d307e0800000009012065000000398bb304fe050f10"
        "036c6b3100194500310d4562080000000901006601450c299c4bd6050f10036c6b3200194500320d45620800000009010067"
        "01450cfea98cf1050f10036c6b3300194500330d45620800"
    ),
    "legacy_v1_none": (
        "00000000000000640000003e09e8a2a301000000018bcfe56800ffffffff000000286c65676163792d306c65676163792d30"
        "6c65676163792d306c65676163792d306c65676163792d30000000000000006500000041fddf17ba01000000018bcfe56803"
        "000000036c6b31000000286c65676163792d316c65676163792d316c65676163792d316c65676163792d316c65676163792d"
        "310000000000000066000000414a7e52ea01000000018bcfe56806000000036c6b32000000286c65676163792d326c656761"
        "63792d326c65676163792d326c65676163792d326c65676163792d32000000000000006700000041a3d98b4501000000018b"
        "cfe56809000000036c6b33000000286c65676163792d336c65676163792d336c65676163792d336c65676163792d336c6567"
        "6163792d33"
    ),
    "legacy_v1_gzip": (
        "00000000000000670000008c9b687f5501010000018bcfe56809ffffffff000000761f8b08000000000000ff636080033bce"
        "178b163302198cdde79f6630fc070220472327353d31b952d780100d35056480e3dffbe2bbe026310319cc39d98648861912"
        "a2a18631810cf3aa0b7a05378c0d6298119261468468a8612077382ebed9ed0a378c136298319261c6846800dbab7e0d3101"
        "0000"
    ),
    "legacy_v1_snappy": (
        "0000000000000067000000b40d55dc4201020000018bcfe56809ffffffff0000009e82534e41505059000000000100000001"
        "0000008ab10200001901783e09e8a2a301000000018bcfe56800ffffffff000000286c65676163792d307e08000000090101"
        "411041fddf17ba0109054a2003000000036c6b3100194d00310d4d620800000009012002000000414a7e52ea154d0006094d"
        "043200194d00320d4d6208000000090101881041a3d98b45154d0009094d043300194d00330d4d620800"
    ),
    "legacy_v1_lz4": (
        "0000000000000067000000b4d13c98be01030000018bcfe56809ffffffff0000009e04224d186040828f00000016000100ff"
        "103e09e8a2a301000000018bcfe56800ffffffff000000286c65676163792d3008000d0349000041005041fddf17ba090001"
        "4a008703000000036c6b314d0013314d000f080006034d009502000000414a7e52ea4d0012064d0017324d0013324d000f08"
        "0006034d000088005541a3d98b454d0012094d0017334d0013334d000f080001506163792d3300000000"
    ),
    "legacy_v1_append_time": (
        "00000000000000090000005dc8fb5d4901090000018bcfe58f0fffffffff000000471f8b08000000000000ff63608003897d"
        "addbef3372303030769f7fdacfff1f0880a24c8906507946909a934ded9e58d41842d53081d404745ffb8c458d1100e204ae"
        "9d6c000000"
    ),
    "empty": (
        "00000000000007d0000000310000000502067993a4001000000009ffffffffffffffff0000018bcfe56b0900000000000010"
        "9200070000006400000000"
    ),
}
