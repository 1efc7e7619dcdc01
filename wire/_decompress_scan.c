/* Validation of a compressed v2 batch's records in one native pass (wire/batch_validation.py's scan_compressed):
 * decompress into a buffer reused by every call, then walk the records there (_record_scan.h).
 *
 * decompress_scan(codec, data, count, base_timestamp, max_size)
 *     -> (error | None, timestamped, min_ts, max_ts, null_keys)
 * decompress(codec, data, max_size) -> bytes
 *
 * gzip, lz4 and zstd, decoded with the library calls the Python fallback makes through its bindings
 * (wire/compression.py: zlib's inflate, LZ4F_decompress, ZSTD_decompressStream), so both accept and refuse the
 * same bytes; snappy (Kafka's xerial framing, or one raw block) with libsnappy's C API when libsnappy.so.1 can be
 * loaded at import (dlopen: it is not linked, so a machine without it, such as the slim Python images, still
 * gets the other three; python-snappy decodes with cramjam's Rust snappy, and the tests compare the two).
 * Raises DecompressError for data the codec cannot decode and TooLarge (a DecompressError) for data that expands
 * past max_size bytes: a hostile batch can make this allocate max_size + 1 bytes, never more. Kafka streams the
 * records instead (DefaultRecordBatch.skipKeyValueIterator), so it has no such bound.
 *
 * The buffer and the decoders are module state: the GIL is held for the whole call, so one call uses them at a
 * time. The buffer grows by doubling and is kept between calls while it holds at most RETAINED_MAX bytes (a
 * reused buffer costs no page faults, which are most of what a fresh 1 MiB allocation per batch costs).
 */
#include "_record_scan.h"

#include <dlfcn.h>
#include <lz4.h>
#include <lz4frame.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_stableOutBuffer: decode into our buffer, not through a window copy */
#include <zstd.h>
#include <zstd_errors.h>

/* Kafka's CompressionType ids. */
enum { GZIP = 1, SNAPPY = 2, LZ4 = 3, ZSTD = 4 };

/* libsnappy's C API (snappy-c.h), looked up at import. */
typedef int (*snappy_uncompress_t)(const char *compressed, size_t compressed_length, char *uncompressed,
                                   size_t *uncompressed_length);
static snappy_uncompress_t snappy_uncompress_fn;

#define INITIAL_CAPACITY ((size_t)256 << 10)
#define RETAINED_MAX ((size_t)8 << 20)

static PyObject *DecompressError, *TooLarge;
static uint8_t *buffer;
static size_t capacity;
static LZ4F_dctx *lz4_dctx;
static ZSTD_DCtx *zstd_dctx;
static z_stream inflater;
static int inflater_ready;

/* Grow the buffer to hold at least `wanted` bytes, never more than `limit` (wanted <= limit); by doubling, so a
 * run of batches settles on one size. 0, or -1 with MemoryError set. realloc keeps what the buffer holds. */
static int reserve(size_t wanted, size_t limit)
{
    if (wanted <= capacity)
        return 0;
    size_t size = capacity ? capacity : INITIAL_CAPACITY;
    while (size < wanted && size < limit)
        size *= 2;
    if (size > limit)
        size = limit;
    uint8_t *grown = PyMem_RawRealloc(buffer, size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buffer = grown;
    capacity = size;
    return 0;
}

static int corrupt(const char *message, const char *detail)
{
    if (detail == NULL)
        PyErr_SetString(DecompressError, message);
    else
        PyErr_Format(DecompressError, "%s: %s", message, detail);
    return -1;
}

static int too_large(const char *codec, size_t max_size)
{
    PyErr_Format(TooLarge, "%s data expands past %zu bytes", codec, max_size);
    return -1;
}

/* The buffer is full: grow it, or -1 with TooLarge set when it already holds max_size + 1 bytes (or MemoryError). */
static int grow(size_t max_size, const char *codec)
{
    if (capacity > max_size)
        return too_large(codec, max_size);
    return reserve(capacity + 1, max_size + 1);
}

/* One LZ4 frame (Kafka's KafkaLZ4BlockOutputStream writes one); bytes after its end mark are ignored, as
 * Kafka's KafkaLZ4BlockInputStream and python-lz4 do. */
static int lz4_decompress(const uint8_t *src, size_t len, size_t max_size, size_t *produced)
{
    if (lz4_dctx == NULL) {
        if (LZ4F_isError(LZ4F_createDecompressionContext(&lz4_dctx, LZ4F_VERSION))) {
            lz4_dctx = NULL;
            PyErr_NoMemory();
            return -1;
        }
    } else {
        LZ4F_resetDecompressionContext(lz4_dctx);
    }
    size_t used = 0, consumed = 0;
    for (;;) {
        if (used == capacity && grow(max_size, "lz4") < 0)
            return -1;
        size_t out_len = capacity - used, in_len = len - consumed;
        size_t hint = LZ4F_decompress(lz4_dctx, buffer + used, &out_len, src + consumed, &in_len, NULL);
        if (LZ4F_isError(hint))
            return corrupt("bad lz4 data", LZ4F_getErrorName(hint));
        used += out_len;
        consumed += in_len;
        if (used > max_size)
            return too_large("lz4", max_size);
        if (hint == 0)
            break; /* the end mark */
        if (used < capacity && (consumed == len || (out_len == 0 && in_len == 0)))
            return corrupt("truncated lz4 frame", NULL);
    }
    *produced = used;
    return 0;
}

/* One decode of whole zstd frames into the buffer as it is: 0 when they fit, 1 when the buffer is too small,
 * -1 with an error set. Across frames, as zstd-jni and python-zstandard's read_across_frames read. */
static int zstd_attempt(const uint8_t *src, size_t len, size_t max_size, size_t *produced)
{
    ZSTD_DCtx_reset(zstd_dctx, ZSTD_reset_session_only);
    ZSTD_inBuffer in = {src, len, 0};
    ZSTD_outBuffer out = {buffer, capacity, 0};
    for (;;) {
        size_t in_before = in.pos, out_before = out.pos;
        size_t rc = ZSTD_decompressStream(zstd_dctx, &out, &in);
        if (ZSTD_isError(rc)) {
            if (ZSTD_getErrorCode(rc) == ZSTD_error_dstSize_tooSmall)
                return 1;
            return corrupt("bad zstd data", ZSTD_getErrorName(rc));
        }
        if (out.pos > max_size)
            return too_large("zstd", max_size);
        if (rc == 0 && in.pos == in.size) {
            *produced = out.pos;
            return 0;
        }
        if (out.pos == out.size)
            return 1;
        if (in.pos == in.size || (in.pos == in_before && out.pos == out_before))
            return corrupt("truncated zstd frame", NULL);
    }
}

/* With ZSTD_d_stableOutBuffer zstd decodes straight into the buffer (no window buffer, no copy out of it), which
 * must then stay put for the whole decode: it is sized first for the frames' bound (their blocks x block size,
 * which Kafka's frames keep close to the real size) and, should that not do, the decode starts over in a larger
 * one. */
static int zstd_decompress(const uint8_t *src, size_t len, size_t max_size, size_t *produced)
{
    if (len == 0)
        return corrupt("empty zstd data", NULL);
    if (zstd_dctx == NULL) {
        zstd_dctx = ZSTD_createDCtx();
        if (zstd_dctx == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ZSTD_DCtx_setParameter(zstd_dctx, ZSTD_d_stableOutBuffer, 1); /* if refused: buffered, still correct */
    }
    unsigned long long bound = ZSTD_decompressBound(src, len);
    size_t wanted = bound == ZSTD_CONTENTSIZE_ERROR || bound > max_size ? 1 : (size_t)bound;
    if (reserve(wanted, max_size + 1) < 0)
        return -1;
    for (;;) {
        int rc = zstd_attempt(src, len, max_size, produced);
        if (rc != 1)
            return rc;
        if (grow(max_size, "zstd") < 0)
            return -1;
    }
}

/* gzip members, one after another while the bytes after a member start another (java.util.zip.GZIPInputStream);
 * any other bytes after a member are ignored. */
static int gzip_decompress(const uint8_t *src, size_t len, size_t max_size, size_t *produced)
{
    int rc = inflater_ready ? inflateReset2(&inflater, 16 + MAX_WBITS) : inflateInit2(&inflater, 16 + MAX_WBITS);
    if (rc != Z_OK) {
        PyErr_NoMemory();
        return -1;
    }
    inflater_ready = 1;
    inflater.next_in = (Bytef *)src;
    inflater.avail_in = (uInt)len; /* len < 2 GiB: a batch's size is an int32 */
    size_t used = 0;
    for (;;) {
        if (used == capacity && grow(max_size, "gzip") < 0)
            return -1;
        size_t room = capacity - used;
        inflater.next_out = buffer + used;
        inflater.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt out_before = inflater.avail_out, in_before = inflater.avail_in;
        rc = inflate(&inflater, Z_NO_FLUSH);
        used += out_before - inflater.avail_out;
        if (used > max_size)
            return too_large("gzip", max_size);
        if (rc == Z_STREAM_END) {
            if (inflater.avail_in < 2 || inflater.next_in[0] != 0x1f || inflater.next_in[1] != 0x8b)
                break;
            inflateReset(&inflater);
            continue;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return corrupt("bad gzip data", inflater.msg != NULL ? inflater.msg : zError(rc));
        if (inflater.avail_out > 0 && (inflater.avail_in == 0 || (rc == Z_BUF_ERROR && in_before == inflater.avail_in)))
            return corrupt("truncated gzip stream", NULL);
    }
    *produced = used;
    return 0;
}

/* One raw snappy block appended at `*used`. Its uncompressed length (a varint of at most 5 bytes, read as
 * wire/compression.py reads it) is checked against what max_size leaves before anything is allocated. */
static int snappy_block(const uint8_t *src, size_t len, size_t max_size, size_t *used)
{
    uint64_t length = 0;
    size_t i = 0;
    for (;; i++) {
        if (i == len || i == 5)
            return corrupt(i == 5 ? "bad snappy length preamble" : "truncated snappy block", NULL);
        length |= (uint64_t)(src[i] & 0x7F) << (7 * i);
        if (src[i] < 0x80)
            break;
    }
    if (length > max_size - *used)
        return PyErr_Format(TooLarge, "snappy block of %llu bytes exceeds the size limit", (unsigned long long)length),
               -1;
    if (reserve(*used + (size_t)length + 1, max_size + 1) < 0) /* + 1: never a NULL buffer */
        return -1;
    size_t out_len = capacity - *used;
    if (snappy_uncompress_fn((const char *)src, len, (char *)buffer + *used, &out_len) != 0 || out_len != length)
        return corrupt("bad snappy data", NULL);
    *used += out_len;
    return 0;
}

/* Kafka's snappy: snappy-java's xerial framing (a 16-byte header, then blocks each behind its int32 length), or
 * one raw block. The header's version ints are not checked, as in wire/compression.py. */
static int snappy_decompress(const uint8_t *src, size_t len, size_t max_size, size_t *produced)
{
    static const uint8_t magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    *produced = 0;
    if (len < 8 || memcmp(src, magic, 8) != 0)
        return snappy_block(src, len, max_size, produced);
    if (len < 16)
        return corrupt("truncated xerial snappy header", NULL);
    for (size_t pos = 16; pos < len;) {
        if (len - pos < 4)
            return corrupt("truncated xerial snappy block length", NULL);
        int32_t size = (int32_t)(((uint32_t)src[pos] << 24) | ((uint32_t)src[pos + 1] << 16)
                                 | ((uint32_t)src[pos + 2] << 8) | (uint32_t)src[pos + 3]);
        pos += 4;
        if (size < 0 || (size_t)size > len - pos)
            return PyErr_Format(DecompressError, "xerial snappy block length %d runs past the data", size), -1;
        if (snappy_block(src + pos, (size_t)size, max_size, produced) < 0)
            return -1;
        pos += (size_t)size;
    }
    return 0;
}

/* Drop what a large batch made the module keep, so one hostile batch does not hold memory for good. */
static void shrink(void)
{
    if (capacity > RETAINED_MAX) {
        PyMem_RawFree(buffer);
        buffer = NULL;
        capacity = 0;
    }
    if (zstd_dctx != NULL && ZSTD_sizeof_DCtx(zstd_dctx) > RETAINED_MAX) {
        ZSTD_freeDCtx(zstd_dctx);
        zstd_dctx = NULL;
    }
}

/* Decompress `view` into the buffer: 0 with its length in *produced, or -1 with an error set. */
static int decode(int codec, const Py_buffer *view, Py_ssize_t max_size, size_t *produced)
{
    const uint8_t *src = (const uint8_t *)view->buf;
    size_t len = (size_t)view->len;
    *produced = 0;
    if (max_size < 0 || view->len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "max_size must not be negative and data must be under 2 GiB");
        return -1;
    }
    if (codec == LZ4)
        return lz4_decompress(src, len, (size_t)max_size, produced);
    if (codec == ZSTD)
        return zstd_decompress(src, len, (size_t)max_size, produced);
    if (codec == GZIP)
        return gzip_decompress(src, len, (size_t)max_size, produced);
    if (codec == SNAPPY && snappy_uncompress_fn != NULL)
        return snappy_decompress(src, len, (size_t)max_size, produced);
    PyErr_Format(PyExc_ValueError, "no native decoder for compression codec %d", codec);
    return -1;
}

static PyObject *decompress_scan(PyObject *self, PyObject *args)
{
    int codec;
    Py_buffer view;
    long long count, base_timestamp;
    Py_ssize_t max_size;
    if (!PyArg_ParseTuple(args, "iy*LLn", &codec, &view, &count, &base_timestamp, &max_size))
        return NULL;
    static const uint8_t empty[1];
    size_t produced;
    PyObject *result = NULL;
    if (decode(codec, &view, max_size, &produced) == 0)
        result = scan(produced ? buffer : empty, (Py_ssize_t)produced, count, base_timestamp);
    PyBuffer_Release(&view);
    shrink();
    return result;
}

/* The same decoders for wire/compression.py's decompress (recompression, compaction, reads): one zstd, lz4 and
 * zlib per process, so a batch accepted on the way in decodes the same way later. */
static PyObject *decompress(PyObject *self, PyObject *args)
{
    int codec;
    Py_buffer view;
    Py_ssize_t max_size;
    if (!PyArg_ParseTuple(args, "iy*n", &codec, &view, &max_size))
        return NULL;
    size_t produced;
    PyObject *result = NULL;
    if (decode(codec, &view, max_size, &produced) == 0)
        result = PyBytes_FromStringAndSize((const char *)buffer, (Py_ssize_t)produced);
    PyBuffer_Release(&view);
    shrink();
    return result;
}

static PyMethodDef methods[] = {
    {"decompress_scan", decompress_scan, METH_VARARGS,
     "decompress_scan(codec, data, count, base_timestamp, max_size) -> (error | None, timestamped, min_ts, max_ts, "
     "null_keys)"},
    {"decompress", decompress, METH_VARARGS, "decompress(codec, data, max_size) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_decompress_scan",
    "Decompress a v2 batch's records into a reused buffer and walk them (see wire/batch_validation.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__decompress_scan(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    DecompressError = PyErr_NewExceptionWithDoc("logway.wire._decompress_scan.DecompressError",
                                                "Record data its codec cannot decode.", NULL, NULL);
    TooLarge = DecompressError == NULL ? NULL
        : PyErr_NewExceptionWithDoc("logway.wire._decompress_scan.TooLarge",
                                    "Record data that expands past max_size bytes.", DecompressError, NULL);
    void *snappy = dlopen("libsnappy.so.1", RTLD_NOW | RTLD_LOCAL);
    snappy_uncompress_fn = snappy == NULL ? NULL : (snappy_uncompress_t)dlsym(snappy, "snappy_uncompress");
    PyObject *codecs = snappy_uncompress_fn ? Py_BuildValue("(iiii)", GZIP, SNAPPY, LZ4, ZSTD)
                                            : Py_BuildValue("(iii)", GZIP, LZ4, ZSTD);
    PyObject *versions = Py_BuildValue("{ssssss}", "gzip", zlibVersion(), "lz4", LZ4_versionString(),
                                       "zstd", ZSTD_versionString());
    int failed = TooLarge == NULL || codecs == NULL || versions == NULL
        || PyModule_AddObjectRef(m, "DecompressError", DecompressError) < 0
        || PyModule_AddObjectRef(m, "TooLarge", TooLarge) < 0 || PyModule_AddObjectRef(m, "CODECS", codecs) < 0
        || PyModule_AddObjectRef(m, "LIBRARY_VERSIONS", versions) < 0;
    Py_XDECREF(codecs);
    Py_XDECREF(versions);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
