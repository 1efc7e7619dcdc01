"""/proc readings used for broker CPU-seconds and peak RSS."""

import os
import socket
import time

from bench.procs import cpu_seconds, free_port, memory_mb


def test_cpu_seconds_grow_with_work():
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.15


def test_peak_rss_tracks_allocation():
    before = memory_mb(os.getpid())["VmHWM"]
    block = bytearray(64 << 20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page so it is resident
    after = memory_mb(os.getpid())
    assert after["VmHWM"] >= before + 60
    assert after["VmHWM"] >= after["VmRSS"] - 1


def test_free_port_is_bindable_on_loopback():
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port()))
