"""Makes `format("logway-kafka")` work in every new Spark session without `register(spark)`.

PySpark (4.0+) finds Python data sources by scanning the Python path, in a worker, for top-level modules
named `pyspark_*` with a `DefaultSource` class (pyspark/sql/worker/lookup_data_sources.py). That is why
this one module lives outside the `logway` namespace; everything else stays inside it.
"""

try:
    from logway.spark.source import KafkaDataSource as DefaultSource  # noqa: F401 - what PySpark looks for
except ImportError:
    # Logway installed without its `spark` extra (pyarrow, confluent-kafka): offer no source rather than
    # fail PySpark's scan, which imports every pyspark_* module for every session's first lookup.
    pass
