"""Operator tools behind `logway` subcommands: Kafka's admin tools as Kafka-protocol clients, and a segment dumper."""
