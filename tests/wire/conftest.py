"""The suite runs with --import-mode=importlib (no test folder on sys.path): put this one there, so the
wire tests, and the gateway's request fuzz test, can import kio_values.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
