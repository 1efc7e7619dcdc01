"""Proxy mode: Logway's trio server in front of an existing Kafka-compatible cluster (issue 11)."""
