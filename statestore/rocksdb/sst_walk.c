/* The entries of inflated RocksDB data blocks, walked in C: the native half of wmcheck.checkpoint.sst_columns.

A run's blocks lie one after the other in one buffer. scan() walks every entry (three varints, the key's own bytes,
the value) and returns (entries, longest internal key), or None as soon as anything is not the common well-formed
case: the NumPy reader (the reference) then reads the run, and raises its own error where there is one. fill()
walks them again and writes each entry's internal key (its shared bytes taken from the key before it) into a row of
`width` bytes, and its user key's length, value start and end, sequence number, type, and whether its user key is
the entry before it's, as the reference computes them. merge() merges several tables' sorted runs in RocksDB's
order (wmcheck.statestore.snapshot_rows, whose NumPy sort is the reference).
Only the buffer protocol is used: the arrays are NumPy's, allocated by the caller. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_VARINT_BYTES 5 /* up to 2^35: anything longer is left to the reference */

typedef struct {
    const uint8_t *data;
    int64_t size;
    const int64_t *starts;
    const int64_t *lengths;
    int64_t blocks;
} Run;

typedef struct {
    int64_t shared, own, own_at, value_end;
    int first; /* the entry starts a restart interval */
} Entry;

/* The varint at *pos (below end), or -1. */
static int64_t varint(const uint8_t *data, int64_t *pos, int64_t end) {
    int64_t value = 0;
    for (int i = 0; i < MAX_VARINT_BYTES; i++) {
        if (*pos >= end) return -1;
        uint8_t byte = data[(*pos)++];
        value |= (int64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) return value;
    }
    return -1;
}

static int64_t u32(const uint8_t *p) {
    return (int64_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Called for each entry in the table's order. */
typedef void (*Visit)(void *state, const Entry *entry);

/* Walk every entry of the run; 0 when every block and entry is well formed as the reference reads it without an
   error, else -1 (at the first that is not, before visiting it). */
static int walk(const Run *run, Visit visit, void *state) {
    int64_t previous_key = -1;
    for (int64_t b = 0; b < run->blocks; b++) {
        int64_t start = run->starts[b], length = run->lengths[b];
        if (length < 4 || start < 0 || start + length > run->size) return -1;
        int64_t restarts = u32(run->data + start + length - 4);
        int64_t region_end = start + length - 4 - 4 * restarts;
        if (restarts < 1 || region_end < start) return -1;
        for (int64_t r = 0; r < restarts; r++) {
            int64_t begin = start + u32(run->data + region_end + 4 * r);
            int64_t limit = r + 1 < restarts ? start + u32(run->data + region_end + 4 * (r + 1)) : region_end;
            if (begin > limit) return -1;
            for (int64_t pos = begin; pos < limit;) {
                Entry e;
                e.first = pos == begin;
                e.shared = varint(run->data, &pos, limit);
                e.own = varint(run->data, &pos, limit);
                int64_t size = varint(run->data, &pos, limit);
                if (e.shared < 0 || e.own < 0 || size < 0) return -1;
                e.own_at = pos;
                e.value_end = pos + e.own + size;
                if (e.value_end > limit || (e.first && e.shared) || e.shared + e.own < 8 ||
                    (previous_key >= 0 && e.shared > previous_key))
                    return -1;
                visit(state, &e);
                previous_key = e.shared + e.own;
                pos = e.value_end;
            }
        }
    }
    return 0;
}

typedef struct {
    int64_t entries, longest;
} Scan;

static void count(void *state, const Entry *e) {
    Scan *s = state;
    s->entries++;
    if (e->shared + e->own > s->longest) s->longest = e->shared + e->own;
}

typedef struct {
    const uint8_t *data;
    uint8_t *keys;
    int64_t width, at, capacity, previous_user;
    int64_t *user, *value_start, *value_end;
    uint64_t *sequence;
    uint8_t *kind, *repeat;
    int overflow;
} Fill;

static void put(void *state, const Entry *e) {
    Fill *f = state;
    int64_t length = e->shared + e->own, user = length - 8;
    if (f->at >= f->capacity || length > f->width) {
        f->overflow = 1;
        return;
    }
    uint8_t *row = f->keys + f->at * f->width;
    if (e->shared) memcpy(row, row - f->width, (size_t)e->shared);
    memcpy(row + e->shared, f->data + e->own_at, (size_t)e->own);
    uint64_t trailer = 0;
    for (int i = 7; i >= 0; i--) trailer = trailer << 8 | row[user + i];
    f->user[f->at] = user;
    f->value_start[f->at] = e->own_at + e->own;
    f->value_end[f->at] = e->value_end;
    f->sequence[f->at] = trailer >> 8;
    f->kind[f->at] = (uint8_t)(trailer & 0xFF);
    /* the user key of the entry before: RocksDB shares every byte two equal keys have in common, so within a restart
       interval an equal key shares all of it; an interval's first entry shares nothing and is compared */
    f->repeat[f->at] = f->at > 0 && user == f->previous_user &&
                       (e->first ? memcmp(row, row - f->width, (size_t)user) == 0 : e->shared >= f->previous_user);
    f->previous_user = user;
    f->at++;
}

/* The run's buffers: data, block starts and block lengths (int64). */
static int run_of(PyObject *data, PyObject *starts, PyObject *lengths, Py_buffer views[3], Run *run) {
    if (PyObject_GetBuffer(data, &views[0], PyBUF_SIMPLE) < 0) return -1;
    if (PyObject_GetBuffer(starts, &views[1], PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&views[0]);
        return -1;
    }
    if (PyObject_GetBuffer(lengths, &views[2], PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&views[0]);
        PyBuffer_Release(&views[1]);
        return -1;
    }
    run->data = views[0].buf;
    run->size = views[0].len;
    run->starts = views[1].buf;
    run->lengths = views[2].buf;
    run->blocks = views[1].len / 8 < views[2].len / 8 ? views[1].len / 8 : views[2].len / 8;
    return 0;
}

static void release(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&views[i]);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *data, *starts, *lengths;
    if (!PyArg_ParseTuple(args, "OOO", &data, &starts, &lengths)) return NULL;
    Py_buffer views[3];
    Run run;
    if (run_of(data, starts, lengths, views, &run) < 0) return NULL;
    Scan s = {0, 0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = walk(&run, count, &s);
    Py_END_ALLOW_THREADS
    release(views, 3);
    if (status < 0) Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)s.entries, (long long)s.longest);
}

static PyObject *fill(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *data, *starts, *lengths, *out[7];
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OOOnOOOOOOO", &data, &starts, &lengths, &width, &out[0], &out[1], &out[2], &out[3],
                          &out[4], &out[5], &out[6]))
        return NULL;
    Py_buffer views[10];
    Run run;
    if (run_of(data, starts, lengths, views, &run) < 0) return NULL;
    int got = 3;
    for (; got < 10; got++)
        if (PyObject_GetBuffer(out[got - 3], &views[got], PyBUF_WRITABLE) < 0) break;
    if (got < 10) {
        release(views, got);
        return NULL;
    }
    int64_t n = views[4].len / 8;
    if (width < 0 || views[3].len < n * width || views[5].len < 8 * n || views[6].len < 8 * n || views[7].len < 8 * n ||
        views[8].len < n || views[9].len < n) {
        release(views, 10);
        PyErr_SetString(PyExc_ValueError, "the output arrays do not hold as many entries as user");
        return NULL;
    }
    Fill f = {run.data, views[3].buf, width, 0, n, -1, views[4].buf, views[5].buf, views[6].buf, views[7].buf,
              views[8].buf, views[9].buf, 0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = walk(&run, put, &f);
    Py_END_ALLOW_THREADS
    release(views, 10);
    if (status < 0 || f.overflow || f.at != n) {
        PyErr_SetString(PyExc_ValueError, "the run's entries are not those scan() counted");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* One sorted run of entries to merge: internal keys in rows of `width` bytes, user key lengths, sequence numbers,
   types; entries lo..hi-1. */
typedef struct {
    const uint8_t *keys;
    const int64_t *user;
    const uint64_t *sequence;
    const uint8_t *kind;
    int64_t width, lo, at, hi, base;
} Part;

/* Whether part a's next entry comes before part b's: user keys bytewise (a key before its own extensions), then the
   newer entry (the larger sequence number) first, as RocksDB's iterator orders them. */
static int before(const Part *a, const Part *b) {
    int64_t la = a->user[a->at], lb = b->user[b->at];
    int c = memcmp(a->keys + a->at * a->width, b->keys + b->at * b->width, (size_t)(la < lb ? la : lb));
    if (c) return c < 0;
    if (la != lb) return la < lb;
    return a->sequence[a->at] > b->sequence[b->at];
}

#define MAX_PARTS 256

static PyObject *merge(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *runs, *out_keys, *out_index;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "OnOO", &runs, &width, &out_keys, &out_index)) return NULL;
    PyObject *seq = PySequence_Fast(runs, "runs must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    if (k > MAX_PARTS) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many runs to merge");
        return NULL;
    }
    Py_buffer views[4 * MAX_PARTS + 2];
    int got = 0, failed = 0;
    Part parts[MAX_PARTS];
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < k && !failed; i++) {
        PyObject *run = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *arrays[4];
        Py_ssize_t row_width, lo, hi;
        if (!PyArg_ParseTuple(run, "OOOOnnn", &arrays[0], &arrays[1], &arrays[2], &arrays[3], &row_width, &lo, &hi)) {
            failed = 1;
            break;
        }
        for (int j = 0; j < 4; j++) {
            if (PyObject_GetBuffer(arrays[j], &views[got], PyBUF_SIMPLE) < 0) {
                failed = 1;
                break;
            }
            got++;
        }
        if (failed) break;
        Py_buffer *v = &views[got - 4];
        int64_t n = v[1].len / 8;
        if (lo < 0 || hi > n || lo > hi || row_width < 8 || v[0].len < n * row_width || v[2].len < 8 * n || v[3].len < n) {
            PyErr_SetString(PyExc_ValueError, "a run's arrays do not hold its entries");
            failed = 1;
            break;
        }
        parts[i] = (Part){v[0].buf, v[1].buf, v[2].buf, v[3].buf, row_width, lo, lo, hi, total};
        total += hi - lo;
    }
    if (!failed) {
        if (PyObject_GetBuffer(out_keys, &views[got], PyBUF_WRITABLE) < 0) failed = 1;
        else got++;
    }
    if (!failed) {
        if (PyObject_GetBuffer(out_index, &views[got], PyBUF_WRITABLE) < 0) failed = 1;
        else got++;
    }
    if (!failed && (views[got - 2].len < total * width || views[got - 1].len < 8 * total)) {
        PyErr_SetString(PyExc_ValueError, "the output arrays do not hold every entry");
        failed = 1;
    }
    for (Py_ssize_t i = 0; i < k && !failed; i++)
        for (int64_t r = parts[i].at; r < parts[i].hi; r++)
            if (parts[i].user[r] < 0 || parts[i].user[r] > width || parts[i].user[r] > parts[i].width) {
                PyErr_SetString(PyExc_ValueError, "a user key longer than its row");
                failed = 1;
                break;
            }
    int64_t chosen = 0;
    if (!failed) {
        uint8_t *keys = views[got - 2].buf;
        int64_t *index = views[got - 1].buf;
        Py_BEGIN_ALLOW_THREADS
        const Part *previous = NULL;
        int64_t previous_row = 0;
        for (;;) {
            Part *next = NULL;
            for (Py_ssize_t i = 0; i < k; i++)
                if (parts[i].at < parts[i].hi && (next == NULL || before(&parts[i], next))) next = &parts[i];
            if (next == NULL) break;
            int64_t row = next->at, length = next->user[row];
            const uint8_t *key = next->keys + row * next->width;
            int repeated = previous != NULL && previous->user[previous_row] == length &&
                           memcmp(previous->keys + previous_row * previous->width, key, (size_t)length) == 0;
            if (!repeated && next->kind[row] == 1) {
                memcpy(keys + chosen * width, key, (size_t)length);
                index[chosen++] = next->base + row - next->lo;
            }
            previous = next;
            previous_row = row;
            next->at++;
        }
        Py_END_ALLOW_THREADS
    }
    release(views, got);
    Py_DECREF(seq);
    if (failed) return NULL;
    return PyLong_FromLongLong((long long)chosen);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, starts, lengths) -> (entries, longest internal key), or None where the NumPy reader must read the run"},
    {"fill", fill, METH_VARARGS,
     "fill(data, starts, lengths, width, keys, user, value_start, value_end, sequence, kind, repeat): the entries written "
     "out"},
    {"merge", merge, METH_VARARGS,
     "merge(runs, width, keys, index) -> entries: runs of (keys, user, sequence, kind, row width, lo, hi) merged in "
     "RocksDB's order; each live key's newest entry, a put, written to keys (rows of width bytes) and index (its place "
     "among the runs' entries, run after run)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sst_walk", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_sst_walk(void) { return PyModule_Create(&module); }
