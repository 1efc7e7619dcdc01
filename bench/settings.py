"""Run sizes: the default (full-ish, ~20 min on 2 cores) and --quick (a few minutes)."""

from __future__ import annotations

from dataclasses import dataclass

SECTIONS = ("produce", "consume", "e2e", "scaling", "idle", "fetch", "restart", "kafka-python", "transactions")
MB = 1 << 20


@dataclass
class Settings:
    """Every size and count a run uses; all loops in the cases are bounded by these."""

    quick: bool = False
    runs: int = 3
    full_grid: bool = False
    sections: tuple[str, ...] = SECTIONS
    peers: tuple[str, ...] = ("tansu", "kafka")   # brokers measured beside Logway
    produce_mb: int = 256          # payload per produce run (100 B cases use a quarter of it)
    consume_mb: int = 1024         # backlog read from earliest
    e2e_rate: int = 5000           # msg/s, paced
    e2e_seconds: float = 20.0
    scaling_mb: int = 128          # payload per scaling run
    idle_seconds: float = 20.0     # a consumer tailing 1,000 idle partitions, per run
    fetch_log_mb: tuple[int, ...] = (128, 1024)   # log sizes for fetch latency from an old offset
    fetch_probes: int = 10
    restart_log_mb: int = 1024     # log size for restart after clean shutdown / SIGKILL (10 GB: --log-gb 10)
    segment_mb: int = 64           # Logway log.segment.bytes for the fetch and restart logs
    kafka_python_mb: int = 128
    tansu_max_log_mb: int = 4096   # Tansu's memory engine holds the whole log in RAM; skip it above this
    profile: bool = False
    produce_cases: tuple[str, ...] = ()   # when given, only the produce cases whose name holds one of these

    @classmethod
    def for_run(cls, quick: bool, **overrides) -> Settings:
        if quick:
            base = cls(quick=True, produce_mb=64, consume_mb=128, e2e_seconds=8.0, scaling_mb=32, idle_seconds=8.0,
                       fetch_log_mb=(32, 128), fetch_probes=5, restart_log_mb=128, kafka_python_mb=16)
        else:
            base = cls()
        for key, value in overrides.items():
            if value is not None:
                setattr(base, key, value)
        return base
