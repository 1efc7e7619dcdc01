"""The data source Spark looks up by name: schema, readers and writers for the Kafka protocol."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from logway.spark.options import lower_keys, parse_sink_options, parse_source_options
from logway.spark.readers import KafkaBatchReader, KafkaStreamReader
from logway.spark.schema import kafka_schema
from logway.spark.writer import KafkaBatchWriter, KafkaStreamWriter

FORMAT = "logway-kafka"


class KafkaDataSource(DataSource):
    """`spark.read.format("logway-kafka")`: Spark's Kafka source and sink, options and schema included."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """Fixed, like Spark's Kafka source; headers only with includeHeaders=true."""
        return kafka_schema(lower_keys(self.options).get("includeheaders", "false").lower() == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(parse_sink_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(parse_sink_options(self.options), schema)


def register(session: SparkSession) -> str:
    """Make the format available in `session`; returns its name for .format()."""
    session.dataSource.register(KafkaDataSource)
    return FORMAT
