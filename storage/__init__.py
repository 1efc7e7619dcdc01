"""The log: log dirs, partition logs, segments + indexes, recovery, retention, compaction (Kafka's storage layer).

Entry points: `storage.log_manager.LogManager` (topics across log.dirs, retention, flush and
compaction scheduling), `storage.partition_log.PartitionLog` (append / read / list offsets /
flush / compact for one partition; it is opened and recovered by `storage.log_loader.LogLoader` and
compacted through `storage.compaction_swap.CompactionSwap`), `storage.config.LogConfig` (topic configs),
`storage.cleaner.CleanerConfig` (``log.cleaner.*`` broker settings) and `storage.errors`
(exceptions carrying Kafka error codes). Synchronous code over real files; single writer per
partition; only `PartitionLog.flush` and `PartitionLog.compact` may run on another thread. Every
call that decides what survives a power loss (create, fsync, truncate, rename, remove) goes through
`storage.fs`, which the power-loss test replaces (tests/power_loss/).
"""
