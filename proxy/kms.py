"""Key management for the record-encryption filter: the KMS plug-in interface and the file-backed KMS.

Envelope encryption (Kroxylicious's record encryption): records are encrypted with a data-encryption key (DEK),
and the DEK, wrapped by a key-encryption key (KEK) that never leaves the KMS, is stored with them (the EDEK).
A KMS plug-in (``Kms``) resolves a KEK alias to the KEK in use, makes DEK pairs under a KEK and unwraps EDEKs;
it is registered by name with ``kms_type`` and configured with the filter's ``kms.<name>.*`` keys
(``proxy.filter.enc.kms=file``, ``proxy.filter.enc.kms.file.path=...``). Its calls run on the proxy's event
loop, rarely (a DEK is made per topic per rotation, an EDEK unwrapped once into the filter's cache), so a
plug-in keeps them short; one that must wait on the network caches what it can.

The file KMS (``FileKms``) keeps its KEKs in a keyring file, JSON, created on first use with mode 0600 (its
folder 0700): per alias a list of KEKs, the last one in use, the older ones kept so that what they wrapped still
decrypts. A KEK unknown to an alias is made when first asked for. ``logway kms rotate`` appends a new KEK to
an alias (or to every alias); a running proxy re-reads the file when it changes (checked at most once a
second), so new DEKs are wrapped by the new KEK while old records still read. Losing a KEK (the file, or an
entry of it) makes what it wrapped unreadable: the filter answers those partitions with an error. The keyring
holds KEKs in the clear: keep it off the upstream's machines, and prefer a real KMS plug-in in production.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from logway.server.config import ConfigError

log = logging.getLogger(__name__)

DEK_BYTES = 32  # AES-256
_NONCE = 12
_EDEK_AAD = b"logway-edek-1:"
_RELOAD_EVERY = 1.0  # seconds between checks of the keyring file for changes


class KmsError(Exception):
    """The KMS cannot do what was asked (unreachable, unreadable keyring): the operation may work later."""


class UnknownKey(KmsError):  # noqa: N818 - Kroxylicious's UnknownKeyException
    """An EDEK's KEK is not in the KMS (deleted, lost): what it wrapped cannot be decrypted."""


@dataclass(frozen=True)
class DekPair:
    """A new data-encryption key and the same key wrapped by a KEK (stored with the records it encrypts)."""

    kek_id: str
    dek: bytes
    edek: bytes


class Kms(Protocol):
    """What the record-encryption filter asks of a KMS."""

    def resolve_alias(self, alias: str) -> str:
        """The id of the KEK ``alias`` names now (a rotation changes it). KmsError if there is none."""

    def generate_dek_pair(self, kek_id: str) -> DekPair:
        """A new random DEK and its EDEK under KEK ``kek_id``."""

    def decrypt_edek(self, edek: bytes) -> bytes:
        """The DEK wrapped in ``edek``. UnknownKey if its KEK is not in the KMS, KmsError if it is damaged."""


KmsBuilder = Callable[[Callable[[str], str], str], Kms]
"""A KMS type: built from a getter of its own settings (``kms.<type>.<key>``, "" if unset) and the state dir."""
_KMS_TYPES: dict[str, KmsBuilder] = {}


def kms_type(name: str):
    """Register the decorated builder as KMS type ``name`` (``proxy.filter.<name>.kms=<name>``)."""
    def register(build: KmsBuilder) -> KmsBuilder:
        _KMS_TYPES[name] = build
        return build
    return register


def build_kms(name: str, setting: Callable[[str], str], state_dir: str) -> Kms:
    """The KMS of type ``name``; ConfigError if there is no such type."""
    if name not in _KMS_TYPES:
        raise ConfigError(f"kms={name!r}: expected one of {', '.join(sorted(_KMS_TYPES))}")
    return _KMS_TYPES[name](setting, state_dir)


# --- the file KMS -----------------------------------------------------------------------------------------


def _edek(kek_id: str, kek: bytes, dek: bytes) -> bytes:
    """kek id length (1 byte), kek id (ASCII), nonce, AES-GCM of the DEK under the KEK (the id authenticated)."""
    raw_id = kek_id.encode()
    nonce = secrets.token_bytes(_NONCE)
    return bytes([len(raw_id)]) + raw_id + nonce + AESGCM(kek).encrypt(nonce, dek, _EDEK_AAD + raw_id)


def edek_kek_id(edek: bytes) -> str:
    """The id of the KEK that wrapped a file KMS EDEK ("" if it is not one)."""
    if not edek or len(edek) < 1 + edek[0]:
        return ""
    return edek[1 : 1 + edek[0]].decode("ascii", "replace")


class FileKms:
    """KEKs in a keyring file (see the module doc); one instance per filter, shared by its connections."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self._aliases: dict[str, list[str]] = {}  # alias -> its KEK ids, oldest first
        self._keks: dict[str, bytes] = {}  # KEK id -> key
        self._stamp: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._reload(force=True)

    # --- Kms ----------------------------------------------------------------------------------------------

    def resolve_alias(self, alias: str) -> str:
        self._reload()
        ids = self._aliases.get(alias)
        if not ids:
            with self._locked():
                self._reload(force=True)
                if not self._aliases.get(alias):
                    self._commit([alias])
            ids = self._aliases[alias]
        return ids[-1]

    def generate_dek_pair(self, kek_id: str) -> DekPair:
        kek = self._keks.get(kek_id)
        if kek is None:
            raise UnknownKey(f"KEK {kek_id} is not in the keyring {self.path}")
        dek = secrets.token_bytes(DEK_BYTES)
        return DekPair(kek_id, dek, _edek(kek_id, kek, dek))

    def decrypt_edek(self, edek: bytes) -> bytes:
        kek_id = edek_kek_id(edek)
        kek = self._keks.get(kek_id)
        if kek is None:
            self._reload()  # rotated or restored since: look again (at most once a second)
            kek = self._keks.get(kek_id)
        if kek is None:
            raise UnknownKey(f"KEK {kek_id or '?'} is not in the keyring {self.path}")
        start = 1 + len(kek_id)
        nonce, wrapped = edek[start : start + _NONCE], edek[start + _NONCE :]
        try:
            return AESGCM(kek).decrypt(nonce, wrapped, _EDEK_AAD + kek_id.encode())
        except (InvalidTag, ValueError) as exc:
            raise KmsError(f"EDEK of KEK {kek_id} does not unwrap: damaged ({exc.__class__.__name__})") from None

    # --- rotation (logway kms rotate) ----------------------------------------------------------------------

    def rotate(self, alias: str | None = None) -> list[str]:
        """Give ``alias`` (every alias when None) a new KEK; the new KEK ids."""
        with self._locked():
            self._reload(force=True)
            return self._commit([alias] if alias is not None else sorted(self._aliases))

    def aliases(self) -> dict[str, list[str]]:
        """Every alias with its KEK ids, oldest first."""
        self._reload(force=True)
        return {alias: list(ids) for alias, ids in self._aliases.items()}

    # --- the file ------------------------------------------------------------------------------------------

    def _commit(self, aliases: list[str]) -> list[str]:
        """A new KEK for each of ``aliases``, written; on failure the keyring as it was on disk (a KEK is never
        used before it is stored)."""
        made = [self._add_kek(alias) for alias in aliases]
        try:
            self._write()
        except OSError as exc:
            self._aliases, self._keks = self._parse(self.path.read_bytes()) if self.path.exists() else ({}, {})
            raise KmsError(f"keyring {self.path}: cannot write: {exc.strerror or exc}") from None
        for alias, kek_id in zip(aliases, made, strict=True):
            log.info("keyring %s: KEK %s in use for %r", self.path, kek_id, alias)
        return made

    def _add_kek(self, alias: str) -> str:
        kek_id = secrets.token_hex(8)
        self._keks[kek_id] = secrets.token_bytes(DEK_BYTES)
        self._aliases.setdefault(alias, []).append(kek_id)
        return kek_id

    def _reload(self, force: bool = False) -> None:
        """Read the keyring again if it changed (checked at most once a second unless ``force``)."""
        now = self.clock()
        if not force and now - self._checked < _RELOAD_EVERY:
            return
        self._checked = now
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._aliases, self._keks, self._stamp = {}, {}, None
            return
        except OSError as exc:
            raise KmsError(f"keyring {self.path}: {exc.strerror or exc}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._aliases, self._keks = self._parse(self.path.read_bytes())
            self._stamp = stamp
            if st.st_mode & 0o077:
                log.warning("keyring %s is readable by others (mode %o): chmod 600 it", self.path, st.st_mode & 0o777)

    def _parse(self, raw: bytes) -> tuple[dict[str, list[str]], dict[str, bytes]]:
        try:
            doc = json.loads(raw)
            aliases, keks = {}, {}
            for alias, entries in doc["keks"].items():
                aliases[alias] = [e["id"] for e in entries]
                for e in entries:
                    keks[e["id"]] = base64.b64decode(e["key"], validate=True)
                    if len(keks[e["id"]]) != DEK_BYTES:
                        raise ValueError(f"KEK {e['id']} is not {DEK_BYTES} bytes")
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
            raise KmsError(f"keyring {self.path} is damaged: {exc}") from None
        return aliases, keks

    def _write(self) -> None:
        """The keyring written whole to a new file (0600) renamed over the old one, synced."""
        doc = {"version": 1, "keks": {alias: [{"id": i, "key": base64.b64encode(self._keks[i]).decode()}
                                              for i in ids] for alias, ids in self._aliases.items()}}
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._checked = float("-inf")  # our own write is read back at the next look

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock on the keyring's lock file (proxies and ``logway kms`` sharing one keyring)."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise KmsError(f"keyring {self.path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


@kms_type("file")
def _file_kms(setting: Callable[[str], str], state_dir: str) -> Kms:
    path = setting("path") or os.path.join(state_dir, "record-encryption.keyring")
    try:
        return FileKms(Path(path))
    except KmsError as exc:
        raise ConfigError(f"kms.file.path={path}: {exc}") from None
