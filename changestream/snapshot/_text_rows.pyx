# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled snapshot rows: a text-protocol row to its record's ``after`` and ``primary_key``
JSON, and a chunk's records composed, as :mod:`changestream.snapshot.row_readers` and
:func:`changestream.snapshot.encodings.chunk_records` do in Python (the same bytes; the
tests hold both to it). Built by the install script; without it the Python path runs.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_FromLongLong
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from changestream.native.json_text cimport Buffer, put_text, valid_utf8
from changestream.native.text_protocol cimport text_integer, text_value

from changestream.snapshot.values import utf8

# Column kinds (row_readers.KINDS names them).
cdef enum:
    K_NUMBER = 0     # integer text: as it is, unless it has leading zeros (ZEROFILL)
    K_DECIMAL = 1    # quoted, unless it has leading zeros
    K_QUOTED = 2     # DATE, TIME: quoted
    K_DATETIME = 3   # quoted, the first space a T
    K_TIMESTAMP = 4  # the same and +00:00
    K_TEXT = 5       # a JSON string of UTF-8 text
    K_GENERIC = 6    # the column's Python writer
    K_SKIP = 7       # read past (a column the filter leaves out)

# How a key column's value is read.
cdef enum:
    KEY_CONVERTED = 0  # its converter, from the value's bytes
    KEY_INT = 1        # int: in C when it fits 64 bits, else its converter
    KEY_TEXT = 2       # UTF-8 text (utf8): decoded in C



cdef class RowEncoder:
    """Reads a text-protocol row at ``(buffer, offset)`` into ``(key, (after JSON,
    primary_key JSON))``: see :func:`changestream.snapshot.row_readers.encoded_reader`,
    whose plan (kinds, JSON prefixes, writers, key and primary key columns) it is given."""

    cdef bytes kinds
    cdef tuple prefixes, writers, key_converters, pk_prefixes
    cdef tuple key_columns, pk_columns
    cdef int ncols
    cdef Buffer out
    cdef Py_ssize_t* starts  # where each column's JSON is in the row's (for the key's)
    cdef Py_ssize_t* ends
    cdef int* key_at  # a column's place in the key, or -1
    cdef char* key_kind  # how a key column is read: KEY_INT, KEY_TEXT, else its converter
    cdef Py_ssize_t nkey

    def __init__(self, bytes kinds, tuple prefixes, tuple writers, tuple key_columns,
                 tuple key_converters, tuple pk_columns, tuple pk_prefixes):
        self.kinds = kinds
        self.ncols = len(kinds)
        self.prefixes = prefixes
        self.writers = writers
        self.key_columns = key_columns
        self.key_converters = key_converters
        self.pk_columns = pk_columns
        self.pk_prefixes = pk_prefixes
        self.out = Buffer()
        self.starts = <Py_ssize_t*>calloc(max(self.ncols, 1), sizeof(Py_ssize_t))
        self.ends = <Py_ssize_t*>calloc(max(self.ncols, 1), sizeof(Py_ssize_t))
        self.key_at = <int*>malloc(max(self.ncols, 1) * sizeof(int))
        self.key_kind = <char*>calloc(max(self.ncols, 1), 1)
        if self.starts == NULL or self.ends == NULL or self.key_at == NULL or \
                self.key_kind == NULL:
            raise MemoryError()
        cdef Py_ssize_t j
        for j in range(self.ncols):
            self.key_at[j] = -1
        self.nkey = len(key_columns)
        for j in range(self.nkey):
            if self.key_at[<Py_ssize_t>key_columns[j]] != -1:
                raise ValueError("a key column named twice")
            self.key_at[<Py_ssize_t>key_columns[j]] = <int>j
            convert = key_converters[key_columns[j]]
            self.key_kind[<Py_ssize_t>key_columns[j]] = KEY_INT if convert is int else \
                KEY_TEXT if convert is utf8 else KEY_CONVERTED

    def __dealloc__(self):
        free(self.starts)
        free(self.ends)
        free(self.key_at)
        free(self.key_kind)

    def __call__(self, bytes buf, Py_ssize_t i):
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf)
        cdef Py_ssize_t n, start, j, k
        cdef unsigned char kind, c
        cdef bint null, generic
        cdef Buffer out = self.out
        cdef bytes piece
        cdef object value
        cdef tuple key = PyTuple_New(self.nkey)
        cdef Py_ssize_t at
        for at in range(self.nkey):  # a key column that is NULL (a unique key's) stays None
            Py_INCREF(None)
            PyTuple_SET_ITEM(key, at, None)
        out.size = 0
        for j in range(self.ncols):
            i = text_value(b, i, size, &start, &n)
            null = n < 0
            if null:
                n = 0
            kind = self.kinds[j]
            if not null and self.key_at[j] >= 0:
                if self.key_kind[j] == KEY_TEXT:  # decoded here, strictly, as utf8() does
                    value = PyUnicode_DecodeUTF8(<const char*>b + start, n, NULL)
                else:
                    value = _int_text(b + start, n) if self.key_kind[j] == KEY_INT else None
                if value is None:
                    value = self.key_converters[j](
                        PyBytes_FromStringAndSize(<const char*>b + start, n))
                at = self.key_at[j]
                Py_DECREF(None)  # the None put there above
                Py_INCREF(value)
                PyTuple_SET_ITEM(key, at, value)
            if kind == K_SKIP:
                continue
            out.put_bytes(<bytes>self.prefixes[j])
            self.starts[j] = out.size
            if null:
                out.put(b"null", 4)
                self.ends[j] = out.size
                continue
            generic = False
            if kind == K_NUMBER:
                if b[start] != 48 or n == 1:
                    out.put(<const char*>b + start, n)
                else:
                    generic = True
            elif kind == K_DECIMAL:
                if b[start] != 48 or (n > 1 and b[start + 1] == 46):
                    out.put(b'"', 1)
                    out.put(<const char*>b + start, n)
                    out.put(b'"', 1)
                else:
                    generic = True
            elif kind == K_QUOTED:
                out.put(b'"', 1)
                out.put(<const char*>b + start, n)
                out.put(b'"', 1)
            elif kind == K_DATETIME or kind == K_TIMESTAMP:
                out.put(b'"', 1)
                k = out.size
                out.put(<const char*>b + start, n)
                while k < out.size:
                    if out.data[k] == b' ':
                        out.data[k] = b'T'
                        break
                    k += 1
                if kind == K_TIMESTAMP:
                    out.put(b'+00:00"', 7)
                else:
                    out.put(b'"', 1)
            elif kind == K_TEXT:
                if valid_utf8(b + start, n):
                    put_text(out, b + start, n)
                else:
                    generic = True
            else:
                generic = True
            if generic:
                piece = self.writers[j](PyBytes_FromStringAndSize(<const char*>b + start, n))
                out.put_bytes(piece)
            self.ends[j] = out.size
        if out.size == 0:  # no column
            out.put(b"{", 1)
        out.put(b"}", 1)
        after = PyBytes_FromStringAndSize(out.data, out.size)
        if self.pk_columns:
            out.size = 0
            k = 0
            for j in self.pk_columns:
                out.put_bytes(<bytes>self.pk_prefixes[k])
                out.put(PyBytes_AS_STRING(after) + self.starts[j], self.ends[j] - self.starts[j])
                k += 1
            out.put(b"}", 1)
            pk = PyBytes_FromStringAndSize(out.data, out.size)
        else:
            pk = b"null"
        return key, (after, pk)


cdef object _int_text(const unsigned char* text, Py_ssize_t n):
    """The integer a column's text is, as ``int(text)`` reads it, when it is plain digits
    (a minus sign first) that fit 64 signed bits; ``None`` for anything else (``int``
    reads it)."""
    cdef bint negative
    cdef uint64_t magnitude
    if not text_integer(text, n, &negative, &magnitude) or \
            magnitude > 0x7FFFFFFFFFFFFFFF:
        return None
    return PyLong_FromLongLong(-<long long>magnitude if negative else <long long>magnitude)


cdef inline Py_ssize_t _digits(Py_ssize_t value, char* into) noexcept nogil:
    """``value`` (not negative) in decimal at the end of ``into`` (20 bytes): how many."""
    cdef int i = 20
    while True:
        i -= 1
        into[i] = <char>(48 + value % 10)
        value //= 10
        if value == 0:
            return 20 - i


cdef inline char* _put(char* at, const char* src, Py_ssize_t n) noexcept nogil:
    memcpy(at, src, n)
    return at + n


def chunk_lines(list rows, bytes head, bytes transaction, bytes size, bytes position,
                bytes tail, bint keyed=False, Py_ssize_t first=0, Py_ssize_t last=-1):
    """A chunk's records: for each ``(after, primary_key)`` of ``rows`` (JSON; ``keyed``:
    each ``(key, (after, primary_key))``), ``head``, the row's JSON, its sequence number
    (from ``first``) twice, and the parts between, as
    :func:`changestream.snapshot.encodings.chunk_records` joins them; the row numbered
    ``last`` (``-1``: the last of ``rows``) is its transaction's last. Written into one
    bytes object of the size measured first, the copies without the interpreter lock (the
    snapshot's readers parse meanwhile)."""
    cdef Py_ssize_t seq, n = len(rows), total = 0, width
    cdef Py_ssize_t fixed = (PyBytes_GET_SIZE(head) + 15 + 26 + PyBytes_GET_SIZE(transaction)
                             + PyBytes_GET_SIZE(size) + PyBytes_GET_SIZE(position)
                             + PyBytes_GET_SIZE(tail))
    cdef tuple row
    cdef bytes after, pk, piece
    cdef char digits[20]
    cdef char* into
    cdef const char* pieces[5]  # head, transaction, size, position, tail
    cdef Py_ssize_t lengths[5]
    # (after, its size, primary_key, its size) per row: read with the lock, copied without.
    cdef const char** parts = <const char**>malloc(max(n, 1) * 2 * sizeof(char*))
    cdef Py_ssize_t* sizes = <Py_ssize_t*>malloc(max(n, 1) * 2 * sizeof(Py_ssize_t))
    if parts == NULL or sizes == NULL:
        free(parts)
        free(sizes)
        raise MemoryError()
    if last < 0:
        last = first + n - 1
    try:
        for seq in range(n):
            row = <tuple>rows[seq]
            if keyed:
                row = <tuple>row[1]
            after, pk = <bytes>row[0], <bytes>row[1]
            parts[2 * seq], sizes[2 * seq] = PyBytes_AS_STRING(after), PyBytes_GET_SIZE(after)
            parts[2 * seq + 1], sizes[2 * seq + 1] = PyBytes_AS_STRING(pk), PyBytes_GET_SIZE(pk)
            total += (fixed + sizes[2 * seq] + sizes[2 * seq + 1]
                      + 2 * _digits(first + seq, digits) + (5 if first + seq == last else 6))
        result = PyBytes_FromStringAndSize(NULL, total)
        into = PyBytes_AS_STRING(result)
        for seq, piece in enumerate((head, transaction, size, position, tail)):
            pieces[seq], lengths[seq] = PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece)
        with nogil:
            _chunk_lines(into, n, first, last, parts, sizes, pieces, lengths)
    finally:
        free(parts)
        free(sizes)
    return result


cdef void _chunk_lines(char* at, Py_ssize_t n, Py_ssize_t first, Py_ssize_t last,
                       const char** parts, Py_ssize_t* sizes, const char** pieces,
                       Py_ssize_t* lengths) noexcept nogil:
    """:func:`chunk_lines`'s copies: ``pieces``/``lengths`` are its head, transaction,
    size, position and tail."""
    cdef Py_ssize_t seq, width
    cdef char digits[20]
    for seq in range(n):
        width = _digits(first + seq, digits)
        at = _put(at, pieces[0], lengths[0])
        at = _put(at, parts[2 * seq], sizes[2 * seq])
        at = _put(at, b',"primary_key":', 15)
        at = _put(at, parts[2 * seq + 1], sizes[2 * seq + 1])
        at = _put(at, b',"sql":null,"transaction":', 26)
        at = _put(at, pieces[1], lengths[1])
        at = _put(at, digits + 20 - width, width)
        at = _put(at, pieces[2], lengths[2])
        if first + seq == last:
            at = _put(at, b"true,", 5)
        else:
            at = _put(at, b"false,", 6)
        at = _put(at, pieces[3], lengths[3])
        at = _put(at, digits + 20 - width, width)
        at = _put(at, pieces[4], lengths[4])


def scan_rows(bytes buf, Py_ssize_t at, read_row, list rows):
    """Reads the row packets that are whole in ``buf`` from ``at``, appending what
    ``read_row(buf, start)`` gives for each to ``rows``, up to the first packet that is not
    a row: ``(offset of that packet or of the part not yet whole, what stopped it, start
    of the last row read or -1)``; see
    :func:`changestream.snapshot.result_set.scan_rows`."""
    cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), length, start, last = -1
    while at + 4 <= size:
        length = b[at] | (b[at + 1] << 8) | (b[at + 2] << 16)
        start = at + 4
        if length == 0xFFFFFF:
            return at, 3, last  # a payload that goes on in the next packet
        if start + length > size:
            break
        if b[start] == 0xFE and length < 9:
            return at, 1, last  # the end of the rows
        if b[start] == 0xFF:
            return at, 2, last  # an error
        rows.append(read_row(buf, start))
        last = start
        at = start + length
    return at, 0, last
