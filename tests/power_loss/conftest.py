"""The power-loss tests: storage.fs recorded, a power loss rebuilt from what was fsynced (crash_fs.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# The suite runs with --import-mode=importlib, which puts no test folder on sys.path: the tests import crash_fs
# from here and the batch builder from tests/storage.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "storage"))
