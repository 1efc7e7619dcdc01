"""Makes `format("logway-kafka")` work in every new Spark session without `register(spark)`.

PySpark (4.0+) finds Python data sources by scanning the Python path, in a worker, for top-level modules
named `pyspark_*` with a `DefaultSource` class (pyspark/sql/worker/lookup_data_sources.py). That is why
this one module lives outside the `logway` namespace; everything else stays inside it.
"""

from logway.spark.source import KafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
