"""A real SIGKILL mid-run: data and idempotent-producer dedup survive without a clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from storage_helpers import NOW, make_batch

from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

CHILD = """
import sys, time
sys.path[:0] = [{root!r}, {here!r}]
from storage_helpers import NOW, make_batch
from logway.storage.config import LogConfig
from logway.storage.log_manager import LogManager

manager = LogManager([{data!r}], LogConfig.from_properties({{"segment.bytes": "600"}}))
manager.open()
plog = manager.create_topic("k", 1).partitions[0]
for seq in range(0, 40, 2):
    plog.append(make_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=seq), now_ms=NOW)
print(plog.log_end_offset, flush=True)
time.sleep(60)
"""


def test_sigkill_keeps_appended_data_and_dedup_state(tmp_path):
    data = tmp_path / "data"
    script = CHILD.format(root=str(ROOT), here=str(HERE), data=str(data))
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        child.stdout.close()
    assert line.strip() == "40"
    assert not (data / ".kafka_cleanshutdown").exists()

    manager = LogManager([data], LogConfig.from_properties({"segment.bytes": "600"}))
    manager.open()
    try:
        plog = manager.get_partition("k", 0)
        assert plog.log_end_offset == 40
        retry = plog.append(make_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=36), now_ms=NOW)
        assert retry.duplicate and retry.base_offset == 36
        fresh = plog.append(make_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=40), now_ms=NOW)
        assert fresh.base_offset == 40
    finally:
        manager.close()
