"""PySpark (4.x) data source and sink speaking the Kafka protocol, and the project's pipeline jobs.

Use `spark.source.register(session)` and then `.format("logway-kafka")` where a job says "kafka".
"""
