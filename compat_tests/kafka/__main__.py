"""`python -m compat_tests.kafka start --nodes 1|3`: run the reference Apache Kafka until Ctrl-C."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from compat_tests.kafka.cluster import KAFKA_VERSION, KafkaCluster, ensure_jars


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.kafka")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a KRaft cluster on 127.0.0.1 and run until interrupted")
    start.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    start.add_argument("--dir", type=Path, help="data and log directory (default: a new temp dir)")
    sub.add_parser("jars", help="resolve the jars with Maven and print the classpath")
    args = parser.parse_args()
    if args.command == "jars":
        print(f"{ensure_jars()}/*")
        return
    base = args.dir or Path(tempfile.mkdtemp(prefix="kafka-ref-"))
    cluster = KafkaCluster(base, nodes=args.nodes).start()
    print(f"Apache Kafka {KAFKA_VERSION}: {args.nodes} node(s) ready in {cluster.start_seconds:.1f}s", flush=True)
    print(f"bootstrap {cluster.bootstrap}; data and logs under {base}", flush=True)
    for node in cluster.nodes:
        print(f"  node {node.node_id}: pid {node.proc.pid}, log {node.log_path}", flush=True)
    try:
        while all(n.proc.poll() is None for n in cluster.nodes):
            time.sleep(1)
        print("a node exited; stopping", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
