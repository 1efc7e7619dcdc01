"""How the gateway sets CPython's cyclic garbage collector: fewer, cheaper collections on the request path.

Every request allocates short-lived objects (decoded partitions, per-partition results); with CPython's default
thresholds (700 allocations) a 1,000-partition Fetch triggers several young collections, and each older one
walks every long-lived object (one PartitionLog, segments and indexes per partition). The objects made at
start-up (modules, recovered logs) live as long as the process: ``gc.freeze`` moves them out of the collector's
view. The young generation's threshold is raised so a request's garbage is freed by reference counting before a
collection runs over it; reference cycles are still collected, only less often (measured in bench.request_cost).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000  # CPython's default is 700
OLDER_THRESHOLDS = (20, 100)  # defaults 10, 10: older generations are walked even less often


def tune_after_startup() -> None:
    """Freeze what start-up made (it lives as long as the process) and raise the collection thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
