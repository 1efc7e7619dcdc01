"""Entry point of a load-generator process: `python -m bench.loadgen '<json spec>'`.

Running clients in their own processes keeps them out of the driver's interpreter. Protocol with the driver
(bench.driver): the child sets up its clients and connections, prints `READY`, waits for one line on stdin
(the start signal), runs, and prints `RESULT <json>`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable


def ready() -> None:
    """Tell the driver set-up is done, then block until it says go."""
    print("READY", flush=True)
    sys.stdin.readline()


def emit(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)


def payloads(size: int, count: int = 64) -> list[bytes]:
    """Distinct payloads, half random and half zeros: compressible about 2:1, like typical log records."""
    half = size // 2
    return [os.urandom(half) + bytes(size - half) for _ in range(count)]


def modes() -> dict[str, Callable[[dict], dict]]:
    from bench import consume_trace, java_consume, kafka_python_load, rdkafka_load

    return {
        "rdkafka.produce": rdkafka_load.produce,
        "rdkafka.txn_produce": rdkafka_load.txn_produce,
        "rdkafka.consume": rdkafka_load.consume,
        "rdkafka.consume_trace": consume_trace.consume,
        "java.consume": java_consume.consume,
        "rdkafka.e2e_produce": rdkafka_load.e2e_produce,
        "rdkafka.e2e_consume": rdkafka_load.e2e_consume,
        "rdkafka.fetch_probe": rdkafka_load.fetch_probe,
        "rdkafka.tail_idle": rdkafka_load.tail_idle,
        "kafka_python.produce": kafka_python_load.produce,
        "kafka_python.consume": kafka_python_load.consume,
    }


def main() -> None:
    spec = json.loads(sys.argv[1])
    emit(modes()[spec["mode"]](spec))


if __name__ == "__main__":
    main()
