"""`logway topics|groups|configs|dump-log` run as a user runs them (a `logway` process) against one gateway.

Each test checks the effect through another client (confluent-kafka's or kafka-python's admin calls, a
consumer) or the files on disk, and that failures are one line on stderr with a non-zero exit.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CommitFailedError, RebalanceInProgressError
from polling import wait_for

from logway.cli.main import main
from logway.gateway.in_process import InProcessGateway
from logway.wire.records import ControlType, build_batch, build_end_txn_marker


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    # Log maintenance every 200 ms: it writes the index entries live segments hold in memory (dump-log reads files).
    gw = InProcessGateway(tmp_path_factory.mktemp("cli-tools") / "data",
                          {"log.retention.check.interval.ms": "200"}).start()
    try:
        yield gw
    finally:
        gw.stop()


def logway(*args: str, ok: bool = True, process: bool = False) -> subprocess.CompletedProcess:
    """`logway ARGS` through cli.main in this process (a child process costs a second of imports on a busy
    machine), or with ``process`` as a child process; with ``ok`` fail the test unless it exits 0."""
    if process:
        proc = subprocess.run([sys.executable, "-m", "logway.cli", *args], capture_output=True, text=True,
                              timeout=60)
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
        proc = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    if ok and proc.returncode != 0:
        pytest.fail(f"logway {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def admin_json(gateway: InProcessGateway, *args: str):
    return json.loads(logway(*args, "--bootstrap-server", gateway.bootstrap, "--output", "json").stdout)


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 1, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("logway: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def topic_configs(gateway: InProcessGateway, topic: str) -> dict[str, str]:
    """The topic's DescribeConfigs answer read with confluent-kafka's own AdminClient: name -> value."""
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {name: entry.value for name, entry in entries.items()}


def test_topics_create_list_describe_delete(gateway: InProcessGateway) -> None:
    server = ("--bootstrap-server", gateway.bootstrap)
    out = logway("topics", "create", *server, "--topic", "cli-orders", "--partitions", "3",
                 "--config", "retention.ms=3600000", process=True).stdout
    assert out.strip() == "Created topic cli-orders."
    assert "cli-orders" in logway("topics", "list", *server).stdout.split()
    assert "cli-orders" in admin_json(gateway, "topics", "list")

    table = logway("topics", "describe", *server, "--topic", "cli-orders").stdout
    assert "Topic: cli-orders\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000" in table
    assert re.findall(r"^cli-orders\s+(\d)\s+1\s+1\s+1$", table, re.M) == ["0", "1", "2"]
    [described] = admin_json(gateway, "topics", "describe", "--topic", "cli-orders")
    assert described["partition_count"] == 3 and described["configs"] == {"retention.ms": "3600000"}
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]

    assert_one_line_error(logway("topics", "create", *server, "--topic", "cli-orders", ok=False), "already exists")
    assert logway("topics", "delete", *server, "--topic", "cli-orders").stdout.strip() == "Deleted topic cli-orders."
    assert "cli-orders" not in logway("topics", "list", *server).stdout.split()
    assert_one_line_error(logway("topics", "describe", *server, "--topic", "cli-orders", ok=False, process=True),
                          "unknown topic 'cli-orders'")
    assert_one_line_error(logway("topics", "delete", *server, "--topic", "cli-orders", ok=False), "cli-orders")


def test_topic_and_configs_alter_change_what_describe_configs_answers(gateway: InProcessGateway) -> None:
    server = ("--bootstrap-server", gateway.bootstrap)
    logway("topics", "create", *server, "--topic", "cli-alter", "--partitions", "1")
    out = logway("topics", "alter-config", *server, "--topic", "cli-alter",
                 "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]").stdout
    assert out.strip() == "Completed updating config for topic cli-alter."
    configs = topic_configs(gateway, "cli-alter")
    assert configs["retention.ms"] == "1000" and configs["cleanup.policy"] == "compact,delete"

    logway("configs", "alter", *server, "--entity-type", "topics", "--entity-name", "cli-alter",
           "--delete-config", "retention.ms", "--add-config", "max.message.bytes=2048")
    configs = topic_configs(gateway, "cli-alter")
    assert configs["retention.ms"] == "604800000" and configs["max.message.bytes"] == "2048"

    table = logway("configs", "describe", *server, "--entity-type", "topics", "--entity-name", "cli-alter").stdout
    assert re.search(r"^max\.message\.bytes\s+2048\s+DYNAMIC_TOPIC_CONFIG\s+false\s+false$", table, re.M), table
    assert "retention.ms" not in table
    described = admin_json(gateway, "configs", "describe", "--entity-type", "topics", "--entity-name", "cli-alter",
                           "--all")
    by_name = {c["name"]: c for c in described["configs"]}
    assert by_name["retention.ms"] == {"name": "retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG",
                                       "sensitive": False, "read_only": False}
    assert by_name["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    # Looking a topic up must not create it (a Metadata request naming it would, with auto topic creation on).
    ghost = logway("topics", "alter-config", *server, "--topic", "cli-ghost", "--add-config", "retention.ms=5", ok=False)
    assert_one_line_error(ghost, "unknown topic 'cli-ghost'")
    assert "cli-ghost" not in logway("topics", "list", *server).stdout.split()

    bad = logway("configs", "alter", *server, "--entity-type", "topics", "--entity-name", "cli-alter",
                 "--add-config", "no.such.config=1", ok=False)
    assert_one_line_error(bad, "no.such.config")
    assert "no.such.config" not in topic_configs(gateway, "cli-alter")


def _committed(gateway: InProcessGateway, group: str) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka's AdminClient reads them (OffsetFetch)."""
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def _rows(out: str, group: str) -> dict[int, list[str]]:
    return {int(cols[2]): cols for cols in (line.split() for line in out.splitlines()) if cols[0] == group}


def test_groups_describe_lag_and_reset_offsets(gateway: InProcessGateway) -> None:
    server = ("--bootstrap-server", gateway.bootstrap)
    topic, group = "cli-lag", "cli-readers"
    logway("topics", "create", *server, "--topic", topic, "--partitions", "3")
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
    stamps = []
    for i in range(30):
        if i == 15:
            time.sleep(0.05)
            stamps.append(int(time.time() * 1000))  # records 15.. are later than this
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
        if i == 14:
            producer.flush()
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id=group, client_id="lag-reader",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    # The topic's partitions known before joining: kafka-python's assignor, run without them, can hand out an
    # empty assignment it keeps for longer than this test waits (seen with a topic created just before).
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    commit_when_joined(consumer, {TopicPartition(topic, 0): _meta(7), TopicPartition(topic, 1): _meta(10)})
    try:
        out = logway("groups", "describe", *server, "--group", group).stdout
        assert out.splitlines()[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                               "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = _rows(out, group)
        assert rows[0][3:6] == ["7", "10", "3"] and rows[1][3:6] == ["10", "10", "0"]
        assert rows[2][3:6] == ["-", "10", "-"]  # assigned, nothing committed
        assert {r[8] for r in rows.values()} == {"lag-reader"} and rows[0][6].startswith("lag-reader-")
        assert [g for g in admin_json(gateway, "groups", "list") if g["group"] == group][0]["state"] == "Stable"
        [described] = admin_json(gateway, "groups", "describe", "--group", group)
        assert described["state"] == "Stable" and described["members"] == 1
        assert {r["partition"]: r["lag"] for r in described["rows"]} == {0: 3, 1: 0, 2: None}
        members = logway("groups", "describe", *server, "--group", group, "--members").stdout
        assert re.search(rf"^{group}\s+lag-reader-\S+\s+\S+\s+lag-reader\s+3\s+{topic}:0,{topic}:1,{topic}:2$",
                         members, re.M), members

        refused = logway("groups", "reset-offsets", *server, "--group", group, "--topic", topic, "--to-earliest",
                         "--execute", ok=False)
        assert_one_line_error(refused, f"Assignments can only be reset if the group '{group}' is inactive, "
                                       "but the current state is Stable.")
    finally:
        consumer.close()
    assert _committed(gateway, group) == {0: 7, 1: 10}

    described = logway("groups", "describe", *server, "--group", group)
    assert f"Consumer group '{group}' has no active members." in described.stderr
    assert {r[6] for r in _rows(described.stdout, group).values()} == {"-"}

    dry = logway("groups", "reset-offsets", *server, "--group", group, "--topic", topic, "--to-earliest")
    assert "--execute option is missing" in dry.stderr
    assert {p: r[3] for p, r in _rows(dry.stdout, group).items()} == {0: "0", 1: "0", 2: "0"}
    plan = admin_json(gateway, "groups", "reset-offsets", "--group", group, "--topic", f"{topic}:0",
                      "--shift-by", "-5", "--dry-run")
    assert plan["executed"] is False and plan["rows"] == [
        {"group": group, "topic": topic, "partition": 0, "new_offset": 2}]
    plan = admin_json(gateway, "groups", "reset-offsets", "--group", group, "--all-topics", "--to-offset", "99")
    assert {r["partition"]: r["new_offset"] for r in plan["rows"]} == {0: 10, 1: 10}  # clamped to the log end
    plan = admin_json(gateway, "groups", "reset-offsets", "--group", group, "--topic", topic,
                      "--to-datetime", time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamps[0] / 1000))
                      + f".{stamps[0] % 1000:03d}Z")
    assert {r["partition"]: r["new_offset"] for r in plan["rows"]} == {0: 5, 1: 5, 2: 5}
    assert _committed(gateway, group) == {0: 7, 1: 10}, "a dry run changed the committed offsets"

    executed = logway("groups", "reset-offsets", *server, "--group", group, "--topic", f"{topic}:1,2",
                      "--to-offset", "4", "--execute").stdout
    assert {p: r[3] for p, r in _rows(executed, group).items()} == {1: "4", 2: "4"}
    assert _committed(gateway, group) == {0: 7, 1: 4, 2: 4}
    consumer = KafkaConsumer(topic, bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 15 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                seen += [(r.partition, r.offset) for r in records]
        assert sorted(seen) == sorted([(0, o) for o in range(7, 10)] + [(p, o) for p in (1, 2) for o in range(4, 10)])
    finally:
        consumer.close()

    out = logway("groups", "delete", *server, "--group", group).stdout
    assert out.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    assert group not in [g["group"] for g in admin_json(gateway, "groups", "list")]
    assert_one_line_error(logway("groups", "describe", *server, "--group", group, ok=False),
                          f"Consumer group '{group}' does not exist.")


def commit_when_joined(consumer: KafkaConsumer, offsets: dict) -> None:
    """Commit once the consumer holds its assignment; a rebalance still settling is waited out (bounded)."""
    deadline = time.monotonic() + 30
    while True:
        consumer.poll(100)
        try:
            if consumer.assignment():
                consumer.commit(offsets)
                return
        except (RebalanceInProgressError, CommitFailedError):
            pass
        assert time.monotonic() < deadline, "the consumer did not join its group within 30 s"


def _meta(offset: int):
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(offset, "", -1)


def test_an_unreachable_broker_is_one_line_and_exit_1(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for args in (("topics", "list"), ("groups", "describe", "--group", "g"), ("configs", "describe",
                 "--entity-type", "topics", "--entity-name", "t")):
        proc = logway(*args, "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1", ok=False,
                      process=args[0] == "topics")
        assert_one_line_error(proc, f"cannot reach a broker at 127.0.0.1:{port}")


# -- dump-log ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dumped_topic(gateway: InProcessGateway) -> Path:
    """A partition written by the gateway: idempotent plain batches, then gzip and zstd batches, with headers,
    a null key and a null value, and an index entry every 100 bytes."""
    server = ("--bootstrap-server", gateway.bootstrap)
    logway("topics", "create", *server, "--topic", "cli-dump", "--partitions", "1",
           "--config", "index.interval.bytes=100")
    for codec in ("none", "gzip", "zstd"):
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "compression.type": codec, "linger.ms": 20,
                             "enable.idempotence": codec == "none"})
        for i in range(6):
            producer.produce("cli-dump", key=None if i == 0 else f"{codec}-k{i}".encode(),
                             value=None if i == 5 else f"{codec} value {i} é".encode() * 3,
                             headers=[("trace", b"1"), ("span", None)] if i == 2 else None)
            if i % 2:
                producer.flush()
        producer.flush()
    partition = gateway.data_dir / "cli-dump-0"
    index, timeindex = partition / "00000000000000000000.index", partition / "00000000000000000000.timeindex"
    wait_for(lambda: index.stat().st_size and timeindex.stat().st_size)  # the next log maintenance writes them
    return partition


def test_dump_log_prints_every_batch_and_record_of_the_gateways_segment(dumped_topic: Path) -> None:
    log = dumped_topic / "00000000000000000000.log"
    out = logway("dump-log", str(log), "--print-data").stdout
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [dict(re.findall(r"(\w+): (\S+)", line)) for line in lines if line.startswith("baseOffset: ")]
    records = [line for line in lines if line.startswith("| offset: ")]
    assert [int(r.split()[2]) for r in records] == list(range(18))
    assert sum(int(b["count"]) for b in batches) == 18
    assert {b["compresscodec"] for b in batches} == {"none", "gzip", "zstd"}
    assert all(b["isvalid"] == "true" and b["magic"] == "2" for b in batches)
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [sum(sizes[:i]) for i in range(len(sizes))] and sum(sizes) == log.stat().st_size
    plain = [b for b in batches if b["compresscodec"] == "none"]
    assert all(int(b["producerId"]) >= 0 and b["baseSequence"] != "-1" for b in plain)  # idempotent producer
    assert "| offset: 0 CreateTime: " in records[0] and " keySize: -1 valueSize: 45 " in records[0]
    assert records[0].endswith("headerKeys: [] payload: none value 0 é" + "none value 0 é" * 2)
    assert any("headerKeys: [trace,span] key: gzip-k2 payload: gzip value 2 é" in r for r in records)
    assert any(r.endswith(" valueSize: -1 sequence: -1 headerKeys: [] key: zstd-k5") for r in records)
    shallow = logway("dump-log", str(log)).stdout
    assert "| offset:" not in shallow and shallow.count("baseOffset: ") == len(batches)


def test_dump_log_checks_the_indexes_against_the_log(dumped_topic: Path) -> None:
    index, timeindex = dumped_topic / "00000000000000000000.index", dumped_topic / "00000000000000000000.timeindex"
    proc = logway("dump-log", str(index), str(timeindex))
    assert proc.stderr == ""  # no mismatch reported
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", proc.stdout, re.M)
    log_out = logway("dump-log", str(dumped_topic / "00000000000000000000.log")).stdout
    batch_at = {int(p): int(last) for last, p in re.findall(r"lastOffset: (\d+) .*? position: (\d+) ", log_out)}
    assert entries and all(batch_at[int(p)] == int(o) for o, p in entries)
    assert re.findall(r"^timestamp: \d+ offset: \d+$", proc.stdout, re.M)
    sane = logway("dump-log", str(index), str(timeindex), "--index-sanity-check").stdout
    assert f"{index} passed sanity check." in sane and f"{timeindex} passed sanity check." in sane


def test_dump_log_reports_broken_files_in_one_line(dumped_topic: Path, tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    shutil.copy(dumped_topic / "00000000000000000000.log", segment)
    data = bytearray(segment.read_bytes())
    first_size = int.from_bytes(data[8:12], "big") + 12
    data[first_size - 1] ^= 0xFF  # the first batch's last byte: its CRC no longer matches
    segment.write_bytes(bytes(data) + bytes(data[:30]))  # and a torn tail: the start of a batch cut short
    proc = logway("dump-log", str(segment))
    valid = re.findall(r"isvalid: (\w+)$", proc.stdout, re.M)
    assert valid[0] == "false" and set(valid[1:]) == {"true"}
    assert proc.stdout.rstrip().endswith("Found 30 invalid bytes at the end of 00000000000000000000.log")

    data[8:12] = (1).to_bytes(4, "big")  # a batch length no batch can have
    segment.write_bytes(bytes(data))
    assert_one_line_error(logway("dump-log", str(segment), ok=False, process=True),
                          "smaller than minimum record overhead")
    assert_one_line_error(logway("dump-log", str(tmp_path / "00000000000000000042.log"), ok=False),
                          "No such file")

    index = tmp_path / "00000000000000000000.index"
    index.write_bytes((5).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\x00\x00")  # 10 bytes, wrong position
    insane = logway("dump-log", str(index), "--index-sanity-check", ok=False)
    assert_one_line_error(insane, "is corrupt, found 10 bytes which is neither positive nor a multiple of 8")
    second_last = int.from_bytes(data[first_size : first_size + 8], "big") + int.from_bytes(
        data[first_size + 23 : first_size + 27], "big")  # the second batch's base offset + lastOffsetDelta
    index.write_bytes((5).to_bytes(4, "big") + first_size.to_bytes(4, "big"))  # not that batch's last offset
    mismatch = logway("dump-log", str(index))
    assert mismatch.stdout.splitlines()[1:] == [f"offset: 5 position: {first_size}"]
    assert mismatch.stderr.splitlines() == [f"Mismatches in :{index}", f"  Index offset: 5, log offset: {second_last}"]
    assert second_last != 5


def test_dump_log_shows_transaction_markers(tmp_path: Path) -> None:
    records = build_batch([(b"k", b"v", ())], base_offset=0, producer_id=7, producer_epoch=1, base_sequence=0,
                          is_transactional=True)
    commit = build_end_txn_marker(ControlType.COMMIT, producer_id=7, producer_epoch=1, coordinator_epoch=3,
                                  timestamp=1_700_000_000_000, base_offset=1)
    abort = build_end_txn_marker(ControlType.ABORT, producer_id=8, producer_epoch=0, coordinator_epoch=4,
                                 timestamp=1_700_000_000_001, base_offset=2)
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(records + commit + abort)
    out = logway("dump-log", str(segment), "--print-data").stdout
    assert re.search(r"^baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: 7 "
                     r"producerEpoch: 1 partitionLeaderEpoch: -1 isTransactional: true isControl: false ", out, re.M)
    assert re.search(rf"^baseOffset: 1 .* isTransactional: true isControl: true .* position: {len(records)} ", out, re.M)
    assert "| offset: 1 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] " \
           "endTxnMarker: COMMIT coordinatorEpoch: 3\n" in out
    assert "| offset: 2 CreateTime: 1700000000001 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] " \
           "endTxnMarker: ABORT coordinatorEpoch: 4\n" in out


def test_command_config_carries_java_client_security_properties(tmp_path: Path) -> None:
    """kafka-*.sh's --command-config file (Java property names, a JAAS line) logs in over SASL/SCRAM."""
    from logway.server.security.credentials import CredentialStore

    data = tmp_path / "data"
    data.mkdir()
    CredentialStore(data).set("ops", "SCRAM-SHA-256", "ops-secret")
    gw = InProcessGateway(data, {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                 "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
                                 "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                                 "offsets.topic.num.partitions": "1"}).start()
    try:
        def client_properties(password: str) -> str:
            path = tmp_path / f"client-{password}.properties"
            path.write_text("# as for kafka-topics.sh --command-config\nsecurity.protocol=SASL_PLAINTEXT\n"
                            "sasl.mechanism=SCRAM-SHA-256\n"
                            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="ops" password="{password}";\n')
            return str(path)

        server = ("--bootstrap-server", gw.bootstrap)
        logway("topics", "create", *server, "--command-config", client_properties("ops-secret"), "--topic", "secured",
               "--partitions", "2")
        assert logway("topics", "list", *server, "--command-config", client_properties("ops-secret")).stdout == \
            "secured\n"
        refused = logway("topics", "list", *server, "--command-config", client_properties("wrong"), "--timeout", "3",
                         ok=False)
        assert_one_line_error(refused, "uthentication")
        assert_one_line_error(logway("topics", "list", *server, "--command-config", str(tmp_path / "missing"),
                                     ok=False), "No such file")
    finally:
        gw.stop()
