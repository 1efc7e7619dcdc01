"""The broker process of the power-loss test: ``logway serve`` with storage.fs recorded (crash_fs.Recorder).

Run as ``python broker_child.py serve --log-dirs DIR ...``. LOGWAY_CRASH_WORK is where the journal and the stash
go. The crash point is armed by SIGUSR1: the power goes out (SIGKILL) before the LOGWAY_CRASH_AFTER-th file
operation under the log dir from then on, so the test can first read what the previous power loss left.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from crash_fs import Recorder  # noqa: E402

from logway.cli.main import main  # noqa: E402


def run() -> int:
    args = sys.argv[1:]
    data = Path(args[args.index("--log-dirs") + 1])
    data.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(data, Path(os.environ["LOGWAY_CRASH_WORK"])).install()
    after = int(os.environ["LOGWAY_CRASH_AFTER"])

    def arm(_signum, _frame) -> None:
        recorder.crash_at = recorder.operations + after

    signal.signal(signal.SIGUSR1, arm)
    return main(args)


if __name__ == "__main__":
    sys.exit(run())
