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
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport strtod
from libc.string cimport memcpy

from changestream.native.binlog_values cimport int128_t
from changestream.native.json_text cimport valid_utf8
from changestream.native.text_protocol cimport text_integer, text_value
from changestream.sinks.spark._arrow_walk cimport Column

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
    order; ``int`` is read here), and where it is, for :class:`ChunkColumns`. Every value
    is walked over, so a row cut short is an error here."""

    cdef int ncols, nkeys
    cdef tuple key_converters
    cdef bytes slots  # per column: its place in the key + 1 (0: not in it)
    cdef bytes integers  # per key column: whether ``int`` reads it

    def __init__(self, int ncols, tuple key_columns, tuple key_converters):
        if len(key_columns) > 250 or ncols < 1:
            raise ValueError("a key of 1 to 250 columns, a row of at least one")
        self.ncols, self.nkeys = ncols, len(key_columns)
        self.key_converters = key_converters
        slots = bytearray(ncols)
        for k, j in enumerate(key_columns):
            slots[j] = k + 1
        self.slots = bytes(slots)
        self.integers = bytes([c is int for c in key_converters])

    def __call__(self, bytes buf, Py_ssize_t i):
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef const unsigned char* slots = <const unsigned char*>PyBytes_AS_STRING(self.slots)
        cdef const unsigned char* integers = \
            <const unsigned char*>PyBytes_AS_STRING(self.integers)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), start = 0, n = 0, at = i
        cdef int j, k
        cdef bint negative = False
        cdef uint64_t u = 0
        cdef tuple key = PyTuple_New(self.nkeys)
        cdef object value
        for k in range(self.nkeys):  # a tuple must be whole before anything sees it
            Py_INCREF(None)
            PyTuple_SET_ITEM(key, k, None)
        for j in range(self.ncols):
            at = text_value(b, at, size, &start, &n)
            k = slots[j] - 1
            if k < 0 or n < 0:
                continue
            if integers[k] and text_integer(b + start, n, &negative, &u) and \
                    u <= 0x7FFFFFFFFFFFFFFF:
                value = -<int64_t>u if negative else <int64_t>u
            else:
                value = self.key_converters[k](
                    PyBytes_FromStringAndSize(<const char*>b + start, n))
            Py_INCREF(value)
            Py_DECREF(None)
            PyTuple_SET_ITEM(key, k, value)
        return key, (buf, i)


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

    def arrays(self, list rows):
        """The value columns of ``rows`` (each ``(key, (buffer, offset))``, as
        :class:`KeyedRows` gives them) as Arrow arrays, in table order."""
        cdef list columns = [Column(self.types[j], self.widths[j]) for j in range(self.ncols)]
        cdef tuple row, ref
        cdef bytes buf
        cdef const unsigned char* b
        cdef Py_ssize_t size, at, start = 0, n = 0
        cdef int j
        for row in rows:
            ref = <tuple>row[1]
            buf = <bytes>ref[0]
            at = ref[1]
            b = <const unsigned char*>PyBytes_AS_STRING(buf)
            size = PyBytes_GET_SIZE(buf)
            for j in range(self.ncols):
                at = text_value(b, at, size, &start, &n)
                if n < 0:
                    (<Column>columns[j]).null()
                else:
                    self._put(<Column>columns[j], j, b + start, n)
        return [(<Column>c).array() for c in columns]

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
