/*
 * samsa.protocol._recwalk: walk the records of one RecordBatch v2 without making a Python
 * object per record. The Produce validator's hot path (samsa/protocol/record_walk.py has the
 * same walk in Python, used when this module was not built, and the documentation).
 *
 *   walk(data, count, base_timestamp, lo, hi, need_key)
 *       -> (error, max_timestamp, bad_timestamps, keyless)
 *
 * data            the batch's records section, decompressed (a buffer)
 * count           the header's recordCount
 * base_timestamp  the header's baseTimestamp
 * lo, hi          a record's timestamp must lie in [lo, hi] unless it is -1 (no timestamp)
 * need_key        records without a key are listed in `keyless`
 *
 * error           None, or why the records do not parse (then the other fields are unset)
 * max_timestamp   the largest record timestamp, -1 if none is larger
 * bad_timestamps  indexes of records outside [lo, hi], or None
 * keyless         indexes of records with a null key (only with need_key), or None
 *
 * uninit(n) and grow(ba, n) make and grow a frame's bytearray without zeroing it (framing.py).
 *
 * Varints follow Java's ByteUtils exactly: at most 5 bytes for a varint (the bits past 32 of
 * the fifth are dropped), 10 for a varlong, zigzag-decoded, two's-complement wrap-around on
 * baseTimestamp + timestampDelta as in Java's long arithmetic.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { OK = 0, ENDED = 1, TOO_LONG = 2 };

static inline int read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, int32_t *out)
{
    uint32_t raw = 0;
    Py_ssize_t i = *pos;
    if (__builtin_expect(end - i >= 2, 1)) { /* one or two bytes: the common cases */
        uint32_t b0 = p[i];
        if (b0 < 0x80) {
            *pos = i + 1;
            *out = (int32_t)((b0 >> 1) ^ (uint32_t)(-(int32_t)(b0 & 1)));
            return OK;
        }
        uint32_t b1 = p[i + 1];
        if (b1 < 0x80) {
            raw = (b0 & 0x7f) | (b1 << 7);
            *pos = i + 2;
            *out = (int32_t)((raw >> 1) ^ (uint32_t)(-(int32_t)(raw & 1)));
            return OK;
        }
    }
    for (int shift = 0; shift <= 28; shift += 7) {
        if (i >= end)
            return ENDED;
        uint8_t b = p[i++];
        raw |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pos = i;
            *out = (int32_t)((raw >> 1) ^ (uint32_t)(-(int32_t)(raw & 1)));
            return OK;
        }
    }
    return TOO_LONG;
}

static inline int read_varlong(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    uint64_t raw = 0;
    Py_ssize_t i = *pos;
    if (__builtin_expect(i < end && p[i] < 0x80, 1)) { /* one byte: a delta of at most 63 ms */
        raw = p[i];
        *pos = i + 1;
        *out = (int64_t)((raw >> 1) ^ (uint64_t)(-(int64_t)(raw & 1)));
        return OK;
    }
    for (int shift = 0; shift <= 63; shift += 7) {
        if (i >= end)
            return ENDED;
        uint8_t b = p[i++];
        raw |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pos = i;
            *out = (int64_t)((raw >> 1) ^ (uint64_t)(-(int64_t)(raw & 1)));
            return OK;
        }
    }
    return TOO_LONG;
}

/* Whether s[0:n] is UTF-8 as Python's strict decoder takes it: no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static int utf8_valid(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int need;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i - 1 < need)
            return 0;
        for (int k = 1; k <= need; k++) {
            uint32_t b = s[i + k];
            if ((b & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (b & 0x3F);
        }
        if (need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)))
            return 0;
        if (need == 3 && (cp < 0x10000 || cp > 0x10FFFF))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* What stopped a walk: the first record that does not parse. */
enum problem {
    NONE = 0, SHORT, LENGTH_VARINT, LENGTH, ATTRIBUTES, TS_VARINT, OFFSET_VARINT, OFFSET, KEY_VARINT, KEY,
    VALUE_VARINT, VALUE, COUNT_VARINT, COUNT, HKEY_VARINT, HKEY, HKEY_UTF8, HVALUE_VARINT, HVALUE, FIELDS, TRAILING,
};

typedef struct {
    enum problem problem;
    int rc;             /* for a *_VARINT problem: ENDED or TOO_LONG */
    Py_ssize_t index;   /* the record */
    int32_t header;     /* the header, for H* problems */
    int64_t value;      /* the length or delta at fault */
    Py_ssize_t left;    /* bytes left in the record (or batch) there */
    int64_t max_ts;
    Py_ssize_t bad_ts, keyless;  /* how many records are out of bounds, without a key */
} walk_state;

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define STOP(what, v, l) \
    do { st->problem = (what); st->value = (v); st->left = (l); st->index = index; return; } while (0)
#define VARINT(dst, lim, what) \
    do { if (UNLIKELY((rc = read_varint(p, &pos, (lim), &(dst))) != OK)) { st->rc = rc; STOP(what, 0, 0); } } while (0)
/* A length (key, value, header value): -1 is null, else its bytes must fit in the record. */
#define SKIP_BYTES(var, what) \
    do { if (UNLIKELY((var) < -1 || (var) > record_end - pos)) STOP(what, (var), record_end - pos); \
         if ((var) > 0) pos += (var); } while (0)

/* The loop itself: no Python, no allocation. */
static void scan(const uint8_t *__restrict p, Py_ssize_t end, Py_ssize_t count, int64_t base_ts, int64_t lo,
                 int64_t hi, int need_key, walk_state *__restrict st)
{
    Py_ssize_t pos = 0, index;
    int64_t max_ts = -1;
    Py_ssize_t bad_ts = 0, keyless = 0;
    int rc;
    for (index = 0; index < count; index++) {
        int32_t length, offset_delta, key_len, value_len, header_count, hkey_len, hvalue_len;
        int64_t ts_delta;
        if (UNLIKELY(pos >= end))
            STOP(SHORT, index, 0);
        VARINT(length, end, LENGTH_VARINT);
        if (UNLIKELY(length <= 0 || length > end - pos))
            STOP(LENGTH, length, end - pos);
        const Py_ssize_t record_end = pos + length;
        if (UNLIKELY(p[pos] != 0)) /* attributes: unused in v2, and 0 */
            STOP(ATTRIBUTES, p[pos], 0);
        pos += 1;
        if (UNLIKELY((rc = read_varlong(p, &pos, record_end, &ts_delta)) != OK)) {
            st->rc = rc;
            STOP(TS_VARINT, 0, 0);
        }
        VARINT(offset_delta, record_end, OFFSET_VARINT);
        if (UNLIKELY(offset_delta != index))
            STOP(OFFSET, offset_delta, 0);
        VARINT(key_len, record_end, KEY_VARINT);
        SKIP_BYTES(key_len, KEY);
        keyless += key_len < 0;
        VARINT(value_len, record_end, VALUE_VARINT);
        SKIP_BYTES(value_len, VALUE);
        VARINT(header_count, record_end, COUNT_VARINT);
        if (UNLIKELY(header_count < 0 || header_count > record_end - pos))
            STOP(COUNT, header_count, record_end - pos);
        for (int32_t h = 0; h < header_count; h++) {
            st->header = h; /* (records with headers only) */
            VARINT(hkey_len, record_end, HKEY_VARINT);
            if (UNLIKELY(hkey_len < 0 || hkey_len > record_end - pos))
                STOP(HKEY, hkey_len, record_end - pos);
            if (UNLIKELY(!utf8_valid(p + pos, hkey_len)))
                STOP(HKEY_UTF8, hkey_len, 0);
            pos += hkey_len;
            VARINT(hvalue_len, record_end, HVALUE_VARINT);
            SKIP_BYTES(hvalue_len, HVALUE);
        }
        if (UNLIKELY(pos != record_end))
            STOP(FIELDS, length, record_end - pos);
        /* The next record starts at record_end, not at `pos`: the record boundaries are then
         * the only chain of dependent loads, and the CPU walks a record's fields while it
         * finds the next one. */
        pos = record_end;
        int64_t ts = (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
        if (ts != -1) {
            max_ts = ts > max_ts ? ts : max_ts;
            bad_ts += ts < lo || ts > hi;
        }
    }
    if (UNLIKELY(pos != end))
        STOP(TRAILING, 0, end - pos);
    st->max_ts = max_ts;
    st->bad_ts = bad_ts;
    st->keyless = need_key ? keyless : 0;
}

static const char *varint_problem(int rc)
{
    return rc == ENDED ? "ends inside a varint" : "has a varint longer than Java's limit";
}

static PyObject *describe(const walk_state *st, Py_ssize_t count)
{
    const char *vp = varint_problem(st->rc);
    Py_ssize_t i = st->index;
    int v = (int)st->value, h = (int)st->header;
    switch (st->problem) {
    case SHORT: return PyUnicode_FromFormat("the batch declares %zd records but holds %zd", count, i);
    case LENGTH_VARINT: return PyUnicode_FromFormat("record %zd: its length %s", i, vp);
    case LENGTH: return PyUnicode_FromFormat("record %zd: length %d with %zd bytes left in the batch", i, v, st->left);
    case ATTRIBUTES: return PyUnicode_FromFormat("record %zd: attributes %d, where v2 records have 0", i, v);
    case TS_VARINT: return PyUnicode_FromFormat("record %zd: its timestamp delta %s", i, vp);
    case OFFSET_VARINT: return PyUnicode_FromFormat("record %zd: its offset delta %s", i, vp);
    case OFFSET:
        return PyUnicode_FromFormat("record %zd: offset delta %d, expected %zd (deltas count up from 0)", i, v, i);
    case KEY_VARINT: return PyUnicode_FromFormat("record %zd: key %s", i, vp);
    case KEY: return PyUnicode_FromFormat("record %zd: key length %d with %zd bytes left in the record", i, v, st->left);
    case VALUE_VARINT: return PyUnicode_FromFormat("record %zd: value %s", i, vp);
    case VALUE:
        return PyUnicode_FromFormat("record %zd: value length %d with %zd bytes left in the record", i, v, st->left);
    case COUNT_VARINT: return PyUnicode_FromFormat("record %zd: its header count %s", i, vp);
    case COUNT:
        return PyUnicode_FromFormat("record %zd: header count %d with %zd bytes left in the record", i, v, st->left);
    case HKEY_VARINT: return PyUnicode_FromFormat("record %zd: header %d: its key length %s", i, h, vp);
    case HKEY:
        return PyUnicode_FromFormat("record %zd: header %d: key length %d with %zd bytes left in the record", i, h, v,
                                    st->left);
    case HKEY_UTF8: return PyUnicode_FromFormat("record %zd: header %d: its key is not valid UTF-8", i, h);
    case HVALUE_VARINT: return PyUnicode_FromFormat("record %zd: header value %s", i, vp);
    case HVALUE:
        return PyUnicode_FromFormat("record %zd: header value length %d with %zd bytes left in the record", i, v,
                                    st->left);
    case FIELDS:
        return PyUnicode_FromFormat("record %zd: its length says %d bytes, its fields end %zd bytes short", i, v,
                                    st->left);
    case TRAILING: return PyUnicode_FromFormat("%zd bytes are left after the batch's %zd records", st->left, count);
    default: return PyUnicode_FromString("unknown problem");
    }
}

/* The indexes of the records out of [lo, hi] (want_ts) or without a key: a second pass over
 * records already known to parse, taken only when some record is at fault. */
static PyObject *collect(const uint8_t *p, Py_ssize_t count, int64_t base_ts, int64_t lo, int64_t hi, int want_ts)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t pos = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        int32_t length = 0, offset_delta = 0, key_len = 0;
        int64_t ts_delta = 0;
        read_varint(p, &pos, PY_SSIZE_T_MAX, &length);
        Py_ssize_t record_end = pos + length;
        pos += 1;
        read_varlong(p, &pos, record_end, &ts_delta);
        read_varint(p, &pos, record_end, &offset_delta);
        read_varint(p, &pos, record_end, &key_len);
        int64_t ts = (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
        int hit = want_ts ? (ts != -1 && (ts < lo || ts > hi)) : key_len < 0;
        if (hit) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(out, i) < 0) {
                Py_XDECREF(i);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(i);
        }
        pos = record_end;
    }
    return out;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts, lo, hi;
    int need_key;
    if (!PyArg_ParseTuple(args, "y*nLLLp", &view, &count, &base_ts, &lo, &hi, &need_key))
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    walk_state st = {0};
    scan(p, view.len, count, base_ts, lo, hi, need_key, &st);
    PyObject *result;
    if (st.problem != NONE) {
        PyObject *msg = describe(&st, count);
        result = msg == NULL ? NULL : Py_BuildValue("(NiOO)", msg, -1, Py_None, Py_None);
    } else {
        PyObject *bad = st.bad_ts ? collect(p, count, base_ts, lo, hi, 1) : Py_NewRef(Py_None);
        PyObject *keyless = st.keyless ? collect(p, count, base_ts, lo, hi, 0) : Py_NewRef(Py_None);
        if (bad == NULL || keyless == NULL) {
            Py_XDECREF(bad);
            Py_XDECREF(keyless);
            result = NULL;
        } else {
            result = Py_BuildValue("(OLNN)", Py_None, (long long)st.max_ts, bad, keyless);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

/* A bytearray of n bytes whose contents are whatever the allocator held: for a frame's body,
 * which the socket fills before anyone reads it (bytearray(n) zeroes it first: 5% of the
 * broker's CPU at 1 KiB acks=all, in memset). */
static PyObject *uninit(PyObject *self, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "a negative size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, n);
}

/* Grow a bytearray to n bytes without filling the new part (BufferError while it has a view). */
static PyObject *grow(PyObject *self, PyObject *args)
{
    PyObject *ba;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "O!n", &PyByteArray_Type, &ba, &n))
        return NULL;
    if (n < PyByteArray_GET_SIZE(ba)) {
        PyErr_SetString(PyExc_ValueError, "grow() cannot shrink");
        return NULL;
    }
    if (PyByteArray_Resize(ba, n) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk one batch's records: (error, max_timestamp, bad_timestamps, keyless)."},
    {"uninit", uninit, METH_O, "uninit(n): a bytearray of n bytes, not zeroed (to be filled before it is read)."},
    {"grow", grow, METH_VARARGS, "grow(ba, n): resize bytearray ba to n bytes, the new part not zeroed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "samsa.protocol._recwalk", "RecordBatch v2 record walker.", -1, methods,
};

PyMODINIT_FUNC PyInit__recwalk(void)
{
    return PyModule_Create(&module);
}
