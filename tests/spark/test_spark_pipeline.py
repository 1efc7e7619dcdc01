"""The page-view pipeline's aggregates equal a plain-Python computation over the same events."""

from pathlib import Path

from logway.spark.pipeline import events as ev
from logway.spark.pipeline.job import (
    WATERMARK_DELAY_MS,
    Topics,
    read_parquet_counts,
    read_topic_counts,
    run_available_now,
)
from logway.spark.source import FORMAT

from .conftest import EXTRA_PRODUCER_CONFIG


def test_pipeline_counts_match_plain_python(spark_session, broker_bootstrap, new_topic, tmp_path):
    topics = Topics(broker_bootstrap, new_topic(3), new_topic(2, {"cleanup.policy": "compact"}))
    generated = ev.generate(900, minutes=5)
    ev.produce(broker_bootstrap, topics.events, generated, EXTRA_PRODUCER_CONFIG)

    run_available_now(spark_session, FORMAT, topics, str(tmp_path))

    expected = ev.expected_counts(generated)
    assert read_topic_counts(spark_session, FORMAT, topics) == expected
    closed = ev.closed_windows(expected, generated, WATERMARK_DELAY_MS)
    assert 0 < len(closed) < len(expected)  # the last minute is still open: the watermark has not passed it
    assert read_parquet_counts(spark_session, str(tmp_path / "parquet")) == closed
    dates = sorted(p.name for p in Path(tmp_path / "parquet").glob("date=*"))
    assert dates == ["date=2024-03-01", "date=2024-03-02"]  # events cross midnight UTC
