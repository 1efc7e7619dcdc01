"""The encrypted record format, the DEKs and the file KMS (proxy/envelope.py, proxy/deks.py, proxy/kms.py),
sans-IO but for the keyring file: records come back as they were, bytes for bytes; what cannot be decrypted
says so; a rotation and a lost KEK behave as the README says."""

from __future__ import annotations

import json

import pytest

from logway.proxy.deks import Deks
from logway.proxy.envelope import HEADER, Fields, Undecryptable, decrypt_record_set, encrypt_record_set
from logway.proxy.filter_config import FilterSettings
from logway.proxy.filters.base import ClientInfo
from logway.proxy.filters.record_encryption import KEYS, build
from logway.proxy.frames import encode_request, read_request_header
from logway.proxy.kms import FileKms, UnknownKey
from logway.wire import compression as codecs
from logway.wire.batch import CorruptBatch
from logway.wire.protocol import RequestHeader, request_type
from logway.wire.protocol import build as build_message
from logway.wire.records import build_batch, decode_batches

RECORDS = [(b"k1", b"secret-one", [("h", b"hv"), ("n", None)]), (None, None, []), (b"k3", b"", []),
           (None, b"secret-four" * 50, [])]


def _batch(codec: int = codecs.NONE, **fields) -> bytes:
    return build_batch(RECORDS, compression=codec, producer_id=7, producer_epoch=0, base_sequence=3,
                       base_timestamp=1_700_000_000_000, **fields)


def _deks(tmp_path, **kwargs) -> Deks:
    return Deks(FileKms(tmp_path / "keyring"), kwargs.pop("max_age", 3600), kwargs.pop("max_records", 1000), **kwargs)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
@pytest.mark.parametrize("fields", [Fields(), Fields(headers=True), Fields(headers=True, key=True)])
def test_a_batch_decrypts_to_the_same_bytes(tmp_path, codec, fields):
    deks = _deks(tmp_path)
    plain = _batch(codec)
    sealed = encrypt_record_set(plain + plain, lambda n: deks.for_encryption("t", n), fields)
    (stored, _) = list(decode_batches(sealed))
    assert stored.header.compression == codec and stored.header.base_sequence == 3
    assert not any(b"secret" in (r.value or b"") for r in stored.records)
    assert [r.key for r in stored.records] == ([None, None, None, None] if fields.key else [b"k1", None, b"k3", None])
    assert stored.records[1].value is None and stored.records[1].headers == ()  # a tombstone is kept as it is
    assert all(r.headers[0].key == HEADER for r in stored.records if r.value is not None)
    opened, error = decrypt_record_set(sealed, deks)
    assert error is None and opened == plain + plain  # CRCs and all
    assert decrypt_record_set(sealed, _deks(tmp_path))[0] == plain + plain  # a new proxy: the KMS unwraps the DEK


def test_ivs_never_repeat_and_deks_rotate_by_count_and_age(tmp_path):
    now = [0.0]
    deks = _deks(tmp_path, max_records=5, max_age=60, clock=lambda: now[0])
    first, c1 = deks.for_encryption("t", 3)
    same, c2 = deks.for_encryption("t", 2)
    assert same is first and c2 == c1 + 3
    rotated, _ = deks.for_encryption("t", 1)  # 6 > 5 records
    assert rotated is not first and rotated.kek_id == first.kek_id
    now[0] = 61
    assert deks.for_encryption("t", 1)[0] is not rotated


def test_a_rotated_kek_wraps_new_deks_and_old_records_still_read(tmp_path):
    kms = FileKms(tmp_path / "keyring")
    deks = Deks(kms, 3600, 1000)
    old = encrypt_record_set(_batch(), lambda n: deks.for_encryption("t", n), Fields())
    (new_kek,) = FileKms(tmp_path / "keyring").rotate("t")  # as `logway kms rotate` does, from another process
    kms._checked = float("-inf")  # (the proxy looks again within a second)
    dek, _ = deks.for_encryption("t", 1)
    assert dek.kek_id == new_kek
    fresh = _deks(tmp_path)
    assert decrypt_record_set(old, fresh) == (_batch(), None)
    assert (tmp_path / "keyring").stat().st_mode & 0o777 == 0o600


def test_a_lost_kek_or_damaged_record_is_an_error_after_the_records_before_it(tmp_path):
    deks = _deks(tmp_path)
    sealed = encrypt_record_set(_batch(), lambda n: deks.for_encryption("t", n), Fields())
    doc = json.loads((tmp_path / "keyring").read_text())
    doc["keks"] = {}
    (tmp_path / "other").write_text(json.dumps(doc))
    opened, error = decrypt_record_set(_batch() + sealed, Deks(FileKms(tmp_path / "other"), 3600, 1000))
    assert opened == _batch() and isinstance(error, UnknownKey)  # a plaintext batch before it reads
    damaged = bytearray(sealed)
    damaged[-5] ^= 1  # inside the last record's ciphertext (the batch CRC no longer matches either)
    assert isinstance(decrypt_record_set(bytes(damaged), deks)[1], CorruptBatch)
    cut = sealed[: len(sealed) // 2]
    assert decrypt_record_set(sealed + cut, deks) == (_batch(), None)  # a Fetch cut short: the tail is dropped


def test_a_wrapper_that_does_not_decrypt_is_undecryptable(tmp_path):
    deks = _deks(tmp_path)
    other = encrypt_record_set(_batch(), lambda n: deks.for_encryption("t", n), Fields())
    bad = build_batch([(b"k", b"\x00\x02ab\x00" + bytes(40), [(HEADER, b"\x01")])])
    assert isinstance(decrypt_record_set(bad, deks)[1], (Undecryptable, UnknownKey))
    assert decrypt_record_set(other, deks)[1] is None


def test_a_produce_record_set_that_is_not_whole_batches_is_refused(tmp_path):
    deks = _deks(tmp_path)
    with pytest.raises(CorruptBatch):
        encrypt_record_set(_batch()[:-3], lambda n: deks.for_encryption("t", n), Fields())


def _produce_frame(topic: str) -> tuple[memoryview, int]:
    body = build_message(request_type(0, 9), {"acks": -1, "timeout": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": _batch()}]}]})
    frame = memoryview(bytearray(encode_request(RequestHeader(0, 9, 1, "c"), body)))
    return frame, read_request_header(frame)[1]


def test_only_produce_requests_naming_a_matching_topic_are_decoded(tmp_path):
    settings = FilterSettings("enc", "record-encryption", {**KEYS, "topics": "enc-.*"}, str(tmp_path))
    tenant = build(settings)(ClientInfo(topic_prefix="t."))
    assert tenant.wants_request(0, 9, *_produce_frame("enc-a"))  # the client's own names
    assert not tenant.wants_request(0, 9, *_produce_frame("other"))
    assert tenant._named("t.enc-a") and not tenant._named("enc-a")  # decoded: the upstream's names
