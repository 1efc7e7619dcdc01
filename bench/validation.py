"""`python -m bench.validation`: what checking one compressed batch's records costs, in process (seconds, no broker).

One v2 batch of 1 KiB records (1 MiB of records by default; values half random, half zeros, as the produce load's)
per codec, through `wire.batch_validation.validate_records` as the append path calls it: with the native
decompression (`wire/_decompress_scan.c`) and with the Python bindings decompressing (`compression.native` set
aside: the path of an install without it, and the path every codec took before it), the minimum of N calls each,
and the ratio. The two are measured in alternated rounds, so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import os
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


def measure(codec: int, raw: bytes, calls: int, rounds: int) -> tuple[float, float]:
    """(native, python) seconds for one validation of ``raw``: the minimum over alternated rounds of ``calls``."""
    header = parse_header(raw)
    native_module = compression.native
    best = {"native": float("inf"), "python": float("inf")}
    for _ in range(rounds):
        for path in ("native", "python"):
            compression.native = native_module if path == "native" else None
            try:
                best[path] = min(best[path], best_of(lambda: validate_records(raw, 0, header), calls))
            finally:
                compression.native = native_module
    return best["native"], best["python"]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.validation", description=__doc__)
    p.add_argument("--records", type=int, default=1024, help="records per batch (default 1024)")
    p.add_argument("--size", type=int, default=KIB, help="bytes per record value (default 1024)")
    p.add_argument("--calls", type=int, default=100, help="calls per round (default 100)")
    p.add_argument("--rounds", type=int, default=5, help="alternated rounds (default 5)")
    args = p.parse_args(argv)
    if compression.native is None:
        raise SystemExit("wire/_decompress_scan.c is not built: nothing to compare")
    print(f"validate_records of one batch of {args.records} x {args.size} B records, min of "
          f"{args.calls * args.rounds} calls; libraries {compression.native.LIBRARY_VERSIONS}")
    print("| codec | batch bytes | native µs | Python bindings µs | Python / native |")
    print("| --- | --- | --- | --- | --- |")
    for codec in sorted(compression.native.CODECS):
        raw = batch(codec, args.records, args.size)
        native, python = measure(codec, raw, args.calls, args.rounds)
        print(f"| {compression.CODEC_BY_CODE[codec]} | {len(raw):,} | {native * 1e6:.0f} | {python * 1e6:.0f} | "
              f"{python / native:.1f}x |")


if __name__ == "__main__":
    main()
