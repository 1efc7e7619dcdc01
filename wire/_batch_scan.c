/* The record walk of wire/batch_validation.py in C: one pass over a v2 batch's records.
 *
 * scan_records(data, count, base_timestamp) -> (error | None, timestamped, min_ts, max_ts, null_keys)
 *
 * Same checks, results and messages as batch_validation.scan_records_py (a test compares them on
 * generated and mutated batches). Every read is bounds-checked against the buffer length; record
 * data is never copied and no Python object is made per record.
 */
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

static PyObject *scan_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    long long count, base_timestamp;
    if (!PyArg_ParseTuple(args, "y*LL", &view, &count, &base_timestamp))
        return NULL;
    PyObject *result = scan((const uint8_t *)view.buf, view.len, count, base_timestamp);
    PyBuffer_Release(&view);
    return result;
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static int32_t be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int16_t be16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

#define BATCH_HEADER_SIZE 61
#define LOG_OVERHEAD 12

/* The produce hot path's one call per batch: the header and every record of an uncompressed v2 batch at pos.
 * Returns ((13 header fields, as batch.BatchHeader), timestamped, min_ts, max_ts, null_keys) when the batch is
 * well framed (magic 2, lengths within the buffer, lastOffsetDelta and recordsCount not negative), uncompressed,
 * and its records scan without an error; otherwise None, and the caller takes the general path, which finds and
 * names the problem (so every error message stays in one place). The CRC is not checked here. */
static PyObject *check_batch(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "y*n", &view, &pos))
        return NULL;
    PyObject *result = NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    if (pos < 0 || view.len - pos < BATCH_HEADER_SIZE || b[pos + 16] != 2)
        goto general;
    const uint8_t *h = b + pos;
    int32_t batch_length = be32(h + 8);
    int16_t attributes = be16(h + 21);
    int32_t last_offset_delta = be32(h + 23);
    int64_t base_timestamp = be64(h + 27);
    int32_t records_count = be32(h + 57);
    if (batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD || (Py_ssize_t)batch_length + LOG_OVERHEAD > view.len - pos
        || last_offset_delta < 0 || records_count < 0 || (attributes & 0x07) != 0)
        goto general;
    const uint8_t *data = h + BATCH_HEADER_SIZE;
    Py_ssize_t data_len = (Py_ssize_t)batch_length + LOG_OVERHEAD - BATCH_HEADER_SIZE;
    PyObject *scanned = scan(data, data_len, records_count, base_timestamp);
    if (scanned == NULL)
        goto done;
    if (PyTuple_GET_ITEM(scanned, 0) != Py_None) {
        Py_DECREF(scanned);
        goto general;
    }
    uint32_t crc = ((uint32_t)h[17] << 24) | ((uint32_t)h[18] << 16) | ((uint32_t)h[19] << 8) | (uint32_t)h[20];
    result = Py_BuildValue("((LiibkhiLLLhii)OOOO)", (long long)be64(h), batch_length, be32(h + 12), (int)h[16],
                           (unsigned long)crc, attributes, last_offset_delta, (long long)base_timestamp,
                           (long long)be64(h + 35), (long long)be64(h + 43), be16(h + 51), be32(h + 53), records_count,
                           PyTuple_GET_ITEM(scanned, 1), PyTuple_GET_ITEM(scanned, 2), PyTuple_GET_ITEM(scanned, 3),
                           PyTuple_GET_ITEM(scanned, 4));
    Py_DECREF(scanned);
    goto done;
general:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     "scan_records(data, count, base_timestamp) -> (error | None, timestamped, min_ts, max_ts, null_keys)"},
    {"check_batch", check_batch, METH_VARARGS,
     "check_batch(buf, pos) -> ((header fields), timestamped, min_ts, max_ts, null_keys) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_batch_scan", "Record walk of a v2 batch (see wire/batch_validation.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__batch_scan(void)
{
    return PyModule_Create(&module);
}
