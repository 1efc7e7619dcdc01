"""`python -m bench.validation`: what checking one compressed batch's records costs, in process (seconds, no broker).

One v2 batch of 1 KiB records (1 MiB of records by default; values half random, half zeros, as the produce load's)
per codec, through `wire.batch_validation.validate_records` as the append path calls it: with the native
decompression (`wire/_decompress_scan.c`) and with the Python bindings decompressing (`compression.native` set
aside: the path of an install without it, and the path every codec took before it). Each path runs in a fresh
child process, the two alternating round by round: the Python path's cost depends on whether malloc hands its
fresh output fresh pages (page faults: kernel time), which one path's allocations would change for the other.
Reported: the minimum wall time of a call, and the CPU time (user + system) per call over all calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

from logway.wire import compression
from logway.wire.batch import parse_header
from logway.wire.batch_validation import validate_records
from logway.wire.records import build_batch

KIB = 1024


def batch(codec: int, records: int, size: int) -> bytes:
    """A batch of ``records`` values of ``size`` bytes, 64 distinct ones, each half random and half zeros."""
    values = [os.urandom(size // 2) + bytes(size - size // 2) for _ in range(64)]
    return build_batch([(None, values[i % 64], ()) for i in range(records)], compression=codec)


def best_of(call: Callable[[], object], calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def child(codec: int, path: str, records: int, size: int, calls: int) -> dict[str, float]:
    """One path measured in this process: minimum wall seconds and CPU seconds per call over ``calls`` calls."""
    if path == "python":
        compression.native = None
    raw = batch(codec, records, size)
    header = parse_header(raw)
    validate_records(raw, 0, header)
    start = time.process_time()  # user + system
    wall = best_of(lambda: validate_records(raw, 0, header), calls)
    return {"wall": wall, "cpu": (time.process_time() - start) / calls, "bytes": len(raw)}


def measure(codec: int, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Both paths, each in its own child process per round, alternating; the best wall, the mean CPU per call."""
    out: dict[str, dict[str, float]] = {}
    for _ in range(args.rounds):
        for path in ("native", "python"):
            command = [sys.executable, "-m", "bench.validation", "--child", f"{codec},{path}", "--records",
                       str(args.records), "--size", str(args.size), "--calls", str(args.calls)]
            got = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            seen = out.setdefault(path, {"wall": float("inf"), "cpu": 0.0, "bytes": got["bytes"]})
            seen["wall"] = min(seen["wall"], got["wall"])
            seen["cpu"] += got["cpu"] / args.rounds
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.validation", description=__doc__)
    p.add_argument("--records", type=int, default=1024, help="records per batch (default 1024)")
    p.add_argument("--size", type=int, default=KIB, help="bytes per record value (default 1024)")
    p.add_argument("--calls", type=int, default=100, help="calls per child process (default 100)")
    p.add_argument("--rounds", type=int, default=5, help="alternated rounds (default 5)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if compression.native is None:
        raise SystemExit("wire/_decompress_scan.c is not built: nothing to compare")
    if args.child:
        codec, path = args.child.split(",")
        print(json.dumps(child(int(codec), path, args.records, args.size, args.calls)))
        return
    print(f"validate_records of one batch of {args.records} x {args.size} B records, {args.rounds} alternated "
          f"rounds of {args.calls} calls, each path in a fresh process; libraries "
          f"{compression.native.LIBRARY_VERSIONS}")
    print("| codec | batch bytes | native: min µs, CPU µs per call | Python bindings: min µs, CPU µs per call "
          "| CPU Python / native |")
    print("| --- | --- | --- | --- | --- |")
    for codec in sorted(compression.native.CODECS):
        got = measure(codec, args)
        native, python = got["native"], got["python"]
        print(f"| {compression.CODEC_BY_CODE[codec]} | {native['bytes']:,} | {native['wall'] * 1e6:.0f}, "
              f"{native['cpu'] * 1e6:.0f} | {python['wall'] * 1e6:.0f}, {python['cpu'] * 1e6:.0f} | "
              f"{python['cpu'] / native['cpu']:.1f}x |")


if __name__ == "__main__":
    main()
