"""The log: log dirs, partition logs, segments + indexes, recovery, retention (Kafka's storage layer).

Entry points: `storage.log_manager.LogManager` (topics across log.dirs), `storage.partition_log.PartitionLog`
(append / read / list offsets / flush for one partition), `storage.config.LogConfig` (topic configs) and
`storage.errors` (exceptions carrying Kafka error codes). Synchronous code over real files; single writer
per partition; only `PartitionLog.flush` may run on another thread.
"""
