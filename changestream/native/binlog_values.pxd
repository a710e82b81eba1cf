# Binlog row image values written as JSON text, or read into the Spark sink's Arrow forms
# (see binlog_values.pyx).

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp

from changestream.native.json_text cimport Buffer

cdef extern from *:
    """
    typedef __int128 changestream_int128;
    """
    ctypedef long long int128_t "changestream_int128"


cdef inline uint32_t u16(const uint8_t* p) noexcept:
    return p[0] | (<uint32_t>p[1] << 8)


cdef inline uint32_t u32(const uint8_t* p) noexcept:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef inline uint64_t u64(const uint8_t* p) noexcept:
    return u32(p) | (<uint64_t>u32(p + 4) << 32)


cdef inline bint query_is(const uint8_t* event, Py_ssize_t body_end, int post,
                          const char* word, Py_ssize_t length) noexcept:
    """Whether the QUERY event at ``event`` (its body ending ``body_end`` bytes after the
    event's start; ``post``: the QUERY post-header length) holds just ``word``."""
    cdef Py_ssize_t start
    if post < 13 or body_end < 19 + 13:
        return False
    start = 19 + post + u16(event + 19 + 11) + event[19 + 8] + 1
    return body_end - start == length and memcmp(event + start, word, length) == 0


cdef inline uint64_t little_endian(const uint8_t* p, int n) noexcept:
    """The ``n``-byte little-endian number at ``p`` (a row image's integers and lengths)."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(n - 1, -1, -1):
        v = (v << 8) | p[i]
    return v


cdef inline uint64_t sign_extended(uint64_t v, int n) noexcept:
    """The ``n``-byte two's complement number ``v`` widened to 64 bits."""
    if n < 8 and v >> (n * 8 - 1):
        v |= ~((<uint64_t>1 << (n * 8)) - 1)
    return v


cdef inline uint64_t big_endian(const uint8_t* p, int n) noexcept:
    cdef uint64_t v = 0
    cdef int i
    for i in range(n):
        v = (v << 8) | p[i]
    return v


cdef uint32_t crc32(const uint8_t* p, Py_ssize_t n) noexcept
cdef Py_ssize_t put_decimal(Buffer out, const uint8_t* p, Py_ssize_t avail, int precision,
                            int scale) except -2
cdef int put_double(Buffer out, double value) except -1
cdef Py_ssize_t put_datetime2(Buffer out, const uint8_t* p, Py_ssize_t avail,
                              int fsp) except -2
cdef Py_ssize_t put_timestamp2(Buffer out, const uint8_t* p, Py_ssize_t avail,
                               int fsp) except -2
cdef int put_epoch_micros(Buffer out, uint64_t micros) except -1
cdef Py_ssize_t put_date(Buffer out, const uint8_t* p, Py_ssize_t avail) except -2
cdef Py_ssize_t put_time2(Buffer out, const uint8_t* p, Py_ssize_t avail, int fsp) except -2
cdef Py_ssize_t put_time2_text(Buffer out, const uint8_t* p, Py_ssize_t avail,
                               int fsp) except -2
cdef Py_ssize_t read_decimal128(const uint8_t* p, Py_ssize_t avail, int precision, int scale,
                                int128_t* unscaled) except -2
cdef Py_ssize_t read_datetime2_micros(const uint8_t* p, Py_ssize_t avail, int fsp,
                                      int64_t* micros, bint* valid) except -2
cdef Py_ssize_t read_timestamp2_micros(const uint8_t* p, Py_ssize_t avail, int fsp,
                                       int64_t* micros, bint* valid) except -2
cdef Py_ssize_t read_date_days(const uint8_t* p, Py_ssize_t avail, int32_t* days,
                               bint* valid) except -2
