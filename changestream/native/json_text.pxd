# The JSON writing parts the compiled modules share (see json_text.pyx).

cdef class Buffer:
    cdef char* data
    cdef Py_ssize_t size, capacity
    cdef int reserve(self, Py_ssize_t more) except -1
    cdef int put(self, const char* src, Py_ssize_t n) except -1
    cdef int put_bytes(self, bytes b) except -1
    cdef int put_int(self, long long value) except -1
    cdef int put_uint(self, unsigned long long value) except -1
    cdef int put_digits(self, unsigned long long value, int width) except -1
    cdef bytes take(self, Py_ssize_t start, Py_ssize_t end)

cdef bint valid_utf8(const unsigned char* s, Py_ssize_t n) noexcept nogil
cdef Py_ssize_t text_json(char* into, const unsigned char* s, Py_ssize_t n) noexcept nogil
cdef int put_text(Buffer out, const unsigned char* s, Py_ssize_t n) except -1
cdef int put_base64(Buffer out, const unsigned char* s, Py_ssize_t n,
                    Py_ssize_t pad_to) except -1
