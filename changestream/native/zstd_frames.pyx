# cython: language_level=3
"""zstd frames unpacked while holding the interpreter lock.

python-zstandard lets the lock go for every call. The router's reading thread unpacks each
of MySQL's compressed transactions to see whether a decode worker may take it; with the
router's other threads busy, taking the lock back after each small unpacking cost more than
the unpacking (about a sixth of the reading thread's time on a binlog of small compressed
transactions). Small frames are unpacked here without letting it go; built only where
libzstd's header is (Debian's ``libzstd-dev``), else ``zstandard`` is used.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from changestream.native.binlog_values cimport query_is


cdef extern from "zstd.h":
    ctypedef struct ZSTD_DCtx:
        pass
    ZSTD_DCtx* ZSTD_createDCtx()
    size_t ZSTD_freeDCtx(ZSTD_DCtx* dctx)
    size_t ZSTD_decompressDCtx(ZSTD_DCtx* dctx, void* dst, size_t capacity, const void* src,
                               size_t size) nogil
    unsigned ZSTD_isError(size_t code)
    const char* ZSTD_getErrorName(size_t code)


class ZstdFrameError(ValueError):
    """A frame that does not unpack to the size it was said to have."""


cdef class _FrameDecompressor:
    """Unpacks whole zstd frames whose unpacked size is known."""

    cdef ZSTD_DCtx* dctx

    def __cinit__(self):
        self.dctx = ZSTD_createDCtx()
        if self.dctx is NULL:
            raise MemoryError("ZSTD_createDCtx")

    def __dealloc__(self):
        if self.dctx is not NULL:
            ZSTD_freeDCtx(self.dctx)

    def decompress(self, bytes frame, Py_ssize_t size):
        """``frame`` unpacked; it must hold exactly ``size`` bytes."""
        out = PyBytes_FromStringAndSize(NULL, size)
        cdef size_t got = ZSTD_decompressDCtx(
            self.dctx, PyBytes_AS_STRING(out), <size_t>size, PyBytes_AS_STRING(frame),
            <size_t>PyBytes_GET_SIZE(frame))
        if ZSTD_isError(got):
            raise ZstdFrameError(ZSTD_getErrorName(got).decode())
        if got != <size_t>size:
            raise ZstdFrameError(f"unpacked to {got} bytes, not {size}")
        return out


cdef inline Py_ssize_t _packed(const unsigned char* p, Py_ssize_t at, Py_ssize_t end,
                               unsigned long long* value) noexcept:
    """A packed integer at ``at``: where it ends (-1: cut short)."""
    cdef unsigned char first
    cdef int n, i
    if at >= end:
        return -1
    first = p[at]
    if first < 251:
        value[0] = first
        return at + 1
    n = 2 if first == 252 else 3 if first == 253 else 8 if first == 254 else -1
    if n < 0 or at + 1 + n > end:
        return -1
    value[0] = 0
    for i in range(n):
        value[0] |= (<unsigned long long>p[at + 1 + i]) << (8 * i)
    return at + 1 + n


def plain_payload_size(bytes body, object kind_of, bytes row_codes, int query_post,
                       Py_ssize_t limit):
    """What :func:`changestream.parallel.payloads.plain_payload_size` says of a
    TRANSACTION_PAYLOAD body, for payloads of at most ``limit`` unpacked bytes (``None``
    for bigger ones and any the Python check would also refuse); ``row_codes``: a flag per
    event type that may sit between BEGIN and the end as it is, ``kind_of`` asked about the
    rest (TABLE_MAPs, other statements)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(body)
    cdef const unsigned char* rows = <const unsigned char*>PyBytes_AS_STRING(row_codes)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(body), at = 0, after, start, size, count = 0
    cdef unsigned long long kind, length, value, compression = 0, unpacked = 0
    cdef const unsigned char* e
    cdef unsigned char code
    cdef str wanted
    while at < n:
        at = _packed(p, at, n, &kind)
        if at < 0:
            return None
        if kind == 0:
            break
        at = _packed(p, at, n, &length)
        # Compared unsigned: a length past 2**63 is negative as a Py_ssize_t.
        if at < 0 or length > <unsigned long long>(n - at) or _packed(p, at, n, &value) < 0:
            return None
        if kind == 2:
            compression = value
        elif kind == 3:
            unpacked = value
        at += length
    if unpacked == 0 or unpacked > <unsigned long long>limit or \
            (compression != 0 and compression != 255):
        return None
    if compression == 255:
        if <unsigned long long>(n - at) != unpacked:
            return None
        data = body[at:]
    else:
        try:
            data = _SHARED.decompress(body[at:], <Py_ssize_t>unpacked)
        except ZstdFrameError:
            return None
    e = <const unsigned char*>PyBytes_AS_STRING(data)
    size = PyBytes_GET_SIZE(data)
    start = 0
    while start < size:
        if size - start < 19:
            return None
        length = e[start + 9] | (e[start + 10] << 8) | (e[start + 11] << 16) | \
            (<unsigned long long>e[start + 12] << 24)
        if length < 19 or <Py_ssize_t>length > size - start:
            return None
        after = start + <Py_ssize_t>length
        code = e[start + 4]
        if after == size:
            wanted = "commit"
            if code == 16 or (code == 2 and query_is(e + start, length, query_post,
                                                          b"COMMIT", 6)):
                wanted = None
        elif count == 0:
            wanted = "begin"
            if code == 2 and query_is(e + start, length, query_post, b"BEGIN", 5):
                wanted = None
        else:
            wanted = None if rows[code] else "row"
        if wanted is not None and kind_of(data[start:after]) != wanted:
            return None
        start = after
        count += 1
    return <Py_ssize_t>unpacked if count >= 2 else None


cdef _FrameDecompressor _SHARED = _FrameDecompressor()


def decompress(bytes frame, Py_ssize_t size):
    """``frame`` unpacked (it must hold exactly ``size`` bytes), with the one context every
    thread shares: the lock is held throughout."""
    return _SHARED.decompress(frame, size)
