"""The Spark source with kafka.isolation.level=read_committed over transactions (committed, aborted, open)."""

import confluent_kafka as ck

from logway.spark.source import FORMAT


def test_read_committed_sees_only_committed_transactions(spark_session, broker_bootstrap, new_topic):
    topic = new_topic(2)
    producer = ck.Producer({"bootstrap.servers": broker_bootstrap, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(10)
    for round_, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, f"{round_}-{i}".encode(), partition=i % 2)
        producer.flush(10)  # abort_transaction would purge records not sent yet
        producer.commit_transaction(10) if commit else producer.abort_transaction(10)

    df = (spark_session.read.format(FORMAT).option("kafka.bootstrap.servers", broker_bootstrap)
          .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load())
    # The aborted round (written, then dropped by the consumer) and the markers' offsets are not rows.
    assert sorted(bytes(r.value) for r in df.select("value").collect()) == sorted(
        f"{r}-{i}".encode() for r in (0, 2) for i in range(20))
