# An Arrow column being filled (see _arrow_walk.pyx), shared with the snapshot chunks'
# frames (_snapshot_frames.pyx).

cimport cython

from changestream.native.json_text cimport Buffer


@cython.final
cdef class Column:
    cdef int width
    cdef Buffer data, offsets, valid
    cdef Py_ssize_t length, nulls
    cdef list values
    cdef object type
    cdef int _mark(self, bint present) except -1
    cdef int null(self) except -1
    cdef char* fixed(self) except NULL
    cdef int var(self, const char* s, Py_ssize_t n) except -1
    cdef int value(self, object value) except -1
    cdef int repeat(self, bytes value, Py_ssize_t times) except -1
