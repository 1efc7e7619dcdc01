"""One shared local[2] SparkSession for every Spark test, plus helpers to make topics and produce records.

PYSPARK_PYTHON and PYTHONPATH are set before the JVM starts: Python workers (executors and the
driver-side planner of streaming sources) must import `spark` from this repository, installed or not.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the tests import `spark` even when the project is not installed with it
    sys.path.insert(0, str(REPO))

# Extra librdkafka producer settings for the records tests produce, "k=v,k=v". Only needed against a
# peer broker with quirks, e.g. SPARK_TEST_PRODUCER_CONFIG=batch.num.messages=1 for Tansu 0.6, whose
# ListOffsets(latest) answers the last batch's base offset + 1 instead of the high watermark.
EXTRA_PRODUCER_CONFIG = dict(kv.split("=", 1) for kv in os.environ.get("SPARK_TEST_PRODUCER_CONFIG", "").split(",")
                             if "=" in kv)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[object]:
    """The shared SparkSession, with the Kafka-protocol format registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from logway.spark.source import register

    session = (SparkSession.builder.master("local[2]").appName("logway-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def new_topic(broker_bootstrap: str) -> Callable[..., str]:
    """Create a topic (a fresh unique name unless given) and return its name."""
    admin = AdminClient({"bootstrap.servers": broker_bootstrap})

    def make(partitions: int = 1, config: dict[str, str] | None = None, name: str | None = None) -> str:
        name = name or f"spark-{uuid.uuid4().hex[:10]}"
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
        futures[name].result(15)
        return name

    return make


@pytest.fixture
def produce(broker_bootstrap: str) -> Callable[..., list[dict]]:
    """Produce records (dicts with value, key, partition, headers, timestamp) and return them with offsets."""

    def send(topic: str, records: list[dict]) -> list[dict]:
        producer = ck.Producer({"bootstrap.servers": broker_bootstrap, "linger.ms": "20", **EXTRA_PRODUCER_CONFIG})
        acked: list[dict] = []
        failures: list[ck.KafkaError] = []

        def on_delivery(err: ck.KafkaError | None, msg: ck.Message, rec: dict) -> None:
            if err is not None:
                failures.append(err)
            else:
                acked.append({**rec, "partition": msg.partition(), "offset": msg.offset()})

        for rec in records:
            kwargs = {k: rec[k] for k in ("key", "headers", "timestamp") if rec.get(k) is not None}
            if rec.get("partition") is not None:
                kwargs["partition"] = rec["partition"]
            producer.produce(topic, value=rec.get("value"), on_delivery=lambda e, m, r=rec: on_delivery(e, m, r),
                             **kwargs)
        assert producer.flush(30) == 0
        assert not failures, failures
        return sorted(acked, key=lambda r: (r["partition"], r["offset"]))

    return send
