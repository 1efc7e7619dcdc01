"""An exactly-once Python stream processor (confluent-kafka), as users write them: it counts records per key and
writes each record's running count to OUTPUT, keeping its counts in a compacted changelog topic (STATE) written
in the same transaction as the output and the consumed offsets (KIP-447: send_offsets_to_transaction with the
consumer's group metadata). On start it fences any earlier instance (init_transactions with its fixed
transactional.id), restores its counts from STATE (read_committed) and resumes from the committed offsets.

    python eos_processor.py BOOTSTRAP INPUT OUTPUT STATE GROUP [SECONDS]

It prints a JSON line per transaction ({"event": "open", ...} once its offsets are sent, before the commit;
{"event": "committed", "records": N} after), and stops when SECONDS (default 120) have passed: a bound, so a
test never leaves one behind.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


def restore(bootstrap: str, state: str) -> dict[str, int]:
    """The counts in STATE up to its last stable offset: what the committed transactions wrote."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                       "isolation.level": "read_committed"})
    try:
        partitions = reader.list_topics(state, timeout=30).topics[state].partitions
        ends = {p: reader.get_watermark_offsets(TopicPartition(state, p), timeout=30)[1] for p in partitions}
        assigned = [TopicPartition(state, p, 0) for p, end in ends.items() if end > 0]
        reader.assign(assigned)
        counts: dict[str, int] = {}
        deadline = time.monotonic() + 60
        # Done when every partition's position reached its end: aborted records and transaction markers are
        # skipped by a read_committed consumer, so the last record delivered may lie before the end.
        while any(tp.offset < ends[tp.partition] for tp in reader.position(assigned)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not read {state} to its end {ends}")
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                counts[msg.key().decode()] = int(msg.value())
        return counts
    finally:
        reader.close()


def main(bootstrap: str, source: str, output: str, state: str, group: str, seconds: float = 120.0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-processor",
                         "transaction.timeout.ms": 30000, "linger.ms": 5})
    producer.init_transactions(60)
    counts = restore(bootstrap, state)
    emit(event="started", keys=len(counts))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": f"{group}-1",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    consumer.subscribe([source])
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(num_messages=10, timeout=0.5) if not m.error()]
            if batch:
                process(producer, consumer, batch, counts, output, state)
    finally:
        consumer.close()


def process(producer: Producer, consumer: Consumer, batch: list, counts: dict[str, int], output: str,
            state: str) -> None:
    """One transaction: the batch's outputs, the changed counts and the consumed offsets, committed together."""
    producer.begin_transaction()
    for msg in batch:
        key = msg.key().decode()
        counts[key] = counts.get(key, 0) + 1
        producer.produce(output, key=key, value=f"{msg.value().decode()}:{counts[key]}")
        producer.produce(state, key=key, value=str(counts[key]))
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
    emit(event="open", records=len(batch))
    try:
        producer.commit_transaction(30)
    except KafkaException as exc:
        emit(event="error", error=str(exc))
        raise
    emit(event="committed", records=len(batch))


if __name__ == "__main__":
    main(*sys.argv[1:6], *(float(a) for a in sys.argv[6:7]))
