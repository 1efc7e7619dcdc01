"""Apache Kafka's own command-line tools against Logway, run as a user runs them (`java -cp lib/* <class>`).

Each test asserts what the user sees or what the tool changed: the topic exists with its partitions and
config, the messages come back, the group's offsets moved, the perf tools count every record, and
DumpLogSegments reads Logway's segment files with no error and the offsets Logway serves.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from compat_tests.kafka.cluster import COMMON_CONFIG, java
from compat_tests.kafka.sides import Side
from logway.wire.batch import iter_headers

TOPICS = "org.apache.kafka.tools.TopicCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIGS = "kafka.admin.ConfigCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
ACLS = "org.apache.kafka.tools.AclCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def tool(main: str, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
    """Run a Kafka tool class; with ``ok`` fail the test (showing its output) unless it exits 0."""
    proc = java(main, *args, stdin=stdin, timeout=120)
    if ok and proc.returncode != 0:
        pytest.fail(f"{main} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def bootstrap(logway_ref) -> str:
    return logway_ref.bootstrap


def test_topic_command_creates_lists_and_describes(bootstrap: str) -> None:
    topic = name("tool-topic")
    out = tool(TOPICS, "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "3",
               "--replication-factor", "1", "--config", "retention.ms=3600000").stdout
    assert f"Created topic {topic}." in out
    assert topic in tool(TOPICS, "--bootstrap-server", bootstrap, "--list").stdout.split()
    described = tool(TOPICS, "--bootstrap-server", bootstrap, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 3" in described and "retention.ms=3600000" in described
    assert sorted(re.findall(r"Partition: (\d+)\tLeader: 1", described)) == ["0", "1", "2"]
    # Kafka 4's Admin describes topics with DescribeTopicPartitions (KIP-966): the ELR columns come from it.
    assert described.count("\tElr: \tLastKnownElr: ") == 3, described
    tool(TOPICS, "--bootstrap-server", bootstrap, "--alter", "--topic", topic, "--partitions", "5")
    described = tool(TOPICS, "--bootstrap-server", bootstrap, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 5" in described
    tool(TOPICS, "--bootstrap-server", bootstrap, "--delete", "--topic", topic)
    assert topic not in tool(TOPICS, "--bootstrap-server", bootstrap, "--list").stdout.split()


def _produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    tool(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:", stdin="".join(f"{line}\n" for line in lines))


def _consume(bootstrap: str, topic: str, group: str, count: int) -> list[str]:
    out = tool(CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning", "--group", group,
               "--max-messages", str(count), "--formatter-property", "print.key=true",
               "--formatter-property", "key.separator=:", "--timeout-ms", "30000").stdout
    return out.splitlines()


def _create(bootstrap: str, topic: str, partitions: int, *configs: str) -> None:
    extra = [arg for c in configs for arg in ("--config", c)]
    tool(TOPICS, "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
         "--replication-factor", "1", *extra)


def test_console_producer_and_consumer_round_trip(bootstrap: str) -> None:
    topic = name("tool-console")
    _create(bootstrap, topic, 3)
    lines = [f"key{i}:value {i} é" for i in range(30)]
    _produce_lines(bootstrap, topic, lines)
    assert sorted(_consume(bootstrap, topic, name("g"), len(lines))) == sorted(lines)


def _group_offsets(bootstrap: str, group: str) -> dict[int, tuple[str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET) from kafka-consumer-groups --describe."""
    out = tool(GROUPS, "--bootstrap-server", bootstrap, "--describe", "--group", group).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): (r[3], r[4]) for r in rows}


def test_consumer_groups_list_describe_and_reset_offsets(bootstrap: str) -> None:
    topic, group = name("tool-groups"), name("group")
    _create(bootstrap, topic, 2)
    lines = [f"k{i}:v{i}" for i in range(20)]
    _produce_lines(bootstrap, topic, lines)
    assert len(_consume(bootstrap, topic, group, len(lines))) == len(lines)

    assert group in tool(GROUPS, "--bootstrap-server", bootstrap, "--list").stdout.split()
    offsets = _group_offsets(bootstrap, group)
    assert sorted(offsets) == [0, 1]
    assert all(current == end for current, end in offsets.values())
    assert sum(int(end) for _current, end in offsets.values()) == len(lines)

    out = tool(GROUPS, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute").stdout
    assert sorted(re.findall(rf"{group}\s+{topic}\s+(\d+)\s+(\d+)", out)) == [("0", "0"), ("1", "0")]
    # A consumer of the group now reads everything again.
    assert sorted(_consume(bootstrap, topic, group, len(lines))) == sorted(lines)

    tool(GROUPS, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", f"{topic}:1",
         "--to-offset", "3", "--execute")
    offsets = _group_offsets(bootstrap, group)
    assert offsets[1][0] == "3" and offsets[0][0] == offsets[0][1]
    out = tool(GROUPS, "--bootstrap-server", bootstrap, "--delete", "--group", group).stdout
    assert "successful" in out.lower()


def test_get_offsets_matches_list_offsets(bootstrap: str, logway_ref) -> None:
    topic = name("tool-offsets")
    _create(bootstrap, topic, 2)
    _produce_lines(bootstrap, topic, [f"k{i}:v" for i in range(11)])
    latest = tool(GET_OFFSETS, "--bootstrap-server", bootstrap, "--topic", topic, "--time", "-1").stdout.split()
    earliest = tool(GET_OFFSETS, "--bootstrap-server", bootstrap, "--topic", topic, "--time", "-2").stdout.split()
    side = Side("logway", logway_ref.port)
    served = side.call(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "timestamp": -1, "current_leader_epoch": -1} for p in (0, 1)]}]})
    ends = {p.partition_index: p.offset for p in served.topics[0].partitions}
    assert sorted(latest) == [f"{topic}:{p}:{ends[p]}" for p in (0, 1)]
    assert sum(ends.values()) == 11
    assert sorted(earliest) == [f"{topic}:0:0", f"{topic}:1:0"]


def test_config_command_describes_topic_configs(bootstrap: str) -> None:
    topic = name("tool-configs")
    _create(bootstrap, topic, 1, "retention.ms=3600000", "cleanup.policy=compact")
    out = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
               "--describe").stdout
    assert "retention.ms=3600000" in out and "cleanup.policy=compact" in out
    everything = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
                      "--describe", "--all").stdout
    assert "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in everything
    broker = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "brokers", "--entity-name", "1",
                  "--describe", "--all").stdout
    assert f"group.initial.rebalance.delay.ms={COMMON_CONFIG['group.initial.rebalance.delay.ms']}" in broker


def test_config_command_alters_a_topic_config(bootstrap: str) -> None:
    topic = name("tool-alter")
    _create(bootstrap, topic, 1, "cleanup.policy=compact")
    tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
         "--alter", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    out = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
               "--describe").stdout
    assert "retention.ms=1000" in out and "cleanup.policy=compact,delete" in out
    tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
         "--alter", "--delete-config", "retention.ms")
    out = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic,
               "--describe").stdout
    assert "retention.ms" not in out and "cleanup.policy=compact,delete" in out


def test_delete_records_command_moves_the_start_offset(bootstrap: str, tmp_path) -> None:
    topic = name("tool-delete-records")
    _create(bootstrap, topic, 1)
    _produce_lines(bootstrap, topic, [f"k{i}:v{i}" for i in range(10)])
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": 6}], "version": 1}))
    out = tool(DELETE_RECORDS, "--bootstrap-server", bootstrap, "--offset-json-file", str(offsets)).stdout
    assert f"partition: {topic}-0\tlow_watermark: 6" in out, out
    earliest = tool(GET_OFFSETS, "--bootstrap-server", bootstrap, "--topic", topic, "--time", "-2").stdout.split()
    assert earliest == [f"{topic}:0:6"]


def test_config_command_sets_dynamic_broker_configs_at_both_levels(bootstrap: str) -> None:
    def configs(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        return tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "brokers", *args, ok=ok)

    topic = name("tool-dynamic")
    _create(bootstrap, topic, 1)
    try:
        configs("--entity-default", "--alter", "--add-config", "log.retention.ms=7200000,log.segment.bytes=2097152")
        configs("--entity-name", "1", "--alter", "--add-config", "log.segment.bytes=3145728")
        default = configs("--entity-default", "--describe").stdout
        assert "log.retention.ms=7200000" in default and "log.segment.bytes=2097152" in default, default
        everything = configs("--entity-name", "1", "--describe", "--all").stdout
        assert ("log.segment.bytes=3145728 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.segment.bytes=3145728, "
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2097152, DEFAULT_CONFIG:log.segment.bytes=1073741824}"
                in everything), everything
        topic_configs = tool(CONFIGS, "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name",
                             topic, "--describe", "--all").stdout
        assert "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" \
            in topic_configs, topic_configs
        refused = configs("--entity-default", "--alter", "--add-config", "num.partitions=3", ok=False)
        assert refused.returncode != 0
        assert "InvalidRequestException: Cannot update these configs dynamically: [num.partitions]" in refused.stdout + refused.stderr
    finally:
        configs("--entity-default", "--alter", "--delete-config", "log.retention.ms,log.segment.bytes")
        configs("--entity-name", "1", "--alter", "--delete-config", "log.segment.bytes")
    assert "log.retention.ms" not in configs("--entity-default", "--describe").stdout


def test_console_producer_shows_the_record_error_of_a_keyless_record(bootstrap: str) -> None:
    """Produce v8+ record_errors: the Java producer reports the refused record's own message, not the batch's."""
    topic = name("tool-record-error")
    _create(bootstrap, topic, 1, "cleanup.policy=compact")
    out = tool(PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, stdin="no key here\n")
    assert ("org.apache.kafka.common.InvalidRecordException: Compacted topic cannot accept message without key in "
            f"topic partition {topic}-0") in out.stdout + out.stderr


def test_log_dirs_leader_election_and_reassignment_tools(bootstrap: str) -> None:
    topic = name("tool-log-dirs")
    _create(bootstrap, topic, 2)
    _produce_lines(bootstrap, topic, [f"k{i}:v{i}" for i in range(10)])
    out = tool(LOG_DIRS, "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic).stdout
    described = json.loads(out.strip().splitlines()[-1])
    partitions = {p["partition"]: p for d in described["brokers"][0]["logDirs"] for p in d["partitions"]}
    assert sorted(partitions) == [f"{topic}-0", f"{topic}-1"]
    assert sum(p["size"] for p in partitions.values()) > 10 * len("k0v0")  # the batches' bytes on disk
    assert all(p["offsetLag"] == 0 and not p["isFuture"] for p in partitions.values())
    out = tool(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--election-type", "preferred", "--topic", topic,
               "--partition", "0").stdout
    assert f"Valid replica already elected for partitions {topic}-0" in out, out
    assert "No partition reassignments found." in tool(REASSIGN, "--bootstrap-server", bootstrap, "--list").stdout


def test_producer_and_consumer_perf_tools_count_every_record(bootstrap: str) -> None:
    topic = name("tool-perf")
    _create(bootstrap, topic, 2)
    out = tool(PRODUCER_PERF, "--topic", topic, "--num-records", "5000", "--record-size", "100", "--throughput", "-1",
               "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all").stdout
    assert re.search(r"^5000 records sent", out, re.M), out
    out = tool(CONSUMER_PERF, "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", "5000",
               "--timeout", "30000").stdout
    header, row = [line for line in out.splitlines() if "," in line][-2:]
    summary = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")], strict=True))
    assert int(summary["data.consumed.in.nMsg"]) == 5000, out


def _served_batches(port: int, topic: str) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch Logway serves for partition 0, read with Fetch from 0."""
    side = Side("logway", port)
    batches: list[tuple[int, int]] = []
    offset = 0
    while True:
        resp = side.call(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                     {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                      "partition_max_bytes": 1 << 20, "log_start_offset": -1,
                                      "current_leader_epoch": -1, "last_fetched_epoch": -1}]}],
                                 "forgotten_topics_data": [], "rack_id": ""})
        part = resp.responses[0].partitions[0]
        data = bytes(part.records or b"")
        got = [(h.base_offset, h.last_offset) for _pos, h in iter_headers(data)]
        got = [b for b in got if b[1] >= offset]
        if not got:
            return batches
        batches += got
        offset = got[-1][1] + 1


RECORDS = 12_000


def test_dump_log_segments_reads_logways_files(gateway_process, tmp_path: Path) -> None:
    """kafka-dump-log --deep-iteration on every segment, offset index and time index Logway wrote."""
    gw = gateway_process
    # Log maintenance every 200 ms: it writes the index entries a live segment holds in memory (Kafka's indexes
    # are mmapped, so its live files never lag; Logway's lag by one maintenance run, at most 5 s).
    config = {**COMMON_CONFIG, "log.retention.check.interval.ms": "200"}
    gw.extra_args = tuple(a for k, v in config.items() for a in ("--override", f"{k}={v}"))
    gw.start()
    topic = "dumped"
    # The smallest segments Kafka allows (1 MiB) and small batches: several segments, each with index entries.
    _create(gw.bootstrap, topic, 1, "segment.bytes=1048576", "index.interval.bytes=1024")
    tool(PRODUCER_PERF, "--topic", topic, "--num-records", str(RECORDS), "--record-size", "300", "--throughput", "-1",
         "--producer-props", f"bootstrap.servers={gw.bootstrap}", "batch.size=4000", "linger.ms=0")
    served = _served_batches(gw.port, topic)
    part_dir = gw.data_dir / f"{topic}-0"
    files = sorted(p for p in part_dir.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    assert len([f for f in files if f.suffix == ".log"]) >= 3, files
    _wait_until_unchanged(files)
    live = _dump(files)  # while Logway runs: the active segment and its indexes as they are
    gw.stop()
    out = _dump(files)
    assert out == live, "the files changed on a clean shutdown"

    dumped = [(int(a), int(b)) for a, b in re.findall(r"^baseOffset: (\d+) lastOffset: (\d+) ", out, re.M)]
    assert dumped == served
    records = [int(o) for o in re.findall(r"^\| offset: (\d+) ", out, re.M)]
    assert records == list(range(RECORDS))
    # Every offset-index entry points at a batch the same segment's dump lists at that position, and the
    # entry's offset is inside that batch (Kafka indexes a batch by its last offset).
    sections = _sections(out)
    checked = 0
    for path, text in sections.items():
        if not path.endswith(".index"):
            continue
        log_text = sections[path[: -len(".index")] + ".log"]
        batches = {int(pos): (int(base), int(last)) for base, last, pos in
                   re.findall(r"^baseOffset: (\d+) lastOffset: (\d+) .*? position: (\d+) ", log_text, re.M)}
        for off, pos in re.findall(r"^offset: (\d+) position: (\d+)$", text, re.M):
            base, last = batches[int(pos)]
            assert base <= int(off) <= last, (path, off, pos, base, last)
            checked += 1
    assert checked, "the offset indexes are empty"


def _wait_until_unchanged(files: list[Path], timeout: float = 10.0) -> None:
    """Until the files' sizes are the same over a second (several log maintenance runs at 200 ms)."""
    deadline = time.monotonic() + timeout
    before = None
    while time.monotonic() < deadline:
        sizes = [f.stat().st_size for f in files]
        if sizes == before:
            return
        before = sizes
        time.sleep(1.0)
    raise AssertionError(f"the files kept changing for {timeout} s: {files}")


def _dump(files: list[Path]) -> str:
    """DumpLogSegments' output for the files, after checking it reports nothing wrong."""
    proc = tool(DUMP_LOG, "--deep-iteration", "--files", ",".join(map(str, files)))
    out = proc.stdout + proc.stderr
    for problem in ("Mismatches", "mismatch", "corrupt", "out of order", "non-increasing", "Exception", "ERROR"):
        assert problem not in out, f"DumpLogSegments reports {problem!r}:\n{out[-3000:]}"
    # Kafka 4.3's tool starts each file's offset check from -1, so it reports "-1 is followed by <base offset>"
    # for every segment but the first: its own broker's files get the same line. Anything else is a gap.
    for path, pairs in re.findall(r"^Non-consecutive offsets in (\S+)\n((?:\s+-?\d+ is followed by -?\d+\n?)+)",
                                  out, re.M):
        for before, after in re.findall(r"(-?\d+) is followed by (-?\d+)", pairs):
            assert (int(before), int(after)) == (-1, int(Path(path).stem)), f"{path}: {before} then {after}"
    return out


def _sections(out: str) -> dict[str, str]:
    """DumpLogSegments output split per file ("Dumping <path>" headers)."""
    parts = re.split(r"^Dumping (\S+)$", out, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_acl_command_adds_lists_and_removes_acls(tmp_path: Path) -> None:
    """kafka-acls.sh against a Logway with StandardAuthorizer (User:ANONYMOUS a super user until SASL exists)."""
    from logway.gateway.in_process import InProcessGateway

    gateway = InProcessGateway(tmp_path / "data", {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"}).start()
    try:
        server = ("--bootstrap-server", gateway.bootstrap)
        tool(ACLS, *server, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
             "Describe", "--topic", "pay-", "--resource-pattern-type", "prefixed", "--group", "billing")
        tool(ACLS, *server, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9",
             "--operation", "All", "--topic", "*")
        listed = tool(ACLS, *server, "--list").stdout
        assert "name=pay-, patternType=PREFIXED" in listed and "resourceType=GROUP, name=billing, patternType=PREFIXED" in listed
        assert "(principal=User:mallory, host=10.0.0.9, operation=ALL, permissionType=DENY)" in listed
        assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
        tool(ACLS, *server, "--remove", "--force", "--topic", "*")
        listed = tool(ACLS, *server, "--list").stdout
        assert "User:mallory" not in listed and "User:alice" in listed
        assert {(a.name, a.principal) for a in gateway.broker.realm.authorizer.acls} == {
            ("pay-", "User:alice"), ("billing", "User:alice")}
    finally:
        gateway.stop()
