"""The encrypted record, as the record-encryption filter writes it and reads it back (sans-IO).

The layout follows Kroxylicious's record encryption (its ParcelV1 and WrapperV2), under a header of our own:

    record key      the plaintext key, or null when the key is encrypted (``encrypt.fields`` has key)
    record value    the wrapper:
                      cipher id (1 byte: 0 = AES-256-GCM, 96-bit IV, 128-bit tag)
                      EDEK length (unsigned varint), EDEK (the KMS's wrapped DEK, naming its KEK)
                      AAD id (1 byte: 0 = none)
                      IV (12 bytes)
                      the parcel, encrypted (its tag last)
    record headers  "logway.io/encryption" = 0x01 (the format version) first, then the plaintext headers, or
                    nothing else when the headers are encrypted

    parcel          value length (zig-zag varint, -1 null), value,
                    header count (zig-zag varint; -2: not in the parcel), each header: key length (unsigned
                    varint), key (UTF-8), value length (zig-zag varint, -1 null), value,
                    key length (zig-zag varint, -1 null; -2: not in the parcel), key

A record with a null value (a tombstone) is stored as it is, so compaction still works (Kroxylicious does the
same). Batches are rebuilt around their encrypted or decrypted records with their codec, producer fields,
offsets and timestamps kept and new CRCs (``wire.records.rebuild_batch``); control batches pass as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from cryptography.exceptions import InvalidTag

from logway.proxy.deks import Dek, Deks
from logway.wire.batch import CorruptBatch, validate_batch
from logway.wire.errors import MalformedRequest
from logway.wire.protocol import read_uvarint, write_uvarint
from logway.wire.records import DecodedBatch, Header, Record, decode_batch, rebuild_batch
from logway.wire.varint import encode_varint, read_varint

HEADER = "logway.io/encryption"
FORMAT = b"\x01"
_AES_256_GCM, _AAD_NONE = 0, 0
_IV, _TAG = 12, 16
_ABSENT = -2
_ENCRYPTED = (Header(HEADER, FORMAT),)
_NOT_IN_PARCEL = encode_varint(_ABSENT)
_NULL = encode_varint(-1)


class Fields(NamedTuple):
    """What is encrypted besides the value."""

    headers: bool = False
    key: bool = False


class Undecryptable(Exception):  # noqa: N818
    """An encrypted record that does not decrypt: damaged, or of a format this proxy does not know."""


# --- batches --------------------------------------------------------------------------------------------


def _batches(data: bytes, whole: bool) -> Iterator[tuple[int, int, DecodedBatch]]:
    """(start, end, batch) of each batch of a record set, decoded (CRC checked). ``whole``: every byte must be
    part of a whole batch (a Produce), else a trailing partial batch is dropped quietly (a Fetch cut at its
    max bytes, which clients skip too). CorruptBatch."""
    pos, end = 0, len(data)
    while pos < end:
        try:
            header = validate_batch(data, pos)
        except CorruptBatch:
            if not whole and _partial(data, pos):
                return
            raise
        yield pos, pos + header.size, decode_batch(data, pos)
        pos += header.size


def _partial(data: bytes, pos: int) -> bool:
    """Whether the bytes at ``pos`` are the start of a batch that runs past the end of ``data``."""
    left = len(data) - pos
    return left < 12 or int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12 > left


def encrypt_record_set(data: bytes, dek_for: Callable[[int], tuple[Dek, int]], fields: Fields) -> bytes:
    """A Produce partition's record set with every record that has a value encrypted; ``dek_for(n)`` gives the
    DEK for n records and their first IV counter. CorruptBatch (not whole v2 batches), KmsError."""
    out = []
    for start, end, batch in _batches(data, whole=True):
        if batch.header.is_control or not batch.records:
            out.append(data[start:end])
            continue
        dek, counter = dek_for(len(batch.records))
        prefix = bytes([_AES_256_GCM]) + write_uvarint(len(dek.edek)) + dek.edek + bytes([_AAD_NONE])
        records = [_encrypt(r, dek, prefix, counter + i, fields) for i, r in enumerate(batch.records)]
        out.append(_rebuilt(batch, records))
    return b"".join(out)


def decrypt_record_set(data: bytes, deks: Deks) -> tuple[bytes, Exception | None]:
    """A Fetch partition's record set with its encrypted records decrypted, up to the first batch that cannot
    be (its error returned with what came before it: the client reads those, then gets the error)."""
    out: list[bytes] = []
    try:
        for start, end, batch in _batches(data, whole=False):
            if batch.header.is_control:
                out.append(data[start:end])
                continue
            records = [_decrypt(r, deks) for r in batch.records]
            changed = any(new is not old for new, old in zip(records, batch.records, strict=True))
            out.append(_rebuilt(batch, records) if changed else data[start:end])
    except Exception as exc:  # noqa: BLE001 - UnknownKey, KmsError, Undecryptable, CorruptBatch: reported per partition
        return b"".join(out), exc
    return b"".join(out), None


def _rebuilt(batch: DecodedBatch, records: list[Record]) -> bytes:
    header = batch.header
    return rebuild_batch(header, records, base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp)


# --- records --------------------------------------------------------------------------------------------


def _encrypt(r: Record, dek: Dek, prefix: bytes, counter: int, fields: Fields) -> Record:
    if r.value is None:
        return r  # a tombstone: stored as it is
    iv = Dek.iv(counter)
    wrapper = prefix + iv + dek.aead.encrypt(iv, _parcel(r, fields), None)
    headers = _ENCRYPTED if fields.headers else _ENCRYPTED + r.headers
    return Record(r.offset, r.timestamp, None if fields.key else r.key, wrapper, headers)


def _parcel(r: Record, fields: Fields) -> bytes:
    parts = [encode_varint(len(r.value)), r.value]
    if fields.headers:
        parts.append(encode_varint(len(r.headers)))
        for h in r.headers:
            raw = h.key.encode()
            parts += [write_uvarint(len(raw)), raw]
            parts += [_NULL] if h.value is None else [encode_varint(len(h.value)), h.value]
    else:
        parts.append(_NOT_IN_PARCEL)
    if fields.key:
        parts += [_NULL] if r.key is None else [encode_varint(len(r.key)), r.key]
    else:
        parts.append(_NOT_IN_PARCEL)
    return b"".join(parts)


def _decrypt(r: Record, deks: Deks) -> Record:
    headers = r.headers
    if not headers or headers[0].key != HEADER:
        return r  # not encrypted (written before encryption was configured, or a tombstone)
    if headers[0].value != FORMAT:
        raise Undecryptable(f"encryption format {headers[0].value!r} is not known to this proxy")
    try:
        value = r.value
        if value[0] != _AES_256_GCM:
            raise Undecryptable(f"cipher {value[0]} is not known to this proxy")
        size, pos = read_uvarint(value, 1)
        edek, pos = value[pos : pos + size], pos + size
        if value[pos] != _AAD_NONE or len(value) < pos + 1 + _IV + _TAG:
            raise Undecryptable("wrapper damaged")
        iv, sealed = value[pos + 1 : pos + 1 + _IV], value[pos + 1 + _IV :]
    except (IndexError, TypeError, ValueError, MalformedRequest) as exc:  # TypeError: a null value
        raise Undecryptable(f"wrapper damaged: {exc}") from None
    try:
        parcel = deks.for_decryption(edek).decrypt(iv, sealed, None)
    except InvalidTag:
        raise Undecryptable("record does not decrypt (damaged, or not encrypted by its EDEK)") from None
    return _unparcel(r, parcel)


def _unparcel(r: Record, parcel: bytes) -> Record:
    try:
        size, pos = read_varint(parcel, 0)
        value, pos = (None, pos) if size < 0 else (parcel[pos : pos + size], pos + size)
        count, pos = read_varint(parcel, pos)
        headers = r.headers[1:]
        if count != _ABSENT:
            headers, pos = _parcel_headers(parcel, pos, count)
        size, pos = read_varint(parcel, pos)
        key = r.key if size == _ABSENT else None if size < 0 else parcel[pos : pos + size]
    except (IndexError, ValueError, UnicodeDecodeError, MalformedRequest) as exc:
        raise Undecryptable(f"parcel damaged: {exc}") from None
    return Record(r.offset, r.timestamp, key, value, headers)


def _parcel_headers(parcel: bytes, pos: int, count: int) -> tuple[tuple[Header, ...], int]:
    headers = []
    for _ in range(count):
        size, pos = read_uvarint(parcel, pos)
        key, pos = parcel[pos : pos + size].decode(), pos + size
        size, pos = read_varint(parcel, pos)
        value, pos = (None, pos) if size < 0 else (parcel[pos : pos + size], pos + size)
        headers.append(Header(key, value))
    return tuple(headers), pos
