# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Snapshot chunks into the Spark sink's Arrow frames, compiled: a text-protocol row is kept
as where it is (its key read), and a chunk's rows are read from the server's text straight
into Arrow column buffers (:mod:`changestream.sinks.spark.snapshot_frames` plans each
table and makes the frame; the tests hold it to the general path's frames).

Integers, FLOAT and DOUBLE, DECIMAL up to 38 digits, DATE, DATETIME and TIMESTAMP (zero and
invalid dates NULL), UTF-8 text and binary strings are read here; other values, and any text
these readers do not take, go through the column's Python converter and the sink's
conversion, as on the general path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free, malloc, strtod
from libc.string cimport memcpy

from changestream.native.binlog_values cimport int128_t
from changestream.native.json_text cimport valid_utf8
from changestream.native.memory cimport regrow
from changestream.native.row_keys cimport (
    KEY_CONVERTED,
    KEY_INT,
    KEY_TEXT,
    KeyTexts,
    key_of,
    key_put,
    keys_copy_row,
    keys_free,
    keys_have_room,
    keys_make_room,
    keys_row_done,
)
from changestream.native.text_protocol cimport (
    PACKET_ROW,
    cut_short,
    next_packet,
    text_integer,
    text_value,
    value_span,
)
from changestream.sinks.spark._arrow_walk cimport Column

from changestream.snapshot.values import utf8

# How a column's text becomes its Arrow value (snapshot_frames.py numbers them alike).
cdef enum:
    T_INT = 0       # decimal integer text into the Arrow type's width
    T_UINT128 = 1   # BIGINT UNSIGNED as decimal128(20, 0)
    T_FLOAT32 = 2   # FLOAT: read as a double, then narrowed (as pyarrow narrows a float)
    T_FLOAT64 = 3
    T_DECIMAL = 4   # decimal128 of the column's scale
    T_DATE = 5      # days since 1970; zero or invalid dates NULL
    T_DATETIME = 6  # microseconds since 1970 (DATETIME and TIMESTAMP, read in UTC)
    T_UTF8 = 7      # UTF-8 text as it is
    T_BYTES = 8     # bytes as they are
    T_PYTHON = 9    # the column's converter and the sink's conversion

cdef enum:
    _BAD = -1  # a text this reader does not take: the Python converters read it
    _NULL = 0
    _OK = 1


cdef class KeyedRows:
    """Reads a text-protocol row at ``(buffer, offset)`` into ``(key, (buffer, offset))``:
    its key in the decoder's values (``key_converters``, for columns ``key_columns`` in key
    order; ``int`` and UTF-8 text are read here), and where it is, for
    :class:`ChunkColumns`; :meth:`rows`, a block to read a result's rows into
    (:class:`RowRefs`). Every value is walked over, so a row cut short is an error here."""

    cdef int ncols, nkeys
    cdef tuple key_converters
    cdef int32_t* place_of  # per column: its place in the key, or -1
    cdef char* kinds  # per place in the key: KEY_*

    def __init__(self, int ncols, tuple key_columns, tuple key_converters):
        cdef Py_ssize_t j
        if len(key_columns) > 250 or ncols < 1:
            raise ValueError("a key of 1 to 250 columns, a row of at least one")
        self.ncols, self.nkeys = ncols, len(key_columns)
        self.key_converters = key_converters
        self.place_of = <int32_t*>malloc(ncols * sizeof(int32_t))
        self.kinds = <char*>malloc(max(self.nkeys, 1))
        if self.place_of == NULL or self.kinds == NULL:
            raise MemoryError()
        for j in range(ncols):
            self.place_of[j] = -1
        for k, j in enumerate(key_columns):
            self.place_of[j] = k
            self.kinds[k] = KEY_INT if key_converters[k] is int else \
                KEY_TEXT if key_converters[k] is utf8 else KEY_CONVERTED

    def __dealloc__(self):
        free(self.place_of)
        free(self.kinds)

    def rows(self):
        """A new, empty block of rows read by this reader."""
        return RowRefs(self)

    def __call__(self, bytes buf, Py_ssize_t i):
        cdef RowRefs one = RowRefs(self)
        one.add(buf, i)
        return one.pair(0)


cdef Py_ssize_t _walk(const unsigned char* b, Py_ssize_t i, Py_ssize_t end, int ncols,
                      const int32_t* place_of, KeyTexts* keys) noexcept nogil:
    """Walks over a row's values from ``b[i]`` (to ``end``), its key columns' text put in
    ``keys`` (room made): the offset after it, or a :func:`value_span` code."""
    cdef Py_ssize_t start = 0, n = 0
    cdef int j
    for j in range(ncols):
        i = value_span(b, i, end, &start, &n)
        if i < 0:
            return i
        if place_of[j] >= 0:
            key_put(keys, place_of[j], b + start, n)
    keys_row_done(keys)
    return i


cdef class RowRefs:
    """A result's rows as a :class:`KeyedRows` reads them, without a Python object per
    row and without the interpreter lock: where each is (the result's buffers kept) and
    its key's text, made the decoder's values when asked for. Iterated, each row as the
    reader's call gives it: ``(key, (buffer, offset))``."""

    cdef KeyedRows reader
    cdef list buffers
    cdef int32_t* buffer_of
    cdef Py_ssize_t* offset_of
    cdef Py_ssize_t count, capacity
    cdef KeyTexts key_texts

    def __cinit__(self, KeyedRows reader):
        self.reader = reader
        self.buffers = []

    def __dealloc__(self):
        free(self.buffer_of)
        free(self.offset_of)
        keys_free(&self.key_texts)

    def __len__(self):
        return self.count

    cdef int _grow(self, Py_ssize_t length) except -1:
        """Room for one more row of ``length`` bytes."""
        cdef Py_ssize_t need
        if self.count >= self.capacity:
            need = max(2 * self.capacity, 256)
            regrow(<void**>&self.buffer_of, need * sizeof(int32_t))
            regrow(<void**>&self.offset_of, need * sizeof(Py_ssize_t))
            self.capacity = need
        keys_make_room(&self.key_texts, length, self.reader.nkeys)
        return 0

    cdef int32_t _buffer(self, bytes buf) except -1:
        """``buf``'s number among the buffers kept."""
        if not self.buffers or self.buffers[len(self.buffers) - 1] is not buf:
            self.buffers.append(buf)
        return <int32_t>(len(self.buffers) - 1)

    def scan(self, bytes buf, Py_ssize_t at):
        """Reads the row packets that are whole in ``buf`` from ``at``, up to the first
        packet that is not a row: ``(offset of that packet or of the part not yet whole,
        what stopped it, start of the last row read or -1)``, as
        :func:`changestream.snapshot.result_set.scan_rows` does into a list."""
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), last = -1, length = 0, after = 0
        cdef int32_t number = self._buffer(buf)
        cdef int packet
        cdef KeyedRows reader = self.reader
        while True:
            with nogil:
                while True:
                    packet = next_packet(b, at, size, &length)
                    if packet != PACKET_ROW or self.count >= self.capacity or \
                            not keys_have_room(&self.key_texts, length, reader.nkeys):
                        break
                    after = _walk(b, at + 4, at + 4 + length, reader.ncols, reader.place_of,
                                  &self.key_texts)
                    if after < 0:
                        break
                    self.buffer_of[self.count] = number
                    self.offset_of[self.count] = at + 4
                    self.count += 1
                    last = at + 4
                    at += 4 + length
            if packet != PACKET_ROW:
                return at, packet, last
            if after < 0:
                cut_short(after)
            self._grow(length)

    def add(self, bytes buf, Py_ssize_t start):
        """Reads the row at ``buf[start:]`` (one payload: the rest of the buffer)."""
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t after
        self._grow(PyBytes_GET_SIZE(buf) - start)
        after = _walk(b, start, PyBytes_GET_SIZE(buf), self.reader.ncols, self.reader.place_of,
                      &self.key_texts)
        if after < 0:
            cut_short(after)
        self.buffer_of[self.count] = self._buffer(buf)
        self.offset_of[self.count] = start
        self.count += 1

    cdef tuple _key(self, Py_ssize_t r):
        return key_of(&self.key_texts, r, self.reader.kinds, self.reader.key_converters)

    cdef tuple pair(self, Py_ssize_t r):
        """Row ``r`` as ``(key, (buffer, offset))``."""
        return self._key(r), (self.buffers[self.buffer_of[r]], self.offset_of[r])

    def keys(self):
        """Each row's key in the decoder's values, in order."""
        return [self._key(r) for r in range(self.count)]

    def without(self, keys):
        """A block of the rows whose key is not in ``keys`` (a set of keys)."""
        cdef RowRefs kept = RowRefs(self.reader)
        cdef Py_ssize_t r
        kept.buffers = list(self.buffers)
        for r in range(self.count):
            if self._key(r) in keys:
                continue
            kept._grow(0)
            kept.buffer_of[kept.count] = self.buffer_of[r]
            kept.offset_of[kept.count] = self.offset_of[r]
            kept.count += 1
            keys_copy_row(&self.key_texts, r, &kept.key_texts)
        return kept

    def __iter__(self):
        cdef Py_ssize_t r
        for r in range(self.count):
            yield self.pair(r)

    def __repr__(self):
        return f"<RowRefs of {self.count} rows>"


cdef inline bint _digit(unsigned char c) noexcept:
    return 48 <= c <= 57


cdef int _decimal(const unsigned char* s, Py_ssize_t n, int scale, int128_t* out) noexcept:
    """DECIMAL text (a sign, digits, a point and at most ``scale`` digits) as its unscaled
    integer at ``scale``."""
    cdef Py_ssize_t k = 0
    cdef int fraction = -1, digits = 0
    cdef int128_t v = 0
    cdef bint negative = n > 0 and s[0] == 45
    if negative:
        k = 1
    while k < n:
        if s[k] == 46 and fraction < 0:
            fraction = 0
        elif _digit(s[k]):
            if v != 0 or s[k] != 48:
                digits += 1
            if digits > 38:
                return _BAD
            v = v * 10 + (s[k] - 48)
            if fraction >= 0:
                fraction += 1
        else:
            return _BAD
        k += 1
    if fraction < 0:
        fraction = 0
    if fraction > scale or (k == 1 and negative) or n == 0:
        return _BAD
    while fraction < scale:
        v *= 10
        fraction += 1
        digits += 1
        if digits > 38:
            return _BAD
    out[0] = -v if negative else v
    return _OK


cdef inline int _two(const unsigned char* s) noexcept:
    """Two digits' value, or -1."""
    if not (_digit(s[0]) and _digit(s[1])):
        return -1
    return (s[0] - 48) * 10 + s[1] - 48


cdef int _days_in(int year, int month) noexcept:
    if month == 2:
        return 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return 30 if month in (4, 6, 9, 11) else 31


cdef int _date(const unsigned char* s, Py_ssize_t n, int32_t* days) noexcept:
    """``YYYY-MM-DD`` as days since 1970-01-01; ``_NULL`` for a date Python's ``date``
    cannot hold (a zero or invalid date, as the server prints it)."""
    cdef int hi, lo, year, month, day
    cdef int64_t y, era, yoe, doy, doe, m
    if n < 10 or s[4] != 45 or s[7] != 45:
        return _BAD
    hi, lo, month, day = _two(s), _two(s + 2), _two(s + 5), _two(s + 8)
    if hi < 0 or lo < 0 or month < 0 or day < 0:
        return _BAD
    year = hi * 100 + lo
    if year < 1 or month < 1 or month > 12 or day < 1 or day > _days_in(year, month):
        return _NULL
    # days from the civil date (Howard Hinnant's algorithm)
    y = year - (1 if month <= 2 else 0)
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    m = month + (-3 if month > 2 else 9)
    doy = (153 * m + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days[0] = <int32_t>(era * 146097 + doe - 719468)
    return _OK


cdef int _datetime(const unsigned char* s, Py_ssize_t n, int64_t* micros) noexcept:
    """``YYYY-MM-DD HH:MM:SS[.f]`` (up to 6 fraction digits) as microseconds since 1970;
    ``_NULL`` for a date Python's ``datetime`` cannot hold."""
    cdef int32_t days = 0
    cdef int result, hour, minute, second, k
    cdef int64_t fraction = 0, scale = 100000
    if n < 19 or s[10] != 32 or s[13] != 58 or s[16] != 58:
        return _BAD
    hour, minute, second = _two(s + 11), _two(s + 14), _two(s + 17)
    if hour < 0 or minute < 0 or second < 0 or hour > 23 or minute > 59 or second > 59:
        return _BAD
    if n > 19:
        if s[19] != 46 or n == 20 or n > 26:
            return _BAD
        for k in range(20, n):
            if not _digit(s[k]):
                return _BAD
            fraction += (s[k] - 48) * scale
            scale //= 10
    result = _date(s, 10, &days)
    if result != _OK:
        return result
    micros[0] = ((<int64_t>days * 86400 + hour * 3600 + minute * 60 + second) * 1000000
                 + fraction)
    return _OK


cdef int _float(const unsigned char* s, Py_ssize_t n, double* out) noexcept:
    """Number text as Python's ``float`` reads it (both round correctly)."""
    cdef char text[64]
    cdef char* end
    if n == 0 or n > 63:
        return _BAD
    memcpy(text, s, n)
    text[n] = 0
    out[0] = strtod(text, &end)
    return _OK if end == text + n else _BAD


cdef class ChunkColumns:
    """A table's value columns for a chunk's rows: per column its kind (above), Arrow type,
    width (bytes of a fixed value, 0: text and bytes, -1: Python values), DECIMAL scale,
    the decoder's converter of its text and the sink's conversion (``None``: none)."""

    cdef int ncols
    cdef bytes kinds, scales  # read through their bytes (a scale is at most 38)
    cdef const unsigned char* kind_of
    cdef const unsigned char* scale_of
    cdef tuple types, widths, converters, converts

    def __init__(self, bytes kinds, tuple types, tuple widths, tuple scales, tuple converters,
                 tuple converts):
        self.ncols = len(kinds)
        self.kinds, self.scales = kinds, bytes(scales)
        self.kind_of = <const unsigned char*>PyBytes_AS_STRING(self.kinds)
        self.scale_of = <const unsigned char*>PyBytes_AS_STRING(self.scales)
        self.types, self.widths = types, widths
        self.converters, self.converts = converters, converts

    def arrays(self, rows):
        """The value columns of ``rows`` (a :class:`RowRefs` block, or a list of
        ``(key, (buffer, offset))`` as :class:`KeyedRows` gives them) as Arrow arrays, in
        table order."""
        cdef list columns = [Column(self.types[j], self.widths[j]) for j in range(self.ncols)]
        cdef tuple row, ref
        cdef bytes buf
        cdef RowRefs refs
        cdef Py_ssize_t r
        if isinstance(rows, RowRefs):
            refs = <RowRefs>rows
            for r in range(refs.count):
                buf = <bytes>refs.buffers[refs.buffer_of[r]]
                self._row(columns, buf, refs.offset_of[r])
        else:
            for row in <list>rows:
                ref = <tuple>row[1]
                self._row(columns, <bytes>ref[0], ref[1])
        return [(<Column>c).array() for c in columns]

    cdef int _row(self, list columns, bytes buf, Py_ssize_t at) except -1:
        """The values of the row at ``buf[at]`` into ``columns``."""
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), start = 0, n = 0
        cdef int j
        for j in range(self.ncols):
            at = text_value(b, at, size, &start, &n)
            if n < 0:
                (<Column>columns[j]).null()
            else:
                self._put(<Column>columns[j], j, b + start, n)
        return 0

    cdef int _put(self, Column column, int j, const unsigned char* s, Py_ssize_t n) except -1:
        """One present value of column ``j`` (its text ``s``, ``n`` bytes)."""
        cdef unsigned char kind = self.kind_of[j]
        cdef int result = _BAD
        cdef bint negative = False
        cdef uint64_t u = 0
        cdef int64_t v = 0
        cdef int32_t days = 0
        cdef int128_t unscaled = 0
        cdef double d = 0
        cdef float f
        if kind == T_INT:
            result = _OK if text_integer(s, n, &negative, &u) else _BAD
            if result == _OK:
                v = <int64_t>(<uint64_t>0 - u) if negative else <int64_t>u
                memcpy(column.fixed(), &v, column.width)  # little-endian: the low bytes
        elif kind == T_UINT128:
            result = _OK if text_integer(s, n, &negative, &u) else _BAD
            if result == _OK and not negative:
                unscaled = <int128_t>u
                memcpy(column.fixed(), &unscaled, 16)
            else:
                result = _BAD
        elif kind == T_FLOAT64 or kind == T_FLOAT32:
            result = _float(s, n, &d)
            if result == _OK and kind == T_FLOAT64:
                memcpy(column.fixed(), &d, 8)
            elif result == _OK:
                f = <float>d
                memcpy(column.fixed(), &f, 4)
        elif kind == T_DECIMAL:
            result = _decimal(s, n, self.scale_of[j], &unscaled)
            if result == _OK:
                memcpy(column.fixed(), &unscaled, 16)
        elif kind == T_DATE:
            result = _date(s, n, &days) if n == 10 else _BAD
            if result == _OK:
                (<int32_t*>column.fixed())[0] = days
        elif kind == T_DATETIME:
            result = _datetime(s, n, &v)
            if result == _OK:
                (<int64_t*>column.fixed())[0] = v
        elif kind == T_UTF8:
            if valid_utf8(s, n):
                column.var(<const char*>s, n)
                result = _OK
        elif kind == T_BYTES:
            column.var(<const char*>s, n)
            result = _OK
        if result == _NULL:
            column.null()
        elif result == _BAD:
            value = self.converters[j](PyBytes_FromStringAndSize(<const char*>s, n))
            convert = self.converts[j]
            if value is not None and convert is not None:
                value = convert(value)
            if column.width > 0:  # a fixed-width kind whose text was not its usual form
                raise ValueError(f"column {j}: {value!r} is not a value this reader writes")
            column.value(value)
        return 0
