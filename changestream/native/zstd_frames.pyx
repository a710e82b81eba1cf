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


cdef class FrameDecompressor:
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
