"""Producer ids for InitProducerId, unique across restarts (even SIGKILL) by persisting block reservations."""

from __future__ import annotations

import os
from pathlib import Path

from logway.storage.checkpoints import write_atomically

__all__ = ["ProducerIdManager"]

BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from blocks of ``block_size``; a block is reserved on disk before any id from it is used.

    The file holds the start of the next unreserved block. After a crash the unused rest of the current
    block is skipped, never reissued, as with Kafka's ProducerIdManager blocks.
    """

    def __init__(self, path: str | os.PathLike[str], block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(path)
        self._block_size = block_size
        self._next = 0
        self._block_end = 0  # nothing reserved yet in this process

    def _read_next_block_start(self) -> int:
        try:
            text = self._path.read_text().strip()
        except FileNotFoundError:
            return 0
        if not text:
            # An empty file can only come from a torn first write (we replace atomically), before any id
            # was handed out: start at 0.
            return 0
        return int(text)

    def _reserve_block(self) -> None:
        start = self._read_next_block_start()
        end = start + self._block_size
        write_atomically(self._path, f"{end}\n")
        self._next, self._block_end = start, end

    def next_producer_id(self) -> int:
        """A producer id never handed out before by any process using this file."""
        if self._next >= self._block_end:
            self._reserve_block()
        pid = self._next
        self._next += 1
        return pid
