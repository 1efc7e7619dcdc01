"""What the pre-decode length check (wire/request_check.py) costs per request, beside kio's own decode.

    .venv/bin/python -m bench.request_check

Every request but Produce goes through the check before kio's native reader; this times both on typical
requests (best of 5 runs of 20000 calls each), in-process, no network.
"""

from __future__ import annotations

import timeit

from logway.wire.protocol import build, encode_body, entity_reader, request_type
from logway.wire.request_check import check_body


def _fetch(topics: int, partitions: int) -> dict:
    return {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "",
            "topics": [{"topic": f"topic-{t}", "partitions": [
                {"partition": p, "current_leader_epoch": 0, "fetch_offset": 1000, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(partitions)]}
                for t in range(topics)]}


def _metadata(topics: int) -> dict:
    return {"topics": [{"name": f"topic-{i}", "topic_id": None} for i in range(topics)],
            "allow_auto_topic_creation": True, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}


CASES = {
    "Fetch v11, 10 topics x 10 partitions": (1, 11, _fetch(10, 10)),
    "Fetch v12, 10 topics x 10 partitions": (1, 12, _fetch(10, 10)),
    "Fetch v12, 1 partition": (1, 12, _fetch(1, 1)),
    "Metadata v12, 3 topics": (3, 12, _metadata(3)),
    "Metadata v12, all topics": (3, 12, {**_metadata(0), "topics": None}),
    "OffsetCommit v8, 100 partitions": (8, 8, {"group_id": "g", "generation_id_or_member_epoch": 1,
                                               "member_id": "m", "topics": [{"name": "t", "partitions": [
                                                   {"partition_index": p, "committed_offset": 10,
                                                    "committed_leader_epoch": 0, "committed_metadata": ""}
                                                   for p in range(100)]}]}),
}


def _best_us(fn, number: int = 20000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    print(f"{'request':40s} {'bytes':>6s} {'check µs':>9s} {'kio µs':>8s} {'check/kio':>9s}")
    for name, (key, version, data) in CASES.items():
        cls = request_type(key, version)
        body = encode_body(build(cls, data))
        read = entity_reader(cls)
        check_us = _best_us(lambda: check_body(cls, body, 0))  # noqa: B023 - timed at once
        kio_us = _best_us(lambda: read(body, 0))  # noqa: B023
        print(f"{name:40s} {len(body):6d} {check_us:9.2f} {kio_us:8.2f} {check_us / kio_us:9.0%}")


if __name__ == "__main__":
    main()
