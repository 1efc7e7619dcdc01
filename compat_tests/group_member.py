"""A consumer-group member process for compat_tests: prints its assignments, records and commits as JSON lines.

    python compat_tests/group_member.py BOOTSTRAP TOPIC GROUP [--manual-commit]

SIGTERM closes the consumer cleanly (it leaves the group and, with auto commit, commits first).
"""

from __future__ import annotations

import json
import signal
import sys
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.structs import OffsetAndMetadata


def emit(**event) -> None:
    print(json.dumps({"t": time.time(), **event}), flush=True)


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        emit(event="revoked", partitions=sorted(tp.partition for tp in revoked))

    def on_partitions_assigned(self, assigned):
        emit(event="assigned", partitions=sorted(tp.partition for tp in assigned))


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    manual = "--manual-commit" in sys.argv
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=not manual, auto_commit_interval_ms=200,
        session_timeout_ms=6000, heartbeat_interval_ms=1000, max_poll_records=50,
        retry_backoff_ms=200, request_timeout_ms=10000,
    )
    consumer.subscribe([topic], listener=Listener())
    deadline = time.monotonic() + 120  # bounded: a test never leaves a member behind for long
    while not stop and time.monotonic() < deadline:
        try:
            batches = consumer.poll(timeout_ms=200)
        except Exception as exc:  # the gateway may be restarting under us
            emit(event="error", error=repr(exc))
            time.sleep(0.2)
            continue
        for tp, records in batches.items():
            for r in records:
                emit(event="record", partition=tp.partition, offset=r.offset)
                if manual:
                    try:
                        consumer.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                        emit(event="committed", partition=tp.partition, offset=r.offset + 1)
                    except Exception as exc:
                        emit(event="error", error=repr(exc))
    consumer.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
