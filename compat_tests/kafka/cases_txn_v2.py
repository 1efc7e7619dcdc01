"""Conformance cases for transaction version 2 (KIP-890 part 2), which both brokers finalize: the feature in
ApiVersions, partitions added by the transactional Produce v12 itself, the offsets partition by TxnOffsetCommit
v5, and EndTxn v5's epoch bumps and retries (Kafka's table for Empty / CompleteCommit / CompleteAbort)."""

from __future__ import annotations

from typing import Any

from compat_tests.kafka.cases import (
    CLIENT_SOFTWARE,
    Steps,
    _list_offsets,
    _txn_add,
    _txn_call,
    _txn_init,
    case,
)
from compat_tests.kafka.sides import Side, records


@case(18, "transaction.version, group.version and share.version features", min_version=3)
def api_versions_features(side: Side, v: int, topic: str) -> Steps:
    resp = side.call(18, v, CLIENT_SOFTWARE)
    wanted = {"transaction.version", "group.version", "share.version"}
    return {"supported": [(f.name, f.min_version, f.max_version) for f in resp.supported_features if f.name in wanted],
            "finalized": sorted((f.name, f.min_version_level, f.max_version_level)
                                for f in resp.finalized_features if f.name in wanted)}


def _produce_txn(side: Side, v: int, topic: str, pid: int, epoch: int, sequence: int, count: int = 2) -> Any:
    batch = records(count, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
    return _txn_call(side, 0, v, {"transactional_id": topic, "acks": -1, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        lambda r: r.responses[0].partition_responses[0].error_code)


def _end(side: Side, v: int, topic: str, pid: int, epoch: int, commit: bool) -> Any:
    return _txn_call(side, 26, v, {"transactional_id": topic, "producer_id": pid, "producer_epoch": epoch,
                                   "committed": commit})


def _until_marked(side: Side, topic: str, end: int) -> None:
    """Until partition 0's end passes ``end`` (Kafka writes the markers after answering EndTxn)."""
    import time

    deadline = time.monotonic() + 10
    while _list_offsets(side, 7, topic, -1).topics[0].partitions[0].offset <= end and time.monotonic() < deadline:
        time.sleep(0.05)


@case(0, "a transactional batch without AddPartitionsToTxn: added by the produce from v12")
def produce_adds_the_partition(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic)
    init = _txn_init(side, topic)
    pid, epoch = init.producer_id, init.producer_epoch
    produced = _produce_txn(side, v, topic, pid, epoch, 0)
    steps = {"produce": {"error": produced.responses[0].partition_responses[0].error_code,
                         "offset": produced.responses[0].partition_responses[0].base_offset}}
    if v >= 12:
        steps["end v5"] = _end(side, 5, topic, pid, epoch, True)
        _until_marked(side, topic, 2)
        steps["next transaction, old epoch"] = _produce_txn(side, v, topic, pid, epoch, 2).responses[0]
        steps["next transaction, new epoch"] = _produce_txn(side, v, topic, pid, epoch + 1, 0).responses[0]
        steps["abort it"] = _end(side, 5, topic, pid, epoch + 1, False)
    else:
        steps["end"] = _end(side, 3, topic, pid, epoch, False)
    return steps


@case(26, "v5: every end bumps the epoch; retries, Empty and finished transactions", min_version=5)
def end_txn_v5(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic)
    init = _txn_init(side, topic)
    pid, epoch = init.producer_id, init.producer_epoch
    steps = {"commit of nothing": _end(side, v, topic, pid, epoch, True),
             "abort of nothing": _end(side, v, topic, pid, epoch, False)}
    epoch += 1
    _produce_txn(side, 12, topic, pid, epoch, 0)
    steps.update({"commit": _end(side, v, topic, pid, epoch, True),
                  "its retry": _end(side, v, topic, pid, epoch, True),
                  "a retry as an abort": _end(side, v, topic, pid, epoch, False),
                  "commit at the new epoch": _end(side, v, topic, pid, epoch + 1, True),
                  "abort at the new epoch": _end(side, v, topic, pid, epoch + 1, False),
                  "a later epoch": _end(side, v, topic, pid, epoch + 7, True),
                  "another producer id": _end(side, v, topic, pid + 1, epoch + 2, True)})
    return steps


@case(28, "v5: the offsets partition joins the transaction without AddOffsetsToTxn")
def txn_offset_commit_adds_the_offsets_partition(side: Side, v: int, topic: str) -> Steps:
    side.create_topic(topic)
    init = _txn_init(side, topic)
    pid, epoch = init.producer_id, init.producer_epoch
    group = topic + "-g"
    _txn_call(side, 10, 3, {"key": group, "key_type": 0})  # Kafka creates __consumer_offsets on first use
    if v < 5:
        _txn_add(side, topic, pid, epoch, topic)  # a transaction version 1 transaction
    else:
        _produce_txn(side, 12, topic, pid, epoch, 0)

    def commit(producer_epoch: int) -> Any:
        return _txn_call(side, 28, v, {
            "transactional_id": topic, "group_id": group, "producer_id": pid, "producer_epoch": producer_epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
            lambda r: r.topics[0].partitions[0].error_code)
    steps = {"commit": commit(epoch), "old epoch": commit(epoch - 1)}
    steps["end"] = _end(side, 5 if v >= 5 else 3, topic, pid, epoch, True)
    # The marker follows the transaction's records: 2 of them from v5, none before (only AddPartitionsToTxn).
    _until_marked(side, topic, 2 if v >= 5 else 0)
    fetched = side.call(9, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
    steps["committed"] = [(t.name, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
                          for g in fetched.groups for t in g.topics]
    return steps
