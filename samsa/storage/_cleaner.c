/*
 * samsa.storage._cleaner: the log cleaner's per-record work, without a Python object per
 * record (samsa/storage/offset_map.py has the same in Python, used when this module was not
 * built, and the documentation; samsa/storage/cleaner.py drives both).
 *
 *   OffsetMap(slots, limit, key)      key -> latest offset, in one preallocated table
 *       .add_records(data, count, base_offset, start_offset) -> (records_done, full)
 *       .filter_records(data, count, base_offset, base_ts, max_ts, log_append_time,
 *                       end_offset, keep_tombstones)
 *           -> (kept, tombstones_kept, first_kept_ts, max_kept_ts, keep_mask | None)
 *       .put(key, offset) -> bool, .get(key) -> offset | -1, .clear(), .size, .slots, .limit
 *   rebuild_records(data, count, keep_mask, base_ts, max_ts, log_append_time, new_base_ts)
 *       -> bytes
 *
 * The table: `slots` entries of 24 bytes (a key's 128-bit SipHash-2-4 under a per-map random
 * key, and its offset + 1; all zeros = empty), allocated once (anonymous memory in huge pages,
 * mapped as keys reach it), zeroed by clear(); linear probing from
 * (hash * slots) >> 64. At most `limit` keys go in (slots x log.cleaner.io.buffer.load.factor).
 * 128 bits keyed with a secret the producers never see: two keys of a log share an entry
 * with probability about n^2 / 2^129, and no one can make two keys collide on purpose
 * (a collision would let the newer key's record delete the older key's).
 *
 * Records are walked as in samsa/protocol/_recwalk.c (Java's varint limits); a record that
 * does not parse raises ValueError, which the cleaner reports as a corrupt batch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---------------------------------------------------------------------- SipHash-2-4-128 */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                    \
    do {                                                                            \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                   \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                      \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                      \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                   \
    } while (0)

static inline uint64_t load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static void siphash128(const uint8_t *in, Py_ssize_t len, uint64_t k0, uint64_t k1, uint64_t out[2])
{
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    v1 ^= 0xee;
    const uint8_t *end = in + (len - (len % 8));
    for (; in != end; in += 8) {
        uint64_t m = load_le64(in);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = ((uint64_t)len) << 56;
    switch (len & 7) {
    case 7: b |= ((uint64_t)in[6]) << 48; /* fall through */
    case 6: b |= ((uint64_t)in[5]) << 40; /* fall through */
    case 5: b |= ((uint64_t)in[4]) << 32; /* fall through */
    case 4: b |= ((uint64_t)in[3]) << 24; /* fall through */
    case 3: b |= ((uint64_t)in[2]) << 16; /* fall through */
    case 2: b |= ((uint64_t)in[1]) << 8; /* fall through */
    case 1: b |= ((uint64_t)in[0]); break;
    case 0: break;
    }
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xee;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[0] = v0 ^ v1 ^ v2 ^ v3;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[1] = v0 ^ v1 ^ v2 ^ v3;
}

/* ---------------------------------------------------------------------- varints */

enum { OK = 0, ENDED = 1, TOO_LONG = 2 };

static inline int read_varint(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, int32_t *out)
{
    uint32_t raw = 0;
    Py_ssize_t i = *pos;
    if (__builtin_expect(i < end && p[i] < 0x80, 1)) {
        uint32_t b0 = p[i];
        *pos = i + 1;
        *out = (int32_t)((b0 >> 1) ^ (uint32_t)(-(int32_t)(b0 & 1)));
        return OK;
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

static inline Py_ssize_t put_varlong(uint8_t *out, int64_t value)
{
    uint64_t raw = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    Py_ssize_t n = 0;
    while (raw >= 0x80) {
        out[n++] = (uint8_t)((raw & 0x7f) | 0x80);
        raw >>= 7;
    }
    out[n++] = (uint8_t)raw;
    return n;
}

/* ---------------------------------------------------------------------- one record */

typedef struct {
    Py_ssize_t start, end;      /* the record's bytes after its length varint: [start, end) */
    Py_ssize_t after_ts;        /* where the offset delta starts (what follows the timestamp delta) */
    int64_t ts_delta;
    int32_t offset_delta;
    Py_ssize_t key_pos;         /* -1: null key */
    int32_t key_len;
    int null_value;
} record;

/* Parse the record at *pos (bounds: end); on success *pos is the next record. Returns NULL or
 * a description of what does not parse (a static string). */
static const char *parse_record(const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, record *r)
{
    int32_t length, value_len, header_count, n;
    Py_ssize_t i = *pos;
    if (read_varint(p, &i, end, &length) != OK)
        return "a record length varint does not parse";
    if (length <= 0 || length > end - i)
        return "a record length overruns the batch";
    const Py_ssize_t rend = i + length;
    r->start = i;
    r->end = rend;
    i += 1; /* attributes */
    if (read_varlong(p, &i, rend, &r->ts_delta) != OK)
        return "a timestamp delta does not parse";
    r->after_ts = i;
    if (read_varint(p, &i, rend, &r->offset_delta) != OK || r->offset_delta < 0)
        return "an offset delta does not parse";
    if (read_varint(p, &i, rend, &r->key_len) != OK || r->key_len < -1 || r->key_len > rend - i)
        return "a key length overruns its record";
    r->key_pos = r->key_len >= 0 ? i : -1;
    if (r->key_len > 0)
        i += r->key_len;
    if (read_varint(p, &i, rend, &value_len) != OK || value_len < -1 || value_len > rend - i)
        return "a value length overruns its record";
    r->null_value = value_len < 0;
    if (value_len > 0)
        i += value_len;
    if (read_varint(p, &i, rend, &header_count) != OK || header_count < 0 || header_count > rend - i)
        return "a header count overruns its record";
    for (int32_t h = 0; h < header_count; h++) {
        if (read_varint(p, &i, rend, &n) != OK || n < 0 || n > rend - i)
            return "a header key overruns its record";
        i += n;
        if (read_varint(p, &i, rend, &n) != OK || n < -1 || n > rend - i)
            return "a header value overruns its record";
        if (n > 0)
            i += n;
    }
    if (i != rend)
        return "a record's fields do not end where its length says";
    *pos = rend;
    return NULL;
}

static PyObject *bad_records(const char *why, Py_ssize_t index)
{
    PyErr_Format(PyExc_ValueError, "record %zd: %s", index, why);
    return NULL;
}

/* ---------------------------------------------------------------------- the map */

typedef struct {
    uint64_t h0, h1;
    int64_t offset_plus_one; /* 0: empty slot */
} slot;

typedef struct {
    PyObject_HEAD
    slot *table;
    Py_ssize_t slots, limit, size;
    uint64_t k0, k1;
} OffsetMap;

static inline slot *home(OffsetMap *m, const uint64_t h[2])
{
    return m->table + (Py_ssize_t)(((__uint128_t)h[0] * (uint64_t)m->slots) >> 64);
}

/* The slot holding hash h, or the empty one where it would go. (An empty slot is all zeros: a
 * hash is written only with an offset, so a map without keys is all zeros.) */
static inline slot *find(OffsetMap *m, const uint64_t h[2])
{
    slot *s = home(m, h), *last = m->table + m->slots;
    while (s->offset_plus_one != 0 && (s->h0 != h[0] || s->h1 != h[1])) {
        if (++s == last)
            s = m->table;
    }
    return s;
}

/* Put hash -> offset; 0 when the hash is new and the map holds `limit` keys already. */
static inline int put(OffsetMap *m, const uint64_t h[2], int64_t offset)
{
    slot *s = find(m, h);
    if (s->offset_plus_one == 0) {
        if (m->size >= m->limit)
            return 0;
        m->size++;
        s->h0 = h[0];
        s->h1 = h[1];
    }
    s->offset_plus_one = offset + 1;
    return 1;
}

static inline void hash_key(OffsetMap *m, const uint8_t *key, Py_ssize_t len, uint64_t h[2])
{
    siphash128(key, len, m->k0, m->k1, h);
}

/* The table: anonymous memory (zero until touched, so pages are mapped only as keys reach
 * them), in huge pages where the kernel gives them (a probe is then one cache miss, not a
 * cache miss and a TLB miss). clear() hands the pages back. */
static slot *table_alloc(Py_ssize_t slots)
{
    size_t bytes = (size_t)slots * sizeof(slot);
#ifdef MAP_ANONYMOUS
    void *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(t, bytes, MADV_HUGEPAGE);
#endif
    return t;
#else
    return PyMem_RawCalloc((size_t)slots, sizeof(slot));
#endif
}

static void table_free(slot *t, Py_ssize_t slots)
{
    if (t == NULL)
        return;
#ifdef MAP_ANONYMOUS
    munmap(t, (size_t)slots * sizeof(slot));
#else
    PyMem_RawFree(t);
#endif
}

static void table_zero(slot *t, Py_ssize_t slots)
{
    size_t bytes = (size_t)slots * sizeof(slot);
#if defined(MAP_ANONYMOUS) && defined(MADV_DONTNEED)
    if (madvise(t, bytes, MADV_DONTNEED) == 0) /* (private anonymous memory reads as zeros again) */
        return;
#endif
    memset(t, 0, bytes);
}

static int map_init(OffsetMap *self, PyObject *args, PyObject *kwds)
{
    Py_ssize_t slots, limit;
    Py_buffer key;
    static char *kwlist[] = {"slots", "limit", "key", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "nny*", kwlist, &slots, &limit, &key))
        return -1;
    if (key.len != 16 || slots < 1 || limit < 1 || limit > slots) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "need 1 <= limit <= slots and a 16-byte key");
        return -1;
    }
    self->k0 = load_le64((const uint8_t *)key.buf);
    self->k1 = load_le64((const uint8_t *)key.buf + 8);
    PyBuffer_Release(&key);
    table_free(self->table, self->slots);
    self->table = table_alloc(slots);
    if (self->table == NULL) {
        self->slots = 0;
        PyErr_NoMemory();
        return -1;
    }
    self->slots = slots;
    self->limit = limit;
    self->size = 0;
    return 0;
}

static void map_dealloc(OffsetMap *self)
{
    table_free(self->table, self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *map_clear(OffsetMap *self, PyObject *Py_UNUSED(ignored))
{
    if (self->size) /* (a map without keys is all zeros already) */
        table_zero(self->table, self->slots);
    self->size = 0;
    Py_RETURN_NONE;
}

static PyObject *map_put(OffsetMap *self, PyObject *args)
{
    Py_buffer key;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L", &key, &offset))
        return NULL;
    uint64_t h[2];
    hash_key(self, key.buf, key.len, h);
    int ok = offset >= 0 && put(self, h, offset);
    PyBuffer_Release(&key);
    return PyBool_FromLong(ok);
}

static PyObject *map_get(OffsetMap *self, PyObject *args)
{
    Py_buffer key;
    if (!PyArg_ParseTuple(args, "y*", &key))
        return NULL;
    uint64_t h[2];
    hash_key(self, key.buf, key.len, h);
    int64_t offset = find(self, h)->offset_plus_one - 1;
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(offset);
}

/* Records are taken CHUNK at a time: parsed and hashed, their slots prefetched, then probed,
 * so that the table's cache misses overlap instead of following one another. */
#define CHUNK 32

typedef struct {
    record r;
    uint64_t h[2];
} item;

/* Parse (and hash the keys of) up to CHUNK of the `left` records at *pos; the number parsed.
 * *why is set when the record after those does not parse. */
static Py_ssize_t parse_chunk(OffsetMap *m, const uint8_t *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t left,
                              item *items, const char **why)
{
    Py_ssize_t n = 0;
    for (; n < CHUNK && n < left; n++) {
        if (UNLIKELY(*pos >= end)) {
            *why = "the batch holds fewer records than it declares";
            break;
        }
        if (UNLIKELY((*why = parse_record(p, pos, end, &items[n].r)) != NULL))
            break;
        if (items[n].r.key_pos >= 0) {
            hash_key(m, p + items[n].r.key_pos, items[n].r.key_len, items[n].h);
            __builtin_prefetch(home(m, items[n].h), 1, 1);
        }
    }
    return n;
}

static PyObject *map_add_records(OffsetMap *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, start_offset;
    if (!PyArg_ParseTuple(args, "y*nLL", &view, &count, &base_offset, &start_offset))
        return NULL;
    const uint8_t *p = view.buf;
    Py_ssize_t pos = 0, end = view.len, index = 0;
    int full = 0;
    const char *why = NULL;
    item items[CHUNK];
    Py_BEGIN_ALLOW_THREADS
    while (index < count && why == NULL && !full) {
        Py_ssize_t n = parse_chunk(self, p, &pos, end, count - index, items, &why);
        for (Py_ssize_t i = 0; i < n; i++) {
            const record *r = &items[i].r;
            int64_t offset = base_offset + r->offset_delta;
            if (r->key_pos >= 0 && offset >= start_offset && !put(self, items[i].h, offset)) {
                full = 1;
                why = NULL; /* (a record after it that does not parse is another pass's) */
                n = i;
                break;
            }
        }
        index += n;
    }
    if (why == NULL && !full && pos != end)
        why = "bytes are left after the batch's records";
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (why != NULL)
        return bad_records(why, index);
    return Py_BuildValue("(nO)", index, full ? Py_True : Py_False);
}

static PyObject *map_filter_records(OffsetMap *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, max_ts, end_offset;
    int log_append_time, keep_tombstones;
    if (!PyArg_ParseTuple(args, "y*nLLLpLp", &view, &count, &base_offset, &base_ts, &max_ts, &log_append_time,
                          &end_offset, &keep_tombstones))
        return NULL;
    PyObject *mask = PyBytes_FromStringAndSize(NULL, count);
    if (mask == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    uint8_t *keep = (uint8_t *)PyBytes_AS_STRING(mask);
    const uint8_t *p = view.buf;
    Py_ssize_t pos = 0, end = view.len, index = 0, kept = 0;
    int tombstones = 0;
    int64_t first_ts = -1, max_kept = -1;
    const char *why = NULL;
    item items[CHUNK];
    Py_BEGIN_ALLOW_THREADS
    while (index < count && why == NULL) {
        Py_ssize_t n = parse_chunk(self, p, &pos, end, count - index, items, &why);
        for (Py_ssize_t i = 0; i < n; i++) {
            const record *r = &items[i].r;
            int64_t offset = base_offset + r->offset_delta;
            int k;
            if (offset >= end_offset)
                k = 1; /* past what the map covers: not this clean's to decide */
            else if (r->key_pos < 0)
                k = 0; /* a compacted topic's record without a key: Kafka's cleaner drops it */
            else
                k = offset >= find(self, items[i].h)->offset_plus_one - 1 && (!r->null_value || keep_tombstones);
            keep[index + i] = (uint8_t)k;
            if (k) {
                int64_t ts = log_append_time ? max_ts : (int64_t)((uint64_t)base_ts + (uint64_t)r->ts_delta);
                if (kept == 0)
                    first_ts = ts;
                if (ts > max_kept)
                    max_kept = ts;
                tombstones |= r->null_value;
                kept++;
            }
        }
        index += n;
    }
    if (why == NULL && pos != end)
        why = "bytes are left after the batch's records";
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (why != NULL) {
        Py_DECREF(mask);
        return bad_records(why, index);
    }
    if (kept == count) {
        Py_DECREF(mask);
        mask = Py_NewRef(Py_None);
    }
    return Py_BuildValue("(nOLLN)", kept, tombstones ? Py_True : Py_False, (long long)first_ts,
                         (long long)max_kept, mask);
}

static PyObject *map_size(OffsetMap *self, void *closure) { return PyLong_FromSsize_t(self->size); }
static PyObject *map_slots(OffsetMap *self, void *closure) { return PyLong_FromSsize_t(self->slots); }
static PyObject *map_limit(OffsetMap *self, void *closure) { return PyLong_FromSsize_t(self->limit); }

static PyGetSetDef map_getset[] = {
    {"size", (getter)map_size, NULL, "keys in the map", NULL},
    {"slots", (getter)map_slots, NULL, "entries the table has room for", NULL},
    {"limit", (getter)map_limit, NULL, "keys the map takes before it is full", NULL},
    {NULL},
};

static PyMethodDef map_methods[] = {
    {"clear", (PyCFunction)map_clear, METH_NOARGS, "Forget every key."},
    {"put", (PyCFunction)map_put, METH_VARARGS, "put(key, offset) -> False when full."},
    {"get", (PyCFunction)map_get, METH_VARARGS, "get(key) -> offset, -1 if absent."},
    {"add_records", (PyCFunction)map_add_records, METH_VARARGS,
     "add_records(data, count, base_offset, start_offset) -> (records_done, full)."},
    {"filter_records", (PyCFunction)map_filter_records, METH_VARARGS,
     "filter_records(data, count, base_offset, base_ts, max_ts, log_append_time, end_offset, keep_tombstones) -> "
     "(kept, tombstones_kept, first_kept_ts, max_kept_ts, keep_mask or None)."},
    {NULL},
};

static PyTypeObject OffsetMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samsa.storage._cleaner.OffsetMap",
    .tp_basicsize = sizeof(OffsetMap),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The cleaner's key -> latest offset map, in one preallocated table.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)map_init,
    .tp_dealloc = (destructor)map_dealloc,
    .tp_methods = map_methods,
    .tp_getset = map_getset,
};

/* ---------------------------------------------------------------------- rebuild */

static PyObject *rebuild_records(PyObject *self, PyObject *args)
{
    Py_buffer view, mask;
    Py_ssize_t count;
    long long base_ts, max_ts, new_base_ts;
    int log_append_time;
    if (!PyArg_ParseTuple(args, "y*ny*LLpL", &view, &count, &mask, &base_ts, &max_ts, &log_append_time,
                          &new_base_ts))
        return NULL;
    PyObject *out = NULL;
    const char *why = NULL;
    Py_ssize_t index = 0;
    if (mask.len != count) {
        PyErr_SetString(PyExc_ValueError, "the mask has one byte per record");
        goto done;
    }
    /* A new timestamp delta takes at most 10 bytes, its length varint at most 5 more. */
    out = PyBytes_FromStringAndSize(NULL, view.len + 15 * count);
    if (out == NULL)
        goto done;
    const uint8_t *p = view.buf, *keep = mask.buf;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    Py_ssize_t pos = 0, end = view.len, w = 0;
    for (index = 0; index < count; index++) {
        record r;
        if (pos >= end) {
            why = "the batch holds fewer records than it declares";
            break;
        }
        if ((why = parse_record(p, &pos, end, &r)) != NULL)
            break;
        if (!keep[index])
            continue;
        int64_t ts = log_append_time ? max_ts : (int64_t)((uint64_t)base_ts + (uint64_t)r.ts_delta);
        uint8_t delta[10];
        Py_ssize_t dn = put_varlong(delta, (int64_t)((uint64_t)ts - (uint64_t)new_base_ts));
        Py_ssize_t rest = r.end - r.after_ts;
        w += put_varlong(o + w, 1 + dn + rest); /* (a record length is an int32 varint: same bytes) */
        o[w++] = p[r.start];                    /* attributes */
        memcpy(o + w, delta, (size_t)dn);
        w += dn;
        memcpy(o + w, p + r.after_ts, (size_t)rest);
        w += rest;
    }
    if (why != NULL) {
        Py_CLEAR(out);
        bad_records(why, index);
        goto done;
    }
    _PyBytes_Resize(&out, w);
done:
    PyBuffer_Release(&view);
    PyBuffer_Release(&mask);
    return out;
}

static PyObject *siphash(PyObject *self, PyObject *args)
{
    Py_buffer data, key;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &key))
        return NULL;
    PyObject *result = NULL;
    if (key.len != 16) {
        PyErr_SetString(PyExc_ValueError, "a 16-byte key");
    } else {
        uint64_t h[2];
        siphash128(data.buf, data.len, load_le64(key.buf), load_le64((const uint8_t *)key.buf + 8), h);
        uint8_t digest[16];
        for (int i = 0; i < 8; i++) {
            digest[i] = (uint8_t)(h[0] >> (8 * i));
            digest[8 + i] = (uint8_t)(h[1] >> (8 * i));
        }
        result = PyBytes_FromStringAndSize((const char *)digest, 16);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&key);
    return result;
}

static PyMethodDef methods[] = {
    {"rebuild_records", rebuild_records, METH_VARARGS,
     "rebuild_records(data, count, keep_mask, base_ts, max_ts, log_append_time, new_base_ts) -> the kept records"},
    {"siphash128", siphash, METH_VARARGS, "siphash128(data, key) -> SipHash-2-4 with a 16-byte digest (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "samsa.storage._cleaner",
    .m_doc = "The log cleaner's offset map and record filter.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__cleaner(void)
{
    if (PyType_Ready(&OffsetMapType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "OffsetMap", (PyObject *)&OffsetMapType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
