"""KIP-848 consumer groups: rebalance latency with Kafka 4.3.1's Java client on Logway and on Apache Kafka 4.3.1,
side by side, and the coordinator's cost per ConsumerGroupHeartbeat (in process, no network).

    python -m bench.consumer_groups [--rounds 3]

Per round and broker (alternated): a 4-partition topic; member A joins (time until it owns all 4), member B
joins (until each owns 2), B leaves (until A owns 4 again); the broker's CPU seconds over the scenario.
Both brokers run with a 500 ms consumer heartbeat interval (group.consumer.heartbeat.interval.ms), as the
compatibility tests do.

Then, on the same broker, KIP-932 share groups: 20,000 records of 100 bytes on 2 partitions, one
KafkaShareConsumer (explicit ACCEPT, commitSync after each poll): the time from its start to the last
confirmed acknowledgement, and the broker's CPU seconds over it (the share heartbeat interval stays 5 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

from bench.procs import Kafka, Logway, scratch_dir

SETTINGS = {"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
            "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


def _scenario(bootstrap: str, port: int, log_dir: Path) -> dict[str, float]:
    from compat_tests.kafka.kafka4_client import Kafka4Client
    from compat_tests.kafka.sides import Side

    topic = f"bench-{uuid.uuid4().hex[:8]}"
    Side("broker", port).create_topic(topic, 4)
    group = f"{topic}-group"
    everything = {f"{topic}-{p}" for p in range(4)}
    out = {}
    started = time.monotonic()
    a = Kafka4Client.start("consume", bootstrap, group, topic, "group.protocol=consumer", log_dir=log_dir)
    try:
        a.wait_for(lambda: a.assignment() == everything, "A owns all")
        out["A joins (s)"] = time.monotonic() - started
        started = time.monotonic()
        b = Kafka4Client.start("consume", bootstrap, group, topic, "group.protocol=consumer", log_dir=log_dir)
        b.wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, "2 + 2")
        out["B joins, 2+2 (s)"] = time.monotonic() - started
        started = time.monotonic()
        b.stop()
        a.wait_for(lambda: a.assignment() == everything, "A owns all again")
        out["B leaves, A has 4 (s)"] = time.monotonic() - started
    finally:
        a.stop()
    return out


def _share_scenario(bootstrap: str, port: int, log_dir: Path, records: int = 20_000) -> dict[str, float]:
    from confluent_kafka import Producer

    from compat_tests.kafka.kafka4_client import Kafka4Client
    from compat_tests.kafka.sides import Side

    topic = f"bench-share-{uuid.uuid4().hex[:8]}"
    group = f"{topic}-group"
    side = Side("broker", port)
    side.create_topic(topic, 2)
    side.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": group, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}], "validate_only": False})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, b"x" * 100, partition=i % 2)
    assert producer.flush(60) == 0
    started = time.monotonic()
    consumer = Kafka4Client.start("share", bootstrap, group, topic, "max.poll.records=500", log_dir=log_dir)
    try:
        consumer.wait_for(lambda: len(consumer.committed()) >= records, "every record acknowledged", timeout=300)
        return {f"share: {records} records acknowledged (s)": time.monotonic() - started}
    finally:
        consumer.stop()


def rebalances(rounds: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {"logway": {}, "kafka": {}}
    for _ in range(rounds):
        for name, cls in (("logway", Logway), ("kafka", Kafka)):
            work = scratch_dir(f"cg-{name}")
            broker = cls(work, overrides=SETTINGS)
            broker.start()
            try:
                cpu = broker.cpu_seconds()
                scenario = _scenario(broker.bootstrap, int(broker.bootstrap.rsplit(":", 1)[1]), work)
                scenario["broker CPU-s"] = broker.cpu_seconds() - cpu
                cpu = broker.cpu_seconds()
                scenario.update(_share_scenario(broker.bootstrap, int(broker.bootstrap.rsplit(":", 1)[1]), work))
                scenario["share: broker CPU-s"] = broker.cpu_seconds() - cpu
                for key, value in scenario.items():
                    results[name].setdefault(key, []).append(value)
            finally:
                broker.stop()
                broker.cleanup()
    return results


def heartbeat_cost(members: int = 200, beats: int = 20_000) -> dict[str, float]:
    """Microseconds per steady ConsumerGroupHeartbeat and per join of one more member, in process."""
    from logway.coordinator.consumer_results import ConsumerHeartbeatRequest
    from logway.coordinator.group_config import GroupConfig
    from logway.coordinator.group_coordinator import GroupCoordinator
    from logway.coordinator.topics_image import TopicsSnapshot

    class NullLog:
        def append(self, *args, **kwargs) -> None:
            pass

        def append_marker(self, *args, **kwargs) -> None:
            pass

        def read(self, partition: int) -> list:
            return []

    topics = TopicsSnapshot()
    topics.add("t", 400)
    gc = GroupCoordinator(NullLog(), GroupConfig(consumer_assignment_interval_ms=0), topics)
    gc.load_all(0)
    box: list = []
    now = 1_000

    def call(request: ConsumerHeartbeatRequest) -> object:
        gc.consumer_group_heartbeat(request=request, now_ms=now, respond=box.append)
        return box.pop()

    started = time.process_time()
    epochs, owned = {}, {}
    for i in range(members):
        result = call(ConsumerHeartbeatRequest("g", f"m{i}", 0, rebalance_timeout_ms=30_000,
                                               subscribed_topic_names=("t",), owned={}))
        epochs[f"m{i}"], owned[f"m{i}"] = result.member_epoch, dict(result.assignment or {})
    join_us = (time.process_time() - started) / members * 1e6
    # Let everyone reconcile (each reports what it owns, as a client does), then measure steady heartbeats.
    for _ in range(4):
        for member_id in epochs:
            result = call(ConsumerHeartbeatRequest("g", member_id, epochs[member_id], owned=owned[member_id]))
            epochs[member_id] = result.member_epoch
            if result.assignment is not None:
                owned[member_id] = dict(result.assignment)
    assert gc.group("g").state.value == "Stable", gc.group("g").state
    requests = [ConsumerHeartbeatRequest("g", f"m{i % members}", epochs[f"m{i % members}"])
                for i in range(beats // 5)]
    batches = []
    for _ in range(5):  # CPU time, best of 5 batches: the machine is shared
        started = time.process_time()
        for request in requests:
            call(request)
        batches.append((time.process_time() - started) / len(requests) * 1e6)
    return {"join of one more member (us CPU, mean over 200)": join_us, "steady heartbeat (us CPU, best of 5)":
            min(batches)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-brokers", action="store_true")
    args = parser.parse_args()
    for key, value in heartbeat_cost().items():
        print(f"coordinator, 200 members, 400 partitions: {key}: {value:.1f}")
    if args.skip_brokers:
        return
    results = rebalances(args.rounds)
    print("| step | Logway median (s) | Kafka median (s) | ratio |")
    print("| --- | --- | --- | --- |")
    for key in results["logway"]:
        lw, kf = statistics.median(results["logway"][key]), statistics.median(results["kafka"][key])
        print(f"| {key} | {lw:.2f} | {kf:.2f} | {lw / kf:.2f}x |")
    print("raw:", results, file=sys.stderr)


if __name__ == "__main__":
    main()
