"""Kafka's DumpLogSegments reads what Logway's transactions write: __transaction_state records with Kafka's
TransactionLogKey/Value schemas (--transaction-log-decoder), COMMIT/ABORT markers, and the .txnindex file."""

from __future__ import annotations

import re
from pathlib import Path

from confluent_kafka import Producer

from compat_tests.kafka.cluster import java
from logway.coordinator.partitioning import partition_for_group
from logway.gateway.in_process import InProcessGateway

DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"


def _dump(*args: str) -> str:
    proc = java(DUMP_LOG, *args, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Exception" not in out, out[-3000:]
    return out


def test_dump_log_segments_decodes_transaction_state_markers_and_txnindex(tmp_path: Path) -> None:
    gateway = InProcessGateway(tmp_path / "data", {"num.partitions": "1"}).start()
    try:
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "transactional.id": "tx-dump"})
        producer.init_transactions(10)
        for commit in (True, False):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("dumped-txn", str(i).encode())
            producer.flush(10)
            producer.commit_transaction(10) if commit else producer.abort_transaction(10)
    finally:
        gateway.stop()
    state_dir = tmp_path / "data" / f"__transaction_state-{partition_for_group('tx-dump', 50)}"
    decoded = _dump("--transaction-log-decoder", "--files", str(next(state_dir.glob("*.log"))))
    # Kafka 4.3 prints each record as JSON: {"transactionalId":...} and the value's TransactionStatus ids:
    # Empty, Ongoing, PrepareCommit, CompleteCommit, Ongoing, PrepareAbort, CompleteAbort.
    assert decoded.count('key: {"type":"0","data":{"transactionalId":"tx-dump"}}') == 7
    assert [int(s) for s in re.findall(r'"transactionStatus":(\d+)', decoded)] == [0, 1, 2, 4, 1, 3, 5]
    assert '"transactionPartitions":[{"topic":"dumped-txn","partitionIds":[0]}]' in decoded

    data_dir = tmp_path / "data" / "dumped-txn-0"
    out = _dump("--deep-iteration", "--files", f"{next(data_dir.glob('*.log'))},{next(data_dir.glob('*.txnindex'))}")
    assert re.findall(r"endTxnMarker: (\w+)", out) == ["COMMIT", "ABORT"]
    # The aborted transaction: records 4-6, its ABORT marker at offset 7.
    assert re.search(r"producerId: \d+ firstOffset: 4 lastOffset: 7 lastStableOffset: 8", out), out[-2000:]


TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


def _tool(*args: str) -> str:
    proc = java(TRANSACTIONS, *args, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_kafka_transactions_tool_lists_and_describes(tmp_path: Path) -> None:
    """kafka-transactions.sh list / describe / describe-producers over an open transaction."""
    gateway = InProcessGateway(tmp_path / "data", {"num.partitions": "1"}).start()
    try:
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "transactional.id": "tx-tool"})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("tool-txn", b"committed")
        producer.commit_transaction(10)
        producer.begin_transaction()
        producer.produce("tool-txn", b"open")
        producer.flush(10)
        bootstrap = ("--bootstrap-server", gateway.bootstrap)
        listed = _tool(*bootstrap, "list")
        assert re.search(r"^tx-tool\s+1\s+\d+\s+Ongoing", listed, re.M), listed
        described = _tool(*bootstrap, "describe", "--transactional-id", "tx-tool")
        assert re.search(r"\d+\s+\d+\s+Ongoing\s+60000\s+\d+\s+\d+\s+tool-txn-0", described), described
        producers = _tool(*bootstrap, "describe-producers", "--topic", "tool-txn", "--partition", "0")
        # Columns: id, epoch, coordinator epoch, last sequence, last timestamp, current transaction start offset:
        # the open transaction started at offset 2 (after the first record and its COMMIT marker).
        assert re.search(r"^\d+\s+0\s+-1\s+1\s+\d+\s+2\s*$", producers, re.M), producers
        producer.abort_transaction(10)
    finally:
        gateway.stop()
