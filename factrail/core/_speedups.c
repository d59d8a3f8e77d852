/* Optional C kernels for the engine's per-item loops (factrail.core._speedups).
 *
 * Every function here is output-identical to the Python it stands in for (units.py,
 * candidate_tokens.py, cover.py, facts.py, tokens.py, redact): same matches, same insertion
 * order of sets and dicts, same float operations in the same order (built with
 * -ffp-contract=off, so no fused multiply-add changes a bit). The Python is the definition;
 * kernels.py decides whether these are used. Only the public C API is used (setup.py fails the
 * build on an undeclared function). Each kernel but redaction's `anchors_in` is kept because it
 * saves at least 5% of the cold compaction of a 1 MB real session (bench/kernels_real.py,
 * docs/native-layer.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

/* ---- objects the cyclic GC need not visit ------------------------------------------------
 * A tuple or frozenset holding only strs, ints, bools and floats can never be part of a
 * reference cycle: it cannot change and none of its items refers to anything. CPython itself
 * untracks such tuples, but only once a collection has visited them; the engine makes tens of
 * thousands per compaction (token sets, spans, counts) and keeps many in a session's analysis,
 * so every collection would walk them. `settled` untracks such a tuple at birth (returns `o`);
 * `frozen` makes a frozenset untracked when its maker saw every item is such. */

static inline int
is_atomic(PyObject *o)
{
    return PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || PyBool_Check(o) ||
           PyFloat_CheckExact(o);
}

static PyObject *
settled(PyObject *o)
{
    if (o == NULL || !PyTuple_CheckExact(o) || !PyObject_GC_IsTracked(o))
        return o;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(o); k++)
        if (!is_atomic(PyTuple_GET_ITEM(o, k)))
            return o;
    PyObject_GC_UnTrack(o);
    return o;
}

/* frozenset(items), untracked when `atomic` (its maker saw only strs, ints, bools, floats). */
static PyObject *
frozen(PyObject *items, int atomic)
{
    PyObject *o = PyFrozenSet_New(items);
    if (o != NULL && atomic && PyObject_GC_IsTracked(o))
        PyObject_GC_UnTrack(o);
    return o;
}

/* PyUnicode_READY: a no-op (and deprecated) since 3.12. */
static inline int
ready(PyObject *s)
{
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(s);
#else
    (void)s;
    return 0;
#endif
}

/* ---- candidate tokens ------------------------------------------------------------------
 * _DIG [A-Za-z0-9][A-Za-z0-9_.:/@#-]{5,} and _WRD [A-Za-z_][A-Za-z0-9_./-]{7,}, scanned with
 * re.finditer semantics (leftmost, greedy, non-overlapping), then kept as `toks` keeps them:
 * rstrip(".:,"), at least 6 (8) chars, a digit (a word: one of / _ . and no digit). */

static inline int
is_alnum_ascii(Py_UCS4 c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static inline int
is_head(Py_UCS4 c, int word)
{
    if (word)
        return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    return is_alnum_ascii(c);
}

static inline int
is_body(Py_UCS4 c, int word)
{
    if (is_alnum_ascii(c) || c == '_' || c == '.' || c == '/' || c == '-')
        return 1;
    return !word && (c == ':' || c == '@' || c == '#');
}

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    Py_ssize_t pos;
} Text;

static int
text_init(Text *t, PyObject *s)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.200s", Py_TYPE(s)->tp_name);
        return -1;
    }
    if (ready(s) < 0)
        return -1;
    t->kind = PyUnicode_KIND(s);
    t->data = PyUnicode_DATA(s);
    t->n = PyUnicode_GET_LENGTH(s);
    t->pos = 0;
    return 0;
}

/* The next kept token of one regex (`word`: _WRD, else _DIG) from t->pos: 1 with its span
 * [*start, *end) after rstrip(".:,"), 0 when none is left.
 *
 * A head char followed by fewer body chars than the regex needs fails, and so does every
 * position inside that run (a shorter run) and the char ending it (not a body char, hence not
 * a head char): the scan resumes after it. A match ends where its run ends. */
static int
next_token(Text *t, int word, Py_ssize_t *start, Py_ssize_t *end)
{
    const int kind = t->kind;
    const void *data = t->data;
    const Py_ssize_t n = t->n;
    const Py_ssize_t body = word ? 7 : 5;
    const Py_ssize_t least = word ? 8 : 6;
    Py_ssize_t p = t->pos;
    while (p < n) {
        if (!is_head(PyUnicode_READ(kind, data, p), word)) {
            p++;
            continue;
        }
        Py_ssize_t q = p + 1;
        while (q < n && is_body(PyUnicode_READ(kind, data, q), word))
            q++;
        if (q - p - 1 < body) {
            p = q + 1;
            continue;
        }
        Py_ssize_t e = q;
        for (;;) { /* the head is never one of .:, so this stops inside the match */
            Py_UCS4 c = PyUnicode_READ(kind, data, e - 1);
            if (c != '.' && c != ':' && c != ',')
                break;
            e--;
        }
        const Py_ssize_t m = p;
        p = q;
        if (e - m < least)
            continue;
        int digit = 0, mark = 0;
        for (Py_ssize_t k = m; k < e; k++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, k);
            if (c >= '0' && c <= '9')
                digit = 1;
            else if (c == '/' || c == '_' || c == '.')
                mark = 1;
        }
        if (word ? (!mark || digit) : !digit)
            continue;
        t->pos = q;
        *start = m;
        *end = e;
        return 1;
    }
    t->pos = n;
    return 0;
}

/* A new list of fn(item) for each item of the sequence `items` (fn returns a new reference,
 * or NULL with an exception set). */
static PyObject *
map_items(PyObject *items, PyObject *(*fn)(PyObject *))
{
    PyObject *seq = PySequence_Fast(items, "expected a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *v = fn(PySequence_Fast_GET_ITEM(seq, i));
            if (v == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i, v);
        }
    }
    Py_DECREF(seq);
    return out;
}

static int
append_index(PyObject *list, Py_ssize_t value)
{
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL)
        return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* token_scan(text) -> (occurrences, digit_starts, digit_found, word_starts, word_found), the
 * last four as tuples */
static PyObject *
sp_token_scan(PyObject *Py_UNUSED(mod), PyObject *s)
{
    Text t;
    if (text_init(&t, s) < 0)
        return NULL;
    PyObject *occ = PyDict_New();
    PyObject *lists[4] = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0)};
    if (occ == NULL || !lists[0] || !lists[1] || !lists[2] || !lists[3])
        goto fail;
    for (int word = 0; word < 2; word++) {
        PyObject *starts = lists[2 * word], *found = lists[2 * word + 1];
        Py_ssize_t a, b;
        t.pos = 0;
        while (next_token(&t, word, &a, &b)) {
            PyObject *tok = PyUnicode_Substring(s, a, b);
            if (tok == NULL)
                goto fail;
            PyObject *hit = PyDict_GetItemWithError(occ, tok);
            PyObject *entry;
            if (hit != NULL) {
                Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(hit, 0));
                PyObject *more = count < 0 ? NULL : PyLong_FromSsize_t(count + 1);
                entry = more == NULL ? NULL : settled(PyTuple_Pack(2, more, PyTuple_GET_ITEM(hit, 1)));
                Py_XDECREF(more);
            }
            else if (PyErr_Occurred()) {
                entry = NULL;
            }
            else {
                entry = settled(Py_BuildValue("(in)", 1, a));
            }
            if (entry == NULL || PyDict_SetItem(occ, tok, entry) < 0 ||
                append_index(starts, a) < 0 || PyList_Append(found, tok) < 0) {
                Py_XDECREF(entry);
                Py_DECREF(tok);
                goto fail;
            }
            Py_DECREF(entry);
            Py_DECREF(tok);
        }
    }
    /* Frozen as tuples of strs and ints: the collector never walks them. */
    PyObject *fields[4];
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        fields[i] = settled(PyList_AsTuple(lists[i]));
        ok = ok && fields[i] != NULL;
        Py_DECREF(lists[i]);
    }
    if (!ok) {
        for (int i = 0; i < 4; i++)
            Py_XDECREF(fields[i]);
        Py_DECREF(occ);
        return NULL;
    }
    return Py_BuildValue("(NNNNN)", occ, fields[0], fields[1], fields[2], fields[3]);
fail:
    Py_XDECREF(occ);
    for (int i = 0; i < 4; i++)
        Py_XDECREF(lists[i]);
    return NULL;
}

/* ---- slices of a token scan ---------------------------------------------------------- */

/* bisect.bisect_left over a list of ints. */
static int
bisect_left(PyObject *starts, Py_ssize_t x, Py_ssize_t *at)
{
    if (!PyTuple_Check(starts)) {
        PyErr_SetString(PyExc_TypeError, "token scan starts must be a tuple");
        return -1;
    }
    Py_ssize_t lo = 0, hi = PyTuple_GET_SIZE(starts);
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GET_ITEM(starts, mid));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return 0;
}

static const char *const SCAN_FIELDS[4] = {"digit_starts", "digit_found", "word_starts",
                                           "word_found"};

typedef struct {
    PyObject *f[4]; /* digit_starts, digit_found, word_starts, word_found */
} Scan;

static int
scan_init(Scan *sc, PyObject *scan)
{
    for (int i = 0; i < 4; i++)
        sc->f[i] = NULL;
    for (int i = 0; i < 4; i++) {
        sc->f[i] = PyObject_GetAttrString(scan, SCAN_FIELDS[i]);
        if (sc->f[i] == NULL)
            return -1;
        if (!PyTuple_Check(sc->f[i])) {
            PyErr_Format(PyExc_TypeError, "%s must be a tuple", SCAN_FIELDS[i]);
            return -1;
        }
    }
    return 0;
}

static void
scan_clear(Scan *sc)
{
    for (int i = 0; i < 4; i++)
        Py_CLEAR(sc->f[i]);
}

/* TokenScan.between: a set from the digit slice, updated with the word slice, frozen. */
static PyObject *
scan_between(Scan *sc, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *out = PySet_New(NULL);
    if (out == NULL)
        return NULL;
    int atomic = 1;
    for (int w = 0; w < 2; w++) {
        PyObject *starts = sc->f[2 * w], *found = sc->f[2 * w + 1];
        Py_ssize_t lo, hi;
        if (bisect_left(starts, start, &lo) < 0 || bisect_left(starts, end, &hi) < 0)
            goto fail;
        if (hi > PyTuple_GET_SIZE(found))
            hi = PyTuple_GET_SIZE(found);
        for (Py_ssize_t k = lo; k < hi; k++) {
            PyObject *item = PyTuple_GET_ITEM(found, k);
            atomic = atomic && is_atomic(item);
            if (PySet_Add(out, item) < 0)
                goto fail;
        }
    }
    PyObject *got = frozen(out, atomic);
    Py_DECREF(out);
    return got;
fail:
    Py_DECREF(out);
    return NULL;
}

/* _span_tokens(middle, spans, chosen, scan, offset, tokens) */
static PyObject *
sp_span_tokens(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "span_tokens(middle, spans, chosen, scan, offset, tokens)");
        return NULL;
    }
    PyObject *middle = args[0], *tokens = args[5];
    Py_ssize_t offset = PyLong_AsSsize_t(args[4]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    PyObject *spans = PySequence_Fast(args[1], "spans must be a sequence");
    if (spans == NULL)
        return NULL;
    Scan sc;
    PyObject *out = NULL, *it = NULL, *idx = NULL;
    if (scan_init(&sc, args[3]) < 0)
        goto done;
    it = PyObject_GetIter(args[2]);
    out = PyList_New(0);
    if (it == NULL || out == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(spans);
    while ((idx = PyIter_Next(it)) != NULL) {
        Py_ssize_t i = PyLong_AsSsize_t(idx);
        Py_CLEAR(idx);
        if (i == -1 && PyErr_Occurred())
            goto fail;
        if (i < 0 || i >= n) {
            PyErr_SetString(PyExc_IndexError, "span index out of range");
            goto fail;
        }
        PyObject *span = PySequence_Fast_GET_ITEM(spans, i);
        Py_ssize_t a, b;
        PyObject *clean;
        if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != 3) {
            PyErr_SetString(PyExc_TypeError, "a span is a (start, end, clean) tuple");
            goto fail;
        }
        a = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
        if (a == -1 && PyErr_Occurred())
            goto fail;
        b = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
        if (b == -1 && PyErr_Occurred())
            goto fail;
        clean = PyTuple_GET_ITEM(span, 2);
        int is_clean = PyObject_IsTrue(clean);
        if (is_clean < 0)
            goto fail;
        PyObject *got;
        if (is_clean) {
            got = scan_between(&sc, offset + a, offset + b);
        }
        else {
            PyObject *piece = PySequence_GetSlice(middle, a, b);
            got = piece == NULL ? NULL : PyObject_CallOneArg(tokens, piece);
            Py_XDECREF(piece);
        }
        if (got == NULL)
            goto fail;
        int rc = PyList_Append(out, got);
        Py_DECREF(got);
        if (rc < 0)
            goto fail;
    }
    if (PyErr_Occurred())
        goto fail;
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_XDECREF(it);
    scan_clear(&sc);
    Py_DECREF(spans);
    return out;
}

/* ---- cover worths -------------------------------------------------------------------- */

/* values.get(key, 0.0) as a double (a dict looked up directly, any other mapping by `get`). */
static int
value_of(PyObject *values, PyObject *key, double *out)
{
    PyObject *v;
    if (PyDict_CheckExact(values)) {
        v = PyDict_GetItemWithError(values, key);
        if (v == NULL) {
            if (PyErr_Occurred())
                return -1;
            *out = 0.0;
            return 0;
        }
        Py_INCREF(v);
    }
    else {
        PyObject *zero = PyFloat_FromDouble(0.0);
        if (zero == NULL)
            return -1;
        v = PyObject_CallMethod(values, "get", "OO", key, zero);
        Py_DECREF(zero);
        if (v == NULL)
            return -1;
    }
    double d = PyFloat_AsDouble(v);
    Py_DECREF(v);
    if (d == -1.0 && PyErr_Occurred())
        return -1;
    *out = d;
    return 0;
}

/* A sum of floats as `sum()` makes it (the value maps hold floats). CPython 3.11 adds left to
 * right from 0 (0 + x is 0.0 + x). 3.12 and later take 0 + x first, then add each item with
 * Neumaier's compensation, and add the compensation at the end when it is non-zero and finite
 * (builtin_sum_impl in Python/bltinmodule.c). */
typedef struct {
    double hi; /* the running sum */
    double lo; /* the compensation (3.12 on) */
    int any;   /* an item was added */
} FloatSum;

static inline void
fsum_add(FloatSum *s, double x)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (!s->any) {
        s->hi = 0.0 + x;
        s->any = 1;
        return;
    }
    const double t = s->hi + x;
    if (fabs(s->hi) >= fabs(x))
        s->lo += (s->hi - t) + x;
    else
        s->lo += (x - t) + s->hi;
    s->hi = t;
#else
    s->hi += x;
    s->any = 1;
#endif
}

static inline double
fsum_value(const FloatSum *s)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (s->lo != 0.0 && isfinite(s->lo))
        return s->hi + s->lo;
#endif
    return s->hi;
}

/* sum(values.get(t, 0.0) for t in tokens if t not in seen); `seen` may be NULL. */
static int
worth_sum(PyObject *tokens, PyObject *values, PyObject *seen, double *out)
{
    PyObject *it = PyObject_GetIter(tokens), *t;
    if (it == NULL)
        return -1;
    FloatSum acc = {0.0, 0.0, 0};
    while ((t = PyIter_Next(it)) != NULL) {
        int skip = seen == NULL ? 0 : PySet_Contains(seen, t);
        double v = 0.0;
        if (skip < 0 || (!skip && value_of(values, t, &v) < 0)) {
            Py_DECREF(t);
            Py_DECREF(it);
            return -1;
        }
        Py_DECREF(t);
        if (!skip)
            fsum_add(&acc, v);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return -1;
    *out = fsum_value(&acc);
    return 0;
}

static PyObject *
sp_first_worths(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "first_worths(tokens, chars, values)");
        return NULL;
    }
    PyObject *toks = PySequence_Fast(args[0], "tokens must be a sequence");
    if (toks == NULL)
        return NULL;
    PyObject *chars = PySequence_Fast(args[1], "chars must be a sequence");
    if (chars == NULL) {
        Py_DECREF(toks);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(toks);
    if (PySequence_Fast_GET_SIZE(chars) != n) {
        PyErr_SetString(PyExc_ValueError, "zip() arguments differ in length");
        goto done;
    }
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(toks, i);
        int any = PyObject_IsTrue(t);
        double w = 0.0;
        if (any < 0)
            goto fail;
        if (any) {
            long long c = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(chars, i));
            if (c == -1 && PyErr_Occurred())
                goto fail;
            if (worth_sum(t, args[2], NULL, &w) < 0)
                goto fail;
            if (c + 1 == 0) {
                PyErr_SetString(PyExc_ZeroDivisionError, "division by zero");
                goto fail;
            }
            w = w / (double)(c + 1);
        }
        PyObject *f = PyFloat_FromDouble(w);
        if (f == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, f);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_DECREF(toks);
    Py_DECREF(chars);
    return out;
}

/* ---- lazy greedy cover --------------------------------------------------------------- */

typedef struct {
    double w;
    Py_ssize_t i;
} Entry;

/* The heap's order: more worth first, ties to the lower index (heapq on (-worth, i)). */
static inline int
before(Entry a, Entry b)
{
    return a.w > b.w || (a.w == b.w && a.i < b.i);
}

static void
sift_down(Entry *h, Py_ssize_t n, Py_ssize_t k)
{
    Entry e = h[k];
    for (;;) {
        Py_ssize_t c = 2 * k + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(h[c + 1], h[c]))
            c++;
        if (!before(h[c], e))
            break;
        h[k] = h[c];
        k = c;
    }
    h[k] = e;
}

static void
sift_up(Entry *h, Py_ssize_t k)
{
    Entry e = h[k];
    while (k > 0) {
        Py_ssize_t p = (k - 1) / 2;
        if (!before(e, h[p]))
            break;
        h[k] = h[p];
        k = p;
    }
    h[k] = e;
}

static int
item_index(PyObject *seq, Py_ssize_t i, PyObject **out)
{
    if (i < 0 || i >= PySequence_Fast_GET_SIZE(seq)) {
        PyErr_SetString(PyExc_IndexError, "candidate index out of range");
        return -1;
    }
    *out = PySequence_Fast_GET_ITEM(seq, i);
    return 0;
}

/* cover(tokens, chars, values, first, among, covered, room) -> picks */
static PyObject *
sp_cover(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "cover(tokens, chars, values, first, among, covered, room)");
        return NULL;
    }
    long long room = PyLong_AsLongLong(args[6]);
    if (room == -1 && PyErr_Occurred())
        return NULL;
    PyObject *seqs[5] = {NULL, NULL, NULL, NULL, NULL}; /* tokens chars values first among */
    PyObject *seen = NULL, *picks = NULL;
    Entry *heap = NULL;
    for (int k = 0; k < 5; k++) {
        seqs[k] = PySequence_Fast(args[k], "cover takes sequences");
        if (seqs[k] == NULL)
            goto fail;
    }
    PyObject *tokens = seqs[0], *chars = seqs[1], *values = seqs[2], *first = seqs[3];
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seqs[4]), n = 0;
    heap = PyMem_New(Entry, m > 0 ? m : 1);
    seen = PySet_New(args[5]);
    picks = PyList_New(0);
    if (heap == NULL || seen == NULL || picks == NULL) {
        if (heap == NULL)
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seqs[4], k));
        PyObject *t, *f;
        if ((i == -1 && PyErr_Occurred()) || item_index(tokens, i, &t) < 0)
            goto fail;
        int any = PyObject_IsTrue(t);
        if (any < 0)
            goto fail;
        if (!any)
            continue;
        if (item_index(first, i, &f) < 0)
            goto fail;
        double w = PyFloat_AsDouble(f);
        if (w == -1.0 && PyErr_Occurred())
            goto fail;
        heap[n].w = w;
        heap[n].i = i;
        n++;
    }
    for (Py_ssize_t k = n / 2 - 1; k >= 0; k--)
        sift_down(heap, n, k);
    long long used = 0;
    while (n > 0) {
        Entry top = heap[0];
        heap[0] = heap[--n];
        sift_down(heap, n, 0);
        PyObject *c, *t, *v;
        if (item_index(chars, top.i, &c) < 0)
            goto fail;
        long long cost = PyLong_AsLongLong(c);
        if (cost == -1 && PyErr_Occurred())
            goto fail;
        cost += 1;
        if (used + cost > room) /* `used` only grows: it never fits */
            continue;
        if (item_index(tokens, top.i, &t) < 0 || item_index(values, top.i, &v) < 0)
            goto fail;
        double acc;
        if (worth_sum(t, v, seen, &acc) < 0)
            goto fail;
        if (cost == 0) {
            PyErr_SetString(PyExc_ZeroDivisionError, "division by zero");
            goto fail;
        }
        double worth = acc / (double)cost;
        if (worth <= 0)
            continue;
        if (n > 0 && worth < heap[0].w - 1e-12) {
            heap[n].w = worth;
            heap[n].i = top.i;
            sift_up(heap, n++);
            continue;
        }
        if (append_index(picks, top.i) < 0)
            goto fail;
        used += cost;
        PyObject *it = PyObject_GetIter(t), *tok;
        if (it == NULL)
            goto fail;
        while ((tok = PyIter_Next(it)) != NULL) {
            int rc = PySet_Add(seen, tok);
            Py_DECREF(tok);
            if (rc < 0)
                break;
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(picks);
done:
    for (int k = 0; k < 5; k++)
        Py_XDECREF(seqs[k]);
    Py_XDECREF(seen);
    PyMem_Free(heap);
    return picks;
}

/* ---- fact patterns on ASCII text (facts.PATTERNS, FACT_TOKEN) ------------------------------
 * On ASCII text `\w` is [A-Za-z0-9_], `\d` [0-9], `\s` the chars str.isspace() takes (space,
 * \t \n \v \f \r and \x1c-\x1f), `\b` a change of wordness, and IGNORECASE ASCII case folding;
 * elsewhere the Unicode rules differ, so these kernels refuse any text with a non-ASCII char.
 * Most patterns are decided on maximal word runs: a `\b`-delimited keyword is a whole run. */

static inline int
is_word(unsigned char c)
{
    return is_alnum_ascii(c) || c == '_';
}

static inline int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline int
is_alpha(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static inline int
is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static inline unsigned char
lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* [\w.@-]: a char of a `/`-path's segments. */
static inline int
is_seg(unsigned char c)
{
    return is_word(c) || c == '.' || c == '@' || c == '-';
}

/* A char that ends a drive-letter path ([^\s"'<>] does not take it). */
static inline int
ends_path(unsigned char c)
{
    return is_space(c) || c == '"' || c == '\'' || c == '<' || c == '>';
}

/* Whether s[0:len] equals the lower-case `word` under ASCII case folding. */
static int
ci_equal(const unsigned char *s, Py_ssize_t len, const char *word)
{
    for (Py_ssize_t k = 0; k < len; k++)
        if (word[k] == '\0' || lower(s[k]) != (unsigned char)word[k])
            return 0;
    return word[len] == '\0';
}

/* Whether `word` (lower case) starts s[0:n] under case folding and a non-word char (or the
 * end) follows it. */
static int
ci_word_at(const unsigned char *s, Py_ssize_t n, const char *word)
{
    Py_ssize_t len = (Py_ssize_t)strlen(word);
    return len <= n && ci_equal(s, len, word) && (len == n || !is_word(s[len]));
}

enum {
    K_ERROR = 1 << 0,   /* p0's single words */
    K_NOT = 1 << 1,     /* `not` of `not found` */
    K_FOUND = 1 << 2,
    K_TIME = 1 << 3,    /* `time`/`timed` of `timed? ?out` */
    K_OUT = 1 << 4,
    K_HTTP = 1 << 5,    /* p2 */
    K_STATUS = 1 << 6,
    K_COUNTER = 1 << 7, /* p7 */
    K_EXT = 1 << 8,     /* p10 */
    K_RECEIPT = 1 << 9, /* p11 */
};

typedef struct {
    const char *word;
    Py_ssize_t len;
    int roles;
} Keyword;

#define KW(w, roles) {w, sizeof(w) - 1, roles}
static const Keyword KEYWORDS[] = {
    KW("error", K_ERROR), KW("errors", K_ERROR), KW("failed", K_ERROR | K_COUNTER),
    KW("failure", K_ERROR), KW("fail", K_ERROR | K_COUNTER), KW("exception", K_ERROR),
    KW("traceback", K_ERROR), KW("denied", K_ERROR), KW("refused", K_ERROR),
    KW("invalid", K_ERROR), KW("timeout", K_ERROR), KW("timedout", K_ERROR),
    KW("fatal", K_ERROR), KW("panic", K_ERROR), KW("warning", K_ERROR),
    KW("not", K_NOT), KW("found", K_FOUND), KW("time", K_TIME), KW("timed", K_TIME),
    KW("out", K_OUT), KW("http", K_HTTP), KW("status", K_STATUS),
    KW("pid", K_COUNTER), KW("port", K_COUNTER), KW("exit", K_COUNTER), KW("rc", K_COUNTER),
    KW("code", K_COUNTER), KW("size", K_COUNTER), KW("bytes", K_COUNTER),
    KW("pass", K_COUNTER), KW("passed", K_COUNTER), KW("test", K_COUNTER),
    KW("tests", K_COUNTER), KW("total", K_COUNTER), KW("count", K_COUNTER),
    KW("message_id", K_RECEIPT), KW("ticket", K_RECEIPT), KW("confirm", K_RECEIPT),
    KW("confirmed", K_RECEIPT), KW("sent", K_RECEIPT), KW("delivered", K_RECEIPT),
    KW("created", K_RECEIPT), KW("updated", K_RECEIPT), KW("deleted", K_RECEIPT),
    KW("order", K_RECEIPT), KW("transaction", K_RECEIPT), KW("commit", K_RECEIPT),
    KW("js", K_EXT), KW("ts", K_EXT), KW("jsx", K_EXT), KW("tsx", K_EXT), KW("cjs", K_EXT),
    KW("cts", K_EXT), KW("mjs", K_EXT), KW("mts", K_EXT), KW("cjsx", K_EXT),
    KW("ctsx", K_EXT), KW("mjsx", K_EXT), KW("mtsx", K_EXT), KW("py", K_EXT),
    KW("json", K_EXT), KW("yml", K_EXT), KW("yaml", K_EXT), KW("md", K_EXT),
    KW("toml", K_EXT), KW("txt", K_EXT), KW("log", K_EXT), KW("rs", K_EXT), KW("go", K_EXT),
    KW("sh", K_EXT), KW("ps1", K_EXT), KW("cmd", K_EXT), KW("lock", K_EXT), KW("sql", K_EXT),
};
#undef KW
#define KEYWORD_MAX 11

/* The roles of the word run s[0:len] (0 when it is no keyword). */
static int
roles_of(const unsigned char *s, Py_ssize_t len)
{
    if (len > KEYWORD_MAX)
        return 0;
    unsigned char low[KEYWORD_MAX];
    for (Py_ssize_t k = 0; k < len; k++)
        low[k] = lower(s[k]);
    for (size_t k = 0; k < sizeof(KEYWORDS) / sizeof(KEYWORDS[0]); k++)
        if (KEYWORDS[k].len == len && memcmp(low, KEYWORDS[k].word, (size_t)len) == 0)
            return KEYWORDS[k].roles;
    return 0;
}

/* The end of the maximal run from `k` of chars in [\s:=] (also `#` when `hash`). */
static Py_ssize_t
skip_sep(const unsigned char *s, Py_ssize_t n, Py_ssize_t k, int hash)
{
    while (k < n && (is_space(s[k]) || s[k] == ':' || s[k] == '=' || (hash && s[k] == '#')))
        k++;
    return k;
}

/* p2 after a whole-word `HTTP` ending at b: in the maximal run of [\s/\d.] from b, three digits
 * followed by a non-word char (or the end). */
static int
http_code(const unsigned char *s, Py_ssize_t n, Py_ssize_t b)
{
    int digits = 0;
    for (Py_ssize_t k = b; k < n; k++) {
        unsigned char c = s[k];
        if (is_digit(c)) {
            if (++digits >= 3 && (k + 1 == n || !is_word(s[k + 1])))
                return 1;
        }
        else if (is_space(c) || c == '/' || c == '.')
            digits = 0;
        else
            return 0;
    }
    return 0;
}

/* Whether three digits start at k and a non-word char (or the end) follows them. */
static int
three_digits(const unsigned char *s, Py_ssize_t n, Py_ssize_t k)
{
    return k + 3 <= n && is_digit(s[k]) && is_digit(s[k + 1]) && is_digit(s[k + 2]) &&
           (k + 3 == n || !is_word(s[k + 3]));
}

/* p3: a drive-letter path, or a `/`-path of two segments after the start or [\s"'(=]. */
static int
has_path(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t q = 0; q < n; q++) {
        unsigned char c = s[q];
        if (c == ':' && q >= 1 && is_alpha(s[q - 1]) && q + 2 < n &&
            (s[q + 1] == '/' || s[q + 1] == '\\') && !ends_path(s[q + 2]))
            return 1;
        if (c == '/') {
            unsigned char before = q == 0 ? ' ' : s[q - 1];
            if (!(is_space(before) || before == '"' || before == '\'' || before == '(' ||
                  before == '='))
                continue;
            Py_ssize_t k = q + 1;
            while (k < n && is_seg(s[k]))
                k++;
            if (k > q + 1 && k + 1 < n && s[k] == '/' && is_seg(s[k + 1]))
                return 1;
        }
    }
    return 0;
}

static const char *const QUANTITIES[] = {"ms",   "kb",    "mb",   "gb",   "bytes",
                                         "tokens", "lines", "line", "files", "file"};

/* p8: a digit at a word start, the maximal [\d,.] run after it, one optional \s, then a unit
 * word, or a `%` no word char follows. Every start in one [\d,.] run shares its end. */
static int
has_quantity(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (!(is_digit(s[i]) || s[i] == '.' || s[i] == ',')) {
            i++;
            continue;
        }
        int start = 0;
        Py_ssize_t e = i;
        for (; e < n && (is_digit(s[e]) || s[e] == '.' || s[e] == ','); e++)
            if (is_digit(s[e]) && (e == i ? (i == 0 || !is_word(s[i - 1])) : !is_digit(s[e - 1])))
                start = 1;
        i = e;
        if (!start)
            continue;
        if (e < n && is_space(s[e]))
            e++;
        if (e < n && s[e] == '%' && (e + 1 == n || !is_word(s[e + 1])))
            return 1;
        for (size_t k = 0; k < sizeof(QUANTITIES) / sizeof(QUANTITIES[0]); k++)
            if (ci_word_at(s + e, n - e, QUANTITIES[k]))
                return 1;
    }
    return 0;
}

/* How many of the 12 fact patterns match the ASCII text s[0:n] (facts.fact_score). */
static int
fact_score_ascii(const unsigned char *s, Py_ssize_t n)
{
    int hit[12] = {0};
    Py_ssize_t prev_end = -2; /* the previous word run's end, and its roles */
    int prev_roles = 0, chain = 0, short_chain = 0;
    Py_ssize_t a = 0;
    while (a < n) {
        if (!is_word(s[a])) {
            a++;
            continue;
        }
        Py_ssize_t b = a, digits = 0, hex_letters = 0;
        for (; b < n && is_word(s[b]); b++) {
            unsigned char c = lower(s[b]);
            if (is_digit(c))
                digits++;
            else if (c >= 'a' && c <= 'f')
                hex_letters++;
        }
        const Py_ssize_t len = b - a;
        const int roles = roles_of(s + a, len);
        const int spaced = prev_end + 1 == a && s[prev_end] == ' ';
        const int dotted = prev_end + 1 == a && s[prev_end] == '.';
        /* p0 */
        if ((roles & K_ERROR) || ((roles & K_FOUND) && (prev_roles & K_NOT) && spaced) ||
            ((roles & K_OUT) && (prev_roles & K_TIME) && spaced))
            hit[0] = 1;
        for (Py_ssize_t k = a; !hit[0] && k + 8 < b; k++)
            hit[0] = ci_equal(s + k, 8, "invalid_");
        /* p1 */
        if ((len == 4 && memcmp(s + a, "FAIL", 4) == 0) || (len == 3 && memcmp(s + a, "ERR", 3) == 0))
            hit[1] = 1;
        /* p2 */
        if (((roles & K_HTTP) && http_code(s, n, b)) ||
            ((roles & K_STATUS) && skip_sep(s, n, b, 0) > b &&
             three_digits(s, n, skip_sep(s, n, b, 0))))
            hit[2] = 1;
        /* p4, p6: runs of digit words joined by single dots */
        if (digits == len) {
            chain = dotted && chain > 0 ? chain + 1 : 1;
            short_chain = len > 3 ? 0 : dotted && short_chain > 0 ? short_chain + 1 : 1;
        }
        else {
            chain = short_chain = 0;
        }
        if (chain >= 3)
            hit[4] = 1;
        if (short_chain >= 4)
            hit[6] = 1;
        if (len == 9 && memcmp(s + a, "localhost", 9) == 0 && b < n && s[b] == ':') {
            Py_ssize_t k = b + 1;
            while (k < n && is_digit(s[k]))
                k++;
            if (k > b + 1 && (k == n || !is_word(s[k])))
                hit[6] = 1;
        }
        /* p5 */
        if (len >= 7 && len <= 40 && digits + hex_letters == len && digits > 0 &&
            hex_letters > 0)
            hit[5] = 1;
        /* p7 */
        if ((roles & K_COUNTER) && skip_sep(s, n, b, 0) < n && is_digit(s[skip_sep(s, n, b, 0)]))
            hit[7] = 1;
        /* p9 */
        if (digits == len && len >= 4)
            hit[9] = 1;
        /* p10: a word char earlier in the [\w.-] run of the dot before the extension */
        if ((roles & K_EXT) && a >= 1 && s[a - 1] == '.') {
            Py_ssize_t k = a - 2;
            while (k >= 0 && (s[k] == '.' || s[k] == '-'))
                k--;
            if (k >= 0 && is_word(s[k]))
                hit[10] = 1;
        }
        /* p11 */
        if (roles & K_RECEIPT) {
            Py_ssize_t k = skip_sep(s, n, b, 1);
            if (k > b && k < n && (is_word(s[k]) || s[k] == '-'))
                hit[11] = 1;
        }
        prev_end = b;
        prev_roles = roles;
        a = b;
    }
    hit[3] = has_path(s, n);
    hit[8] = has_quantity(s, n);
    int score = 0;
    for (int k = 0; k < 12; k++)
        score += hit[k];
    return score;
}

/* The fact score of one unit, or -1 when it holds a non-ASCII char. */
static int
unit_score(PyObject *unit, long *out)
{
    if (!PyUnicode_Check(unit)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.200s", Py_TYPE(unit)->tp_name);
        return -1;
    }
    if (ready(unit) < 0)
        return -1;
    *out = PyUnicode_IS_ASCII(unit)
               ? fact_score_ascii(PyUnicode_1BYTE_DATA(unit), PyUnicode_GET_LENGTH(unit))
               : -1;
    return 0;
}

/* fact_score of one unit, or -1 when it is not ASCII */
static PyObject *
score_or_refusal(PyObject *unit)
{
    long score;
    return unit_score(unit, &score) < 0 ? NULL : PyLong_FromLong(score);
}

static PyObject *
sp_fact_scores(PyObject *Py_UNUSED(mod), PyObject *units)
{
    return map_items(units, score_or_refusal);
}

/* The end of the FACT_TOKEN match at i (its alternatives in order), or -1 when none starts
 * there. */
static Py_ssize_t
fact_token_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    const unsigned char c = s[i];
    if (is_alpha(c) && i + 3 < n && s[i + 1] == ':' && (s[i + 2] == '\\' || s[i + 2] == '/') &&
        !ends_path(s[i + 3])) {
        Py_ssize_t k = i + 4;
        while (k < n && !ends_path(s[k]))
            k++;
        return k;
    }
    if (c == '/') {
        /* (?:[\w.@-]+/)+ takes every segment that a `/` ends; the last [\w.@-]+ is the segment
         * after them, or, when none follows, the last of them given back */
        Py_ssize_t pos = i + 1, last = -1, slashes = 0;
        for (;;) {
            Py_ssize_t e = pos;
            while (e < n && is_seg(s[e]))
                e++;
            if (e > pos && e < n && s[e] == '/') {
                slashes++;
                last = e;
                pos = e + 1;
                continue;
            }
            if (e > pos && slashes >= 1)
                return e;
            if (e == pos && slashes >= 2)
                return last;
            break;
        }
    }
    if (!is_word(c) || (i > 0 && is_word(s[i - 1])))
        return -1;
    Py_ssize_t b = i, digits = 0, letters = 0;
    for (; b < n && is_word(s[b]); b++) {
        unsigned char l = lower(s[b]);
        if (is_digit(l))
            digits++;
        else if (l >= 'a' && l <= 'f')
            letters++;
    }
    if (b - i >= 7 && b - i <= 40 && digits + letters == b - i && digits > 0 && letters > 0)
        return b;
    if (!is_digit(c))
        return -1;
    /* \d[\d.,:]*\d\b: the last digit of the [\d.,:] run a non-word char (or the end) follows */
    Py_ssize_t e = i + 1;
    while (e < n && (is_digit(s[e]) || s[e] == '.' || s[e] == ',' || s[e] == ':'))
        e++;
    for (Py_ssize_t m = e - 1; m > i; m--)
        if (is_digit(s[m]) && (m + 1 == n || !is_word(s[m + 1])))
            return m + 1;
    return -1;
}

/* fact_tokens(text): set(FACT_TOKEN.findall(text)) for ASCII text, else None. */
/* Add the FACT_TOKEN matches of the ASCII bytes s[0:n] to `out`, in findall order. */
static int
add_fact_tokens(const unsigned char *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t i = 0;
    while (i < n) {
        Py_ssize_t e = fact_token_at(s, n, i);
        if (e < 0) {
            i++;
            continue;
        }
        PyObject *tok = PyUnicode_FromStringAndSize((const char *)s + i, e - i);
        int rc = tok == NULL ? -1 : PySet_Add(out, tok);
        Py_XDECREF(tok);
        if (rc < 0)
            return -1;
        i = e;
    }
    return 0;
}

/* Add findall(text[a:b]) to `out`, in order (a line the byte scanner cannot read). */
static int
add_found(PyObject *text, Py_ssize_t a, Py_ssize_t b, PyObject *findall, PyObject *out)
{
    PyObject *line = PyUnicode_Substring(text, a, b);
    if (line == NULL)
        return -1;
    PyObject *found = PyObject_CallOneArg(findall, line);
    Py_DECREF(line);
    if (found == NULL)
        return -1;
    PyObject *it = PyObject_GetIter(found);
    Py_DECREF(found);
    if (it == NULL)
        return -1;
    PyObject *tok;
    while ((tok = PyIter_Next(it)) != NULL) {
        int rc = PySet_Add(out, tok);
        Py_DECREF(tok);
        if (rc < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* fact_tokens(text, findall): set(findall(text)) for findall = FACT_TOKEN.findall, built in
 * findall's order. No match holds a newline, and a newline stands for the start or the end of the
 * text to \b, so the matches of the text are those of its lines in turn: ASCII lines are scanned
 * here, any other line by `findall` itself. */
/* Whether text[a:b] holds a mark phrase (marks.has_mark_phrase): "[factrail omitted " or
 * "compaction truncated ". */
static int
has_mark_phrase(int kind, const void *data, Py_ssize_t a, Py_ssize_t b)
{
    static const char *const phrases[2] = {"[factrail omitted ", "compaction truncated "};
    for (int p = 0; p < 2; p++) {
        const char *w = phrases[p];
        const Py_ssize_t len = (Py_ssize_t)strlen(w);
        for (Py_ssize_t i = a; i + len <= b; i++) {
            Py_ssize_t k = 0;
            while (k < len && PyUnicode_READ(kind, data, i + k) == (Py_UCS4)(unsigned char)w[k])
                k++;
            if (k == len)
                return 1;
        }
    }
    return 0;
}

static PyObject *
sp_fact_tokens(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "fact_tokens(text, findall[, is_mark])");
        return NULL;
    }
    PyObject *text = args[0], *findall = args[1];
    PyObject *is_mark = nargs == 3 && args[2] != Py_None ? args[2] : NULL;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.200s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!PyCallable_Check(findall) || (is_mark != NULL && !PyCallable_Check(is_mark))) {
        PyErr_SetString(PyExc_TypeError, "findall and is_mark must be callable");
        return NULL;
    }
    if (ready(text) < 0)
        return NULL;
    PyObject *out = PySet_New(NULL);
    if (out == NULL)
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text) && is_mark == NULL) {
        if (add_fact_tokens(PyUnicode_1BYTE_DATA(text), n, out) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        return out;
    }
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    unsigned char *buf = NULL;
    Py_ssize_t room = 0;
    Py_ssize_t a = 0;
    while (a <= n) {
        Py_ssize_t b = a;
        int ascii = 1;
        while (b < n) {
            Py_UCS4 c = PyUnicode_READ(kind, data, b);
            if (c == '\n')
                break;
            if (c > 127)
                ascii = 0;
            b++;
        }
        int rc = 0;
        if (is_mark != NULL && has_mark_phrase(kind, data, a, b)) {
            PyObject *line = PyUnicode_Substring(text, a, b);
            PyObject *hit = line == NULL ? NULL : PyObject_CallOneArg(is_mark, line);
            Py_XDECREF(line);
            int skip = hit == NULL ? -1 : PyObject_IsTrue(hit);
            Py_XDECREF(hit);
            if (skip < 0) {
                rc = -1;
                goto done_line;
            }
            if (skip)
                goto next_line;
        }
        if (!ascii) {
            rc = add_found(text, a, b, findall, out);
        }
        else if (kind == PyUnicode_1BYTE_KIND) {
            rc = add_fact_tokens((const unsigned char *)data + a, b - a, out);
        }
        else {
            if (b - a > room) {
                unsigned char *grown = PyMem_Realloc(buf, (size_t)(b - a));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    rc = -1;
                    goto done_line;
                }
                buf = grown;
                room = b - a;
            }
            for (Py_ssize_t k = a; k < b; k++)
                buf[k - a] = (unsigned char)PyUnicode_READ(kind, data, k);
            rc = add_fact_tokens(buf, b - a, out);
        }
    done_line:
        if (rc < 0) {
            PyMem_Free(buf);
            Py_DECREF(out);
            return NULL;
        }
    next_line:
        a = b + 1;
    }
    PyMem_Free(buf);
    return out;
}

/* ---- units of a text (units.unit_spans without mark lines) ------------------------------ */

#define FACT_LINE_CHARS 200
#define SPLIT_MIN 100

static int
add_span(PyObject *out, Py_ssize_t start, Py_ssize_t end, int clean)
{
    PyObject *span = settled(Py_BuildValue("(nnO)", start, end, clean ? Py_True : Py_False));
    if (span == NULL)
        return -1;
    int rc = PyList_Append(out, span);
    Py_DECREF(span);
    return rc;
}

/* _part_spans of the piece t[p:q] (str.strip() strips what Py_UNICODE_ISSPACE takes). */
static int
part_spans(const Text *t, Py_ssize_t p, Py_ssize_t q, PyObject *out)
{
    const int kind = t->kind;
    const void *data = t->data;
#define SPACE_AT(k) Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, (k)))
    while (p < q && SPACE_AT(p))
        p++;
    while (q > p && SPACE_AT(q - 1))
        q--;
    if (p == q)
        return 0;
    if (q - p <= FACT_LINE_CHARS)
        return add_span(out, p, q, 1);
    int clean = 1;
    while (q - p > FACT_LINE_CHARS) {
        /* every separator holds a space at or after its start: the last one starts no later
         * than the window's last space, which is the one cut at */
        Py_ssize_t c = FACT_LINE_CHARS - 1;
        while (c >= 0 && PyUnicode_READ(kind, data, p + c) != ' ')
            c--;
        const int hard = c <= SPLIT_MIN;
        const Py_ssize_t cut = hard ? FACT_LINE_CHARS : c + 1;
        Py_ssize_t a = p, b = p + cut;
        while (a < b && SPACE_AT(a))
            a++;
        while (b > a && SPACE_AT(b - 1))
            b--;
        if (a < b && add_span(out, a, b, clean && !hard) < 0)
            return -1;
        p += cut;
        while (p < q && SPACE_AT(p))
            p++;
        clean = !hard;
    }
#undef SPACE_AT
    return p < q ? add_span(out, p, q, clean) : 0;
}

/* unit_spans(text) for a text without mark lines: its lines, each cut at its `\n` escapes. */
static PyObject *
sp_unit_spans(PyObject *Py_UNUSED(mod), PyObject *text)
{
    Text t;
    if (text_init(&t, text) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t line = 0;
    while (line <= t.n) {
        Py_ssize_t end = line;
        while (end < t.n && PyUnicode_READ(t.kind, t.data, end) != '\n')
            end++;
        Py_ssize_t part = line;
        for (Py_ssize_t k = line; k + 1 < end; k++) {
            if (PyUnicode_READ(t.kind, t.data, k) == '\\' &&
                PyUnicode_READ(t.kind, t.data, k + 1) == 'n') {
                if (part_spans(&t, part, k, out) < 0)
                    goto fail;
                part = k + 2;
                k++;
            }
        }
        if (part_spans(&t, part, end, out) < 0)
            goto fail;
        line = end + 1;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ---- module --------------------------------------------------------------------------- */

/* ---- tokens.estimate_tokens --------------------------------------------------------------- */

/* The estimate of tokens.py, one pass over the code points: an ASCII letter extends a letter run,
   an ASCII digit counts 1/2, ASCII whitespace nothing, any other code point 0.9 (the Python
   classifies the UTF-8 lead byte, which is one per code point). The float additions are the
   Python's, in its order: digits / 2 + symbols * 0.9, then the number of letter runs at least 1,
   7, 13, ... long, one threshold at a time up to the first that no run reaches. */
static PyObject *
sp_estimate_tokens(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "estimate_tokens() expects a str");
        return NULL;
    }
    if (ready(arg) < 0)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    if (n == 0)
        return PyLong_FromLong(0);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t digits = 0, symbols = 0, run = 0, longest = 0;
    /* runs[k]: letter runs of length in [6k+1, 6k+6]; grown on demand. */
    Py_ssize_t small[64] = {0};
    Py_ssize_t *runs = small;
    Py_ssize_t cap = 64;
    for (Py_ssize_t i = 0; i <= n; i++) {
        Py_UCS4 c = i < n ? PyUnicode_READ(kind, data, i) : 0x20;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            run++;
            continue;
        }
        if (run) {
            Py_ssize_t bucket = (run - 1) / 6;
            if (bucket >= cap) {
                Py_ssize_t grown = bucket * 2 + 1;
                Py_ssize_t *more = PyMem_Calloc((size_t)grown, sizeof(Py_ssize_t));
                if (more == NULL) {
                    if (runs != small)
                        PyMem_Free(runs);
                    return PyErr_NoMemory();
                }
                memcpy(more, runs, (size_t)cap * sizeof(Py_ssize_t));
                if (runs != small)
                    PyMem_Free(runs);
                runs = more;
                cap = grown;
            }
            runs[bucket]++;
            if (bucket > longest)
                longest = bucket;
            run = 0;
        }
        if (i == n)
            break;
        if (c >= '0' && c <= '9')
            digits++;
        else if (c < 128 ? c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)
                         : Py_UNICODE_ISSPACE(c))
            ; /* whitespace, non-ASCII too (`\s`), is free */
        else
            symbols++;
    }
    /* at_least[k] = runs of length >= 6k+1 = sum of runs[k..longest] */
    double total = (double)digits / 2.0 + (double)symbols * 0.9;
    Py_ssize_t at_least = 0;
    for (Py_ssize_t k = 0; k <= longest; k++)
        at_least += runs[k];
    Py_ssize_t k = 0;
    total += (double)at_least;
    while (at_least) {
        at_least -= runs[k];
        k++;
        total += (double)at_least;
    }
    if (runs != small)
        PyMem_Free(runs);
    if (!(total > 0))
        return PyLong_FromLong(0);
    return PyLong_FromDouble(ceil(total - 1e-9));
}

/* ---- redaction's anchors ------------------------------------------------------------------ */

/* anchors_in(text, anchors) -> the set of `anchors` (a tuple of ASCII strs of at least 2 chars)
 * that occur in `text`. One pass: a table of the anchors' first two chars, then a compare with
 * only the anchors that start with the char at hand (chained by first char), so a common pair
 * such as "se" costs a few compares however many anchors there are. */
static PyObject *
sp_anchors_in(PyObject *Py_UNUSED(mod), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "anchors_in(text, anchors: tuple)");
        return NULL;
    }
    Text t;
    if (text_init(&t, args[0]) < 0)
        return NULL;
    PyObject *anchors = args[1];
    const Py_ssize_t m = PyTuple_GET_SIZE(anchors);
    unsigned char pairs[128][16]; /* bit c1 of row c0: some anchor starts with c0 c1 */
    Py_ssize_t head[128];         /* the last anchor starting with c0, or -1 */
    memset(pairs, 0, sizeof pairs);
    for (int c = 0; c < 128; c++)
        head[c] = -1;
    Py_ssize_t *next = PyMem_New(Py_ssize_t, m > 0 ? m : 1); /* the anchor before k, same c0 */
    if (next == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *a = PyTuple_GET_ITEM(anchors, k);
        if (!PyUnicode_Check(a) || ready(a) < 0 || !PyUnicode_IS_ASCII(a) ||
            PyUnicode_GET_LENGTH(a) < 2) {
            PyMem_Free(next);
            PyErr_SetString(PyExc_ValueError, "anchors must be ASCII strs of 2 chars or more");
            return NULL;
        }
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(a);
        pairs[d[0]][d[1] >> 3] |= (unsigned char)(1u << (d[1] & 7));
        next[k] = head[d[0]];
        head[d[0]] = k;
    }
    PyObject *out = PySet_New(NULL);
    if (out == NULL) {
        PyMem_Free(next);
        return NULL;
    }
    const int kind = t.kind;
    const void *data = t.data;
    for (Py_ssize_t i = 0; i + 1 < t.n && PySet_GET_SIZE(out) < m; i++) {
        Py_UCS4 c0 = PyUnicode_READ(kind, data, i);
        if (c0 >= 128)
            continue;
        Py_UCS4 c1 = PyUnicode_READ(kind, data, i + 1);
        if (c1 >= 128 || !(pairs[c0][c1 >> 3] & (1u << (c1 & 7))))
            continue;
        for (Py_ssize_t k = head[c0]; k >= 0; k = next[k]) {
            PyObject *a = PyTuple_GET_ITEM(anchors, k);
            const Py_ssize_t len = PyUnicode_GET_LENGTH(a);
            const Py_UCS1 *d = PyUnicode_1BYTE_DATA(a);
            if (d[1] != c1 || i + len > t.n)
                continue;
            Py_ssize_t j = 2;
            while (j < len && PyUnicode_READ(kind, data, i + j) == d[j])
                j++;
            if (j == len && PySet_Add(out, a) < 0) {
                Py_DECREF(out);
                PyMem_Free(next);
                return NULL;
            }
        }
    }
    PyMem_Free(next);
    return out;
}

/* ---- the fact-score memo's key (facts.score_key) ------------------------------------------- */

/* fold_digits(text) -> text.translate(_DIGIT_FOLD): every ASCII digit 2-9 as 0 (the text itself
 * when it holds none). str.translate walks a non-ASCII text char by char through a dict. */
static PyObject *
sp_fold_digits(PyObject *Py_UNUSED(mod), PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.200s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (ready(text) < 0)
        return NULL;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t first = 0;
    while (first < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, first);
        if (c >= '2' && c <= '9')
            break;
        first++;
    }
    if (first == n)
        return Py_NewRef(text);
    PyObject *out = PyUnicode_New(n, PyUnicode_MAX_CHAR_VALUE(text));
    if (out == NULL)
        return NULL;
    void *to = PyUnicode_DATA(out);
    memcpy(to, data, (size_t)n * (size_t)kind);
    for (Py_ssize_t i = first; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, to, i);
        if (c >= '2' && c <= '9')
            PyUnicode_WRITE(kind, to, i, '0');
    }
    return out;
}

static PyMethodDef methods[] = {
    {"estimate_tokens", sp_estimate_tokens, METH_O, "tokens.estimate_tokens."},
    {"token_scan", sp_token_scan, METH_O, "candidate_tokens.token_scan's fields, in order."},
    {"span_tokens", (PyCFunction)(void (*)(void))sp_span_tokens, METH_FASTCALL,
     "cover._span_tokens(middle, spans, chosen, scan, offset, tokens)."},
    {"first_worths", (PyCFunction)(void (*)(void))sp_first_worths, METH_FASTCALL,
     "cover.first_worths."},
    {"cover", (PyCFunction)(void (*)(void))sp_cover, METH_FASTCALL, "cover.cover."},
    {"fact_scores", sp_fact_scores, METH_O, "fact_score of every unit."},
    {"fact_tokens", (PyCFunction)(void (*)(void))sp_fact_tokens, METH_FASTCALL,
     "set(findall(text)) for findall = facts.FACT_TOKEN.findall, in findall's order; with "
     "is_mark, the lines holding a mark phrase that is_mark accepts are left out."},
    {"unit_spans", sp_unit_spans, METH_O, "units.unit_spans of a text without mark lines."},
    {"fold_digits", sp_fold_digits, METH_O, "facts.score_key: ASCII digits 2-9 as 0."},
    {"anchors_in", (PyCFunction)(void (*)(void))sp_anchors_in, METH_FASTCALL,
     "The anchors (ASCII, 2 chars or more) that occur in a text (redact._anchors_in)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "factrail.core._speedups",
    .m_doc = "Optional C kernels for factrail.core (output-identical to the Python).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&module);
}
