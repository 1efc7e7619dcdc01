"""PySpark (4.x) data source and sink speaking the Kafka protocol, and the project's pipeline jobs.

`.format("logway-kafka")` where a job says "kafka" (found by PySpark through `pyspark_logway`, or
`logway.spark.source.register(session)`).
"""
