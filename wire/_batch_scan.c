/* The record scanner of wire/batch_validation.py for records as they came (uncompressed batches).
 *
 * scan_records(data, count, base_timestamp) -> (error | None, timestamped, min_ts, max_ts, null_keys)
 * check_batch(buf, pos) -> ((header fields), timestamped, min_ts, max_ts, null_keys) | None
 *
 * The walk itself is _record_scan.h's, shared with _decompress_scan.c.
 */
#include "_record_scan.h"

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
