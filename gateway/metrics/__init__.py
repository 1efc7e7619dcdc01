"""Prometheus metrics of the broker: cheap counters on the hot path, a collector reading the live state at scrape
time, and the HTTP endpoint that serves them (`metrics.port`). Metric names are Kafka's JMX names as the
Prometheus JMX exporter's example Kafka config maps them, so dashboards built for Kafka work unchanged."""
