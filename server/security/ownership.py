"""Who owns a piece of state a client can name by an id it was given (a fetch session, a producer id): the
principal (and listener) it was given to, kept for a bounded number of ids, least recently used first out.

An id is granted to the client that was handed it. An id nobody holds here (issued before a restart, or
forgotten to keep the map bounded) is claimed by the first client that uses it: trust on first use, so a
restart does not turn away every producer and consumer, and a client that was not handed an id can take it only
before its owner uses it again (ids come from `secrets` where Logway issues them, so they cannot be guessed).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

Owner = tuple[str, str]  # (listener, principal)


class Owners:
    """id -> owner for at most ``capacity`` ids."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._owners: OrderedDict[Hashable, Owner] = OrderedDict()

    def grant(self, key: Hashable, owner: Owner) -> None:
        """``key`` was handed to ``owner`` (whoever held it before no longer does)."""
        self._owners[key] = owner
        self._owners.move_to_end(key)
        if len(self._owners) > self.capacity:
            self._owners.popitem(last=False)

    def claim(self, key: Hashable, owner: Owner) -> bool:
        """May ``owner`` use ``key``? Yes if it holds it, or if nobody does (then it holds it from now on)."""
        held = self._owners.get(key)
        if held is None:
            self.grant(key, owner)
            return True
        if held != owner:
            return False
        self._owners.move_to_end(key)
        return True

    def holds(self, key: Hashable, owner: Owner) -> bool:
        """Whether ``owner`` holds ``key`` (no claim made)."""
        return self._owners.get(key) == owner

    def __len__(self) -> int:
        return len(self._owners)
