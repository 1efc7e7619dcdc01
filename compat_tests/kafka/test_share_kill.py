"""SIGKILL under a share-group load: no acknowledgement a share consumer was told is kept may be lost.

A real `logway serve` process takes an idempotent acks=all producer while two of Kafka 4.3.1's
KafkaShareConsumers (explicit acknowledgement, ACCEPT) read the topic as one share group and commitSync after
each poll; a consumer prints a record's value as committed only when commitSync reported no error for any
partition. The broker is killed with SIGKILL at seeded random moments and restarted on the same port and data.

Checked: no value is committed twice (a lost acceptance would deliver its record again, to be accepted a second
time), and in the end every record the producer had acknowledged is committed by one of the consumers (nothing
acquired before a kill stays stuck). LOGWAY_SHARE_KILLS sets the kills (4 in `make test`); LOGWAY_KILL_SEED
replays a run.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

from confluent_kafka import Producer

from compat_tests.gateway_process import GatewayProcess
from compat_tests.kafka.kafka4_client import Kafka4Client
from compat_tests.kafka.sides import Side

TOPIC, GROUP, PARTITIONS = "shared-killed", "share-killed", 2
KILLS = int(os.environ.get("LOGWAY_SHARE_KILLS", "4"))
RATE = 400  # records per second
CLIENT = ("reconnect.backoff.ms=20", "reconnect.backoff.max.ms=200", "retry.backoff.ms=20",
          "retry.backoff.max.ms=200", "request.timeout.ms=5000", "share.acknowledgement.mode=explicit")


class Load:
    """An idempotent producer of ``v<seq>`` values remembering which ones were acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": 300000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
            "retry.backoff.ms": 20, "retry.backoff.max.ms": 200, "metadata.recovery.strategy": "none",
            "log_level": 2})
        self.sent = 0
        self.acked: set[str] = set()
        self.failures: list[str] = []

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failures.append(str(err))
        else:
            self.acked.add(msg.value().decode())

    def run_for(self, seconds: float) -> None:
        start = time.monotonic()
        first = self.sent
        while (elapsed := time.monotonic() - start) < seconds:
            while self.sent - first < elapsed * RATE:
                self.producer.produce(TOPIC, f"v{self.sent}".encode(), partition=self.sent % PARTITIONS,
                                      on_delivery=self._on_delivery)
                self.sent += 1
            self.producer.poll(0.005)


def test_sigkill_under_a_share_group_load_loses_no_acknowledgement(tmp_path) -> None:
    seed = int(os.environ.get("LOGWAY_KILL_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    print(f"share kill test: {KILLS} kills, LOGWAY_KILL_SEED={seed}")
    gw = GatewayProcess(tmp_path / "data", extra_args=("--override", "group.share.min.record.lock.duration.ms=1000",
                                                       "--override", "group.share.record.lock.duration.ms=5000",
                                                       "--override", "group.share.delivery.count.limit=10"))
    gw.start()
    consumers: list[Kafka4Client] = []
    load = None
    try:
        broker = Side("logway", gw.port)
        broker.create_topic(TOPIC, PARTITIONS)
        resp = broker.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": GROUP, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
            "validate_only": False})
        assert resp.responses[0].error_code.name == "none", resp
        consumers = [Kafka4Client.start("share", gw.bootstrap, GROUP, TOPIC, *CLIENT, log_dir=tmp_path)
                     for _ in range(2)]
        load = Load(gw.bootstrap)

        def committed() -> Counter:
            return Counter(v for c in consumers for v in c.committed())

        warm = time.monotonic() + 60  # both consumers reading before the first kill
        while not all(c.committed() for c in consumers) and time.monotonic() < warm:
            load.run_for(0.2)
        assert all(c.committed() for c in consumers), "the consumers never committed"
        for kill in range(1, KILLS + 1):
            moment = rng.uniform(0.5, 2.5)
            load.run_for(moment)
            gw.stop("KILL")
            print(f"kill {kill}: {moment:.3f}s into the load, {len(load.acked)} acked, "
                  f"{sum(committed().values())} committed")
            gw.start()
            twice = [v for v, n in committed().items() if n > 1]
            assert not twice, f"kill {kill}: committed twice: {twice[:10]}"
        load.run_for(0.5)
        assert load.producer.flush(60) == 0, "records still undelivered after the last restart"
        assert not load.failures, load.failures[:3]
        acked = load.acked
        consumers[0].wait_for(lambda: set(committed()) >= acked, "every acknowledged record committed", timeout=120)
        twice = [v for v, n in committed().items() if n > 1]
        assert not twice, f"committed twice: {twice[:10]}"
        print(f"share kill test: {KILLS} kills, {len(load.acked)} records, all committed once, "
              f"LOGWAY_KILL_SEED={seed}")
    except BaseException:
        print(f"gateway log: {gw.log_path}\n" + gw.log_path.read_text(errors="replace")[-4000:])
        raise
    finally:
        for consumer in consumers:
            consumer.kill()
        load = None  # the producer goes while its broker still runs
        gw.stop("KILL")
