"""/proc readings used for broker CPU-seconds and peak RSS."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.procs import cpu_seconds, free_port


def test_cpu_seconds_grow_with_work():
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.15


def test_peak_rss_tracks_allocation():
    # A fresh process: in the test session's own process an earlier peak may already exceed the block.
    script = (
        "import json, os; from bench.procs import memory_mb\n"
        "before = memory_mb(os.getpid())['VmHWM']\n"
        "block = bytearray(64 << 20); block[::4096] = b'x' * len(block[::4096])\n"
        "print(json.dumps([before, memory_mb(os.getpid())]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[2], timeout=60)
    before, after = json.loads(out.stdout)
    assert after["VmHWM"] >= before + 60
    assert after["VmHWM"] >= after["VmRSS"] - 1


def test_free_port_is_bindable_on_loopback():
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
