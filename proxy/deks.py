"""Data-encryption keys for the record-encryption filter (sans-IO but for the KMS calls, made rarely).

Encrypting: one DEK per KEK alias (per topic with the default ``kek.template``), used until it is older than
``dek.max.age.ms``, has encrypted ``dek.max.records`` records, or its alias names another KEK (a rotation), as
Kroxylicious's encryptionDekExpireAfterWriteSeconds and maxEncryptionsPerDek. AES-GCM's 96-bit IVs come from a
counter started at a random value per DEK (Kroxylicious's Wrapping96BitCounter): unique for as many records as
one DEK may encrypt. Decrypting: DEKs unwrapped by the KMS are cached by EDEK (least recently used first out),
so a batch costs one KMS call at most, and a whole topic one per DEK.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from logway.proxy.kms import Kms

_IV_SPACE = 1 << 96


@dataclass
class Dek:
    """A DEK in use for encrypting: its EDEK (stored with each record), its cipher and its use so far."""

    kek_id: str
    edek: bytes
    aead: AESGCM
    created: float
    used: int = 0
    _iv: int = field(default_factory=lambda: secrets.randbelow(_IV_SPACE))

    def reserve(self, records: int) -> int:
        """Take ``records`` uses; the first IV counter value of them (see ``iv``)."""
        first = self._iv + self.used
        self.used += records
        return first

    @staticmethod
    def iv(counter: int) -> bytes:
        return (counter % _IV_SPACE).to_bytes(12, "big")


class Deks:
    """The DEKs of one filter (shared by its connections): per alias for encrypting, per EDEK for decrypting."""

    def __init__(self, kms: Kms, max_age: float, max_records: int, cache_size: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kms = kms
        self.max_age = max_age
        self.max_records = max_records
        self.cache_size = cache_size
        self.clock = clock
        self._current: dict[str, Dek] = {}
        self._unwrapped: OrderedDict[bytes, AESGCM] = OrderedDict()

    def for_encryption(self, alias: str, records: int) -> tuple[Dek, int]:
        """The DEK to encrypt ``records`` records of ``alias`` with, and their first IV counter. KmsError."""
        kek_id = self.kms.resolve_alias(alias)
        dek, now = self._current.get(alias), self.clock()
        if (dek is None or dek.kek_id != kek_id or now - dek.created >= self.max_age
                or dek.used and dek.used + records > self.max_records):
            pair = self.kms.generate_dek_pair(kek_id)
            dek = self._current[alias] = Dek(kek_id, pair.edek, AESGCM(pair.dek), now)
            self._remember(pair.edek, dek.aead)
        return dek, dek.reserve(records)

    def for_decryption(self, edek: bytes) -> AESGCM:
        """The cipher of the DEK wrapped in ``edek`` (the KMS asked once per EDEK while cached). UnknownKey,
        KmsError."""
        aead = self._unwrapped.get(edek)
        if aead is None:
            aead = AESGCM(self.kms.decrypt_edek(edek))
            self._remember(edek, aead)
        else:
            self._unwrapped.move_to_end(edek)
        return aead

    def _remember(self, edek: bytes, aead: AESGCM) -> None:
        self._unwrapped[edek] = aead
        while len(self._unwrapped) > self.cache_size:
            self._unwrapped.popitem(last=False)
