"""One broker under comparison (the reference Kafka or Logway) and the set-up steps cases share."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from compat_tests.kafka.wire_client import WireClient
from logway.wire.records import NewRecord, build_batch

BASE_TIMESTAMP = 1_700_000_000_000  # fixed record timestamps: the two brokers get byte-identical batches


def records(count: int = 2, value_size: int = 10, **batch_args: Any) -> bytes:
    """One v2 batch of ``count`` records with fixed keys, values and timestamps (i ms apart)."""
    items = [NewRecord(f"k{i}".encode(), bytes([65 + i % 26]) * value_size, timestamp=BASE_TIMESTAMP + i)
             for i in range(count)]
    return build_batch(items, **batch_args)


def corrupt(batch: bytes) -> bytes:
    """The batch with its last byte flipped: the CRC no longer matches."""
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


@dataclass
class Side:
    """A broker on 127.0.0.1:port; every helper opens its own connection."""

    name: str
    port: int

    def client(self) -> WireClient:
        return WireClient(self.port)

    def call(self, api_key: int, version: int, fields: dict[str, Any] | None = None) -> Any:
        with self.client() as c:
            return c.call(api_key, version, fields)

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        """CreateTopics v4 and wait until Metadata shows a leader for every partition."""
        resp = self.call(19, 4, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout": 30_000})
        code = resp.topics[0].error_code
        if code.name not in ("none", "topic_already_exists"):
            raise AssertionError(f"{self.name}: cannot create {name}: {code.name}")
        self.wait_for_leaders(name, partitions)

    def wait_for_leaders(self, name: str, partitions: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = self.call(3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
            t = meta.topics[0]
            if (t.error_code.name == "none" and len(t.partitions) == partitions
                    and all(p.error_code.name == "none" and p.leader_id >= 0 for p in t.partitions)
                    and self._partitions_hosted(name, partitions)):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: no leaders for {name}")

    def _partitions_hosted(self, name: str, partitions: int) -> bool:
        """Whether the leader serves every partition: Kafka's metadata cache names a leader a few ms before
        its replica manager hosts the partition (requests meanwhile get NOT_LEADER_OR_FOLLOWER)."""
        resp = self.call(2, 1, {"replica_id": -1, "topics": [{"name": name, "partitions": [
            {"partition_index": i, "timestamp": -1} for i in range(partitions)]}]})
        return all(p.error_code.name == "none" for p in resp.topics[0].partitions)

    def partition_count(self, name: str, timeout: float = 10.0) -> int:
        """Partitions Metadata lists for ``name`` once every one has a leader (Kafka's metadata cache lags
        CreateTopics / CreatePartitions by a few ms); 0 if the topic does not appear within ``timeout``."""
        deadline = time.monotonic() + timeout
        count = 0
        while time.monotonic() < deadline:
            t = self.call(3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False}).topics[0]
            if t.error_code.name == "none" and t.partitions and all(p.leader_id >= 0 for p in t.partitions):
                if len(t.partitions) == count:
                    return count
                count = len(t.partitions)
            time.sleep(0.1)
        return count

    def wait_gone(self, name: str, timeout: float = 5.0) -> str:
        """The Metadata error for ``name`` once it is no longer listed (or the last one after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.call(3, 4, {"topics": [{"name": name}], "allow_auto_topic_creation": False}).topics[0].error_code
            if code.name != "none" or time.monotonic() > deadline:
                return code.name
            time.sleep(0.05)

    def topic_id(self, name: str) -> Any:
        meta = self.call(3, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                 "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        return meta.topics[0].topic_id

    def produce(self, topic: str, batch: bytes, partition: int = 0, version: int = 9) -> Any:
        resp = self.call(0, version, {"acks": -1, "timeout": 30_000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
        code = resp.responses[0].partition_responses[0].error_code
        if code.name != "none":
            raise AssertionError(f"{self.name}: produce to {topic}-{partition} failed: {code.name}")
        return resp

    def retry(self, api_key: int, version: int, fields: dict[str, Any], ok: Any, timeout: float = 20.0) -> Any:
        """Repeat a request while ``ok(response)`` is false (e.g. the coordinator is still loading)."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self.call(api_key, version, fields)
            if ok(resp) or time.monotonic() > deadline:
                return resp
            time.sleep(0.1)
