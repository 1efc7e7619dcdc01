"""The Java client's transactions (Kafka Streams' exactly-once pattern) against the broker, in one JVM run."""

from __future__ import annotations

from programs import JAVA_DIR, run
from records import unique


def test_consume_transform_produce_abort_and_fencing(bootstrap: str) -> None:
    cmd = ["java", "-XX:TieredStopAtLevel=1", "-cp", f"{JAVA_DIR / 'lib'}/*",
           str(JAVA_DIR / "src" / "Transactions.java"), bootstrap, unique("java-txn")]
    facts = dict(line.split("=", 1) for line in run(cmd, timeout=120).splitlines() if "=" in line)
    # The aborted round's output and offsets do not count: the third round starts again at input offset 10.
    assert facts["output"] == ",".join(f"{i}!" for i in range(30))
    assert facts["committed"] == "30"
    assert facts["fenced"] == "true"
