# Snapshot rows' keys kept as the server's text, made the decoder's values when asked for:
# the one key store the compiled row blocks share (``snapshot._text_rows``' JSON lines,
# ``sinks.spark._snapshot_frames``' row references). A row's key columns are written while
# the row is read (without the interpreter lock) as ``(place in the key, length or -1 for
# NULL, text)``; most chunks never need their keys (no change of the table in their window).

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from changestream.native.memory cimport regrow, reserve
from changestream.native.text_protocol cimport text_integer

# How a key column's text becomes its value.
cdef enum:
    KEY_CONVERTED = 0  # its converter, from the value's bytes
    KEY_INT = 1        # int: in C when it fits 64 bits, else its converter
    KEY_TEXT = 2       # UTF-8 text (the decoder's utf8): decoded in C, as strictly


cdef struct KeyTexts:
    char* data
    Py_ssize_t size, capacity
    Py_ssize_t* ends  # where each row's keys end
    Py_ssize_t count, rows_capacity


cdef inline bint keys_have_room(const KeyTexts* keys, Py_ssize_t length, int columns
                                ) noexcept nogil:
    """Whether a row of ``length`` bytes and ``columns`` columns fits."""
    return (keys.count < keys.rows_capacity
            and keys.capacity - keys.size >= length + 8 * (columns + 1))


cdef inline int keys_make_room(KeyTexts* keys, Py_ssize_t length, int columns) except -1:
    """Room for one more row of ``length`` bytes and ``columns`` columns."""
    cdef Py_ssize_t need
    reserve(&keys.data, &keys.capacity, keys.size + length + 8 * (columns + 1), 1 << 12)
    if keys.count >= keys.rows_capacity:
        need = max(2 * keys.rows_capacity, 256)
        regrow(<void**>&keys.ends, need * sizeof(Py_ssize_t))
        keys.rows_capacity = need
    return 0


cdef inline void keys_free(KeyTexts* keys) noexcept:
    free(keys.data)
    free(keys.ends)


cdef inline void key_put(KeyTexts* keys, int32_t place, const unsigned char* text,
                         Py_ssize_t n) noexcept nogil:
    """Key column ``place``'s text (``n`` -1: NULL), room made for it."""
    cdef int32_t length = -1 if n < 0 else <int32_t>n
    memcpy(keys.data + keys.size, &place, 4)
    memcpy(keys.data + keys.size + 4, &length, 4)
    keys.size += 8
    if n > 0:
        memcpy(keys.data + keys.size, text, n)
        keys.size += n


cdef inline void keys_row_done(KeyTexts* keys) noexcept nogil:
    keys.ends[keys.count] = keys.size
    keys.count += 1


cdef inline int keys_copy_row(const KeyTexts* keys, Py_ssize_t r, KeyTexts* into) except -1:
    """Row ``r``'s keys as the next row of ``into``."""
    cdef Py_ssize_t start = keys.ends[r - 1] if r else 0
    cdef Py_ssize_t n = keys.ends[r] - start
    keys_make_room(into, n, 0)
    memcpy(into.data + into.size, keys.data + start, n)
    into.size += n
    keys_row_done(into)
    return 0


cdef inline object _int_text(const unsigned char* text, Py_ssize_t n):
    """The integer a column's text is, as ``int(text)`` reads it, when it is plain digits
    (a minus sign first) that fit 64 signed bits; ``None`` for anything else."""
    cdef bint negative
    cdef uint64_t magnitude
    if not text_integer(text, n, &negative, &magnitude) or \
            magnitude > 0x7FFFFFFFFFFFFFFF:
        return None
    return PyLong_FromLongLong(-<long long>magnitude if negative else <long long>magnitude)


cdef inline object key_value(const unsigned char* text, Py_ssize_t n, char kind, converter):
    """A key column's value of its text: ``kind`` (KEY_*) says how, else ``converter``."""
    if kind == KEY_TEXT:  # strictly, as utf8() does
        return PyUnicode_DecodeUTF8(<const char*>text, n, NULL)
    value = _int_text(text, n) if kind == KEY_INT else None
    if value is None:
        value = converter(PyBytes_FromStringAndSize(<const char*>text, n))
    return value


cdef inline tuple key_of(const KeyTexts* keys, Py_ssize_t r, const char* kinds,
                         tuple converters):
    """Row ``r``'s key in the decoder's values: each place's ``kinds`` and
    ``converters`` (a NULL column, a unique key's, is None)."""
    cdef Py_ssize_t at = keys.ends[r - 1] if r else 0
    cdef Py_ssize_t end = keys.ends[r]
    cdef Py_ssize_t places = len(converters)
    cdef int32_t place, n
    cdef tuple key = PyTuple_New(places)
    for place in range(places):  # a tuple must be whole before anything sees it
        Py_INCREF(None)
        PyTuple_SET_ITEM(key, place, None)
    while at < end:
        memcpy(&place, keys.data + at, 4)
        memcpy(&n, keys.data + at + 4, 4)
        at += 8
        if n < 0:
            continue
        value = key_value(<const unsigned char*>keys.data + at, n, kinds[place],
                          converters[place])
        at += n
        Py_INCREF(value)
        Py_DECREF(None)
        PyTuple_SET_ITEM(key, place, value)
    return key
