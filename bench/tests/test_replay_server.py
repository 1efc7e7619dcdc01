"""The consume ceiling's replay server (bench/replay_server.py) in front of a real gateway: librdkafka reads
every record through it, each partition in order, across the prebuilt chunks."""

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.replay_server import Replay, ReplayServer

TOPIC, PARTITIONS, PER_PARTITION = "replayed", 2, 3000


def test_librdkafka_reads_everything_from_the_replay(logway):
    admin = AdminClient({"bootstrap.servers": logway.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": logway.bootstrap, "linger.ms": 5})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(TOPIC, f"{p}-{i}".encode() + bytes(500), partition=p)
    assert producer.flush(30) == 0
    server = ReplayServer(Replay(("127.0.0.1", logway.port), TOPIC, [PER_PARTITION] * PARTITIONS))
    try:
        assert len(server.replay.chunks[0][0]) > 1  # 1.5 MB per partition: more than one 1 MiB chunk
        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "g", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        for _ in range(200):
            for m in consumer.consume(1000, 0.2):
                if m.error() is None:
                    seen[m.partition()].append(m.offset())
            if sum(map(len, seen.values())) >= PARTITIONS * PER_PARTITION:
                break
        consumer.close()
        assert all(offsets == list(range(PER_PARTITION)) for offsets in seen.values())
    finally:
        server.close()
