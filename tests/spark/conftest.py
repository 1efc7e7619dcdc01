"""One shared local[2] SparkSession for every Spark test, plus helpers to make topics and produce records.

The session carries Spark's own Kafka connector (format "kafka", jars resolved with Maven by
logway.spark.kafka_jars) beside this package's "logway-kafka", so tests compare the two on the same data.
PYSPARK_PYTHON and PYTHONPATH are set before the JVM starts: Python workers (executors and the
driver-side planner of streaming sources) must import `logway.spark` from this repository.
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


def _discovery_path(tmp: Path) -> Path:
    """A folder holding only `pyspark_logway`, as a wheel install puts it in site-packages.

    An editable install serves it through setuptools' import hook, which PySpark's scan for
    `pyspark_*` modules (pkgutil.iter_modules) does not see; this folder on the workers' path does.
    """
    (tmp / "pyspark_logway").symlink_to(REPO / "spark" / "pyspark_logway", target_is_directory=True)
    return tmp


@pytest.fixture(scope="session")
def connector_jars() -> list[str]:
    """Spark's own Kafka connector for the installed PySpark, resolved from Maven Central once (cached in ~/.m2)."""
    from logway.spark.kafka_jars import connector_jars as resolve

    return resolve()


@pytest.fixture(scope="session")
def spark_session(connector_jars: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The shared SparkSession: format "kafka" from spark.jars, "logway-kafka" found by PySpark itself (no register)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    paths = (str(REPO), str(_discovery_path(tmp_path_factory.mktemp("discovery"))), os.environ.get("PYTHONPATH"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("logway-spark-tests")
               .config("spark.jars", ",".join(connector_jars))
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
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
