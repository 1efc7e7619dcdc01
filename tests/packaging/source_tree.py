"""A private copy of the source tree to build a wheel or an sdist from.

setuptools writes ``build/`` and ``*.egg-info`` into the tree it builds; two builds of the same tree at once (the
image tests' wheelhouses and the packaging test, on different `make test` workers) break each other. Each build
takes its own copy: the files git tracks plus the untracked ones it does not ignore, as in the working tree.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_source(dest: Path) -> Path:
    """The tree's source files copied under ``dest`` (its build input): ``dest``."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # (a file deleted in the working tree but still in the index is skipped)
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest
