/* The record walk of a v2 batch's records, shared by the two record scanners of wire/batch_validation.py:
 * _batch_scan.c (records as they came) and _decompress_scan.c (records it has just decompressed).
 *
 * scan(data, end, count, base_timestamp) -> (error | None, timestamped, min_ts, max_ts, null_keys)
 *
 * Same checks, results and messages as batch_validation.scan_records_py (a test compares them on
 * generated and mutated batches). Every read is bounds-checked against the buffer length; record
 * data is never copied and no Python object is made per record.
 */
#ifndef LOGWAY_RECORD_SCAN_H
#define LOGWAY_RECORD_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define NO_TIMESTAMP (-1)

enum { VARINT_OK = 0, VARINT_TRUNCATED = 1, VARINT_TOO_LONG = 2 };

/* Kafka's ByteUtils.readVarint / readVarlong: at most max_bytes bytes, bits past the width dropped. */
static int read_varint(const uint8_t *data, Py_ssize_t end, Py_ssize_t *pos, int max_bytes, int bits, int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end)
            return VARINT_TRUNCATED;
        uint8_t byte = data[(*pos)++];
        if (shift < 64)
            raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            if (bits == 32) {
                uint32_t r = (uint32_t)raw;
                *out = (int64_t)(int32_t)((r >> 1) ^ (0u - (r & 1u)));
            } else {
                *out = (int64_t)((raw >> 1) ^ (0ull - (raw & 1ull)));
            }
            return VARINT_OK;
        }
        shift += 7;
    }
    return VARINT_TOO_LONG;
}

static PyObject *fail(PyObject *message)
{
    if (message == NULL)
        return NULL;
    return Py_BuildValue("(Niiii)", message, 0, 0, 0, 0);
}

#define READ(max_bytes, bits, target)                                                   \
    do {                                                                                \
        int rc_ = read_varint(data, end, &pos, (max_bytes), (bits), &(target));         \
        if (rc_ == VARINT_TRUNCATED)                                                    \
            return fail(PyUnicode_FromFormat("record %zd: record data ends inside a varint", i)); \
        if (rc_ == VARINT_TOO_LONG)                                                     \
            return fail(PyUnicode_FromFormat("record %zd: varint too long", i));        \
    } while (0)

static PyObject *scan(const uint8_t *data, Py_ssize_t end, long long count, long long base_timestamp)
{
    if (count < 0 || count > end)
        return fail(PyUnicode_FromFormat("%lld records cannot fit in %zd bytes of record data", count, end));
    Py_ssize_t pos = 0;
    long long timestamped = 0, null_keys = 0;
    int64_t low = 0, high = 0;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t length, delta, offset_delta, key_len, value_len, headers;
        READ(5, 32, length);
        if (length < 0 || length > end - pos)
            return fail(PyUnicode_FromFormat("record %zd: size %lld runs past the %zd bytes left", i,
                                             (long long)length, end - pos));
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes: unused in v2, not checked */
        READ(10, 64, delta);
        READ(5, 32, offset_delta);
        if (offset_delta != (int64_t)i)
            return fail(PyUnicode_FromFormat("record %zd: offset delta %lld, inner offsets must be consecutive", i,
                                             (long long)offset_delta));
        READ(5, 32, key_len);
        if (key_len < 0) {
            null_keys++;
        } else {
            pos += (Py_ssize_t)key_len;
            if (pos > rec_end)
                return fail(PyUnicode_FromFormat("record %zd: key runs past the record", i));
        }
        READ(5, 32, value_len);
        if (value_len >= 0) {
            pos += (Py_ssize_t)value_len;
            if (pos > rec_end)
                return fail(PyUnicode_FromFormat("record %zd: value runs past the record", i));
        }
        READ(5, 32, headers);
        if (headers < 0 || headers > rec_end - pos)
            return fail(PyUnicode_FromFormat("record %zd: invalid number of record headers %lld", i, (long long)headers));
        for (int64_t h = 0; h < headers; h++) {
            READ(5, 32, key_len);
            if (key_len < 0)
                return fail(PyUnicode_FromFormat("record %zd: invalid negative header key size %lld", i,
                                                 (long long)key_len));
            pos += (Py_ssize_t)key_len;
            if (pos > rec_end)
                return fail(PyUnicode_FromFormat("record %zd: header key runs past the record", i));
            READ(5, 32, value_len);
            if (value_len >= 0) {
                pos += (Py_ssize_t)value_len;
                if (pos > rec_end)
                    return fail(PyUnicode_FromFormat("record %zd: header value runs past the record", i));
            }
        }
        if (pos != rec_end)
            return fail(PyUnicode_FromFormat("record %zd: size %lld but its fields take %lld bytes", i,
                                             (long long)length, (long long)(length + pos - rec_end)));
        /* Java long arithmetic: base + delta wraps. */
        int64_t timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)delta);
        if (timestamp != NO_TIMESTAMP) {
            if (!timestamped) {
                low = high = timestamp;
            } else if (timestamp < low) {
                low = timestamp;
            } else if (timestamp > high) {
                high = timestamp;
            }
            timestamped++;
        }
    }
    if (pos != end)
        return fail(PyUnicode_FromFormat("%zd bytes left after the batch's %lld records", end - pos, count));
    return Py_BuildValue("(OLLLL)", Py_None, timestamped, (long long)low, (long long)high, null_keys);
}

#endif
