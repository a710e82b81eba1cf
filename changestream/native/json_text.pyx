# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""JSON text written straight into a growing buffer, byte for byte as orjson writes it:
integers, strings of UTF-8 text (escaped as orjson escapes them) and base64 of bytes. The
compiled snapshot rows and binlog rows share it."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdlib cimport free
from libc.string cimport memcpy

from changestream.native.memory cimport reserve

cdef const char* HEX = b"0123456789abcdef"
cdef const char* BASE64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef class Buffer:
    """Bytes written one after the other; ``size`` is how many (set it to 0 to reuse)."""

    def __dealloc__(self):
        free(self.data)

    cdef int reserve(self, Py_ssize_t more) except -1:
        return reserve(&self.data, &self.capacity, self.size + more, 4096)

    cdef int put(self, const char* src, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.data + self.size, src, n)
        self.size += n
        return 0

    cdef int put_bytes(self, bytes b) except -1:
        return self.put(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    cdef int put_uint(self, unsigned long long value) except -1:
        cdef char digits[20]
        cdef int i = 20
        while True:
            i -= 1
            digits[i] = <char>(48 + value % 10)
            value //= 10
            if value == 0:
                break
        return self.put(digits + i, 20 - i)

    cdef int put_int(self, long long value) except -1:
        if value < 0:
            self.put(b"-", 1)
            # -(value + 1) + 1: no overflow for the smallest long long
            return self.put_uint(<unsigned long long>(-(value + 1)) + 1)
        return self.put_uint(<unsigned long long>value)

    cdef int put_digits(self, unsigned long long value, int width) except -1:
        """``value`` in decimal, zero-padded to at least ``width`` digits (``%0*d``)."""
        cdef char digits[24]
        cdef int i = 24
        while True:
            i -= 1
            digits[i] = <char>(48 + value % 10)
            value //= 10
            if value == 0 and 24 - i >= width:
                break
        return self.put(digits + i, 24 - i)

    cdef bytes take(self, Py_ssize_t start, Py_ssize_t end):
        return PyBytes_FromStringAndSize(self.data + start, end - start)


cdef bint valid_utf8(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """Whether ``s`` is UTF-8 that Python's decoder takes (no overlong forms, surrogates or
    code points past U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
        elif 0xC2 <= c <= 0xDF:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif 0xE0 <= c <= 0xEF:
            if i + 2 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            c1 = s[i + 1]
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return False
            i += 3
        elif 0xF0 <= c <= 0xF4:
            if i + 3 >= n or (s[i + 1] & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 \
                    or (s[i + 3] & 0xC0) != 0x80:
                return False
            c1 = s[i + 1]
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
                return False
            i += 4
        else:
            return False
    return True


cdef int put_text(Buffer out, const unsigned char* s, Py_ssize_t n) except -1:
    """``s`` (valid UTF-8) as a JSON string, escaped as orjson escapes it."""
    out.reserve(6 * n + 2)
    out.size += text_json(out.data + out.size, s, n)
    return 0


cdef Py_ssize_t text_json(char* into, const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """``s`` (valid UTF-8) as a JSON string at ``into`` (room for ``6 * n + 2`` bytes),
    escaped as orjson escapes it: how many bytes it took."""
    cdef Py_ssize_t i, run = 0, k = 1
    cdef unsigned char c
    into[0] = b'"'
    for i in range(n):
        c = s[i]
        if c >= 0x20 and c != 34 and c != 92:
            continue
        memcpy(into + k, s + run, i - run)
        k += i - run
        run = i + 1
        into[k] = b'\\'
        if c == 34:
            into[k + 1] = b'"'
        elif c == 92:
            into[k + 1] = b'\\'
        elif c == 8:
            into[k + 1] = b'b'
        elif c == 9:
            into[k + 1] = b't'
        elif c == 10:
            into[k + 1] = b'n'
        elif c == 12:
            into[k + 1] = b'f'
        elif c == 13:
            into[k + 1] = b'r'
        else:
            into[k + 1], into[k + 2], into[k + 3] = b'u', b'0', b'0'
            into[k + 4], into[k + 5] = HEX[c >> 4], HEX[c & 15]
            k += 4
        k += 2
    memcpy(into + k, s + run, n - run)
    k += n - run
    into[k] = b'"'
    return k + 1


cdef int put_base64(Buffer out, const unsigned char* s, Py_ssize_t n,
                    Py_ssize_t pad_to) except -1:
    """``s`` followed by zero bytes up to ``pad_to`` bytes, as a JSON string of standard
    base64 with padding."""
    cdef Py_ssize_t total = n if n >= pad_to else pad_to
    cdef Py_ssize_t i = 0, k
    cdef unsigned int triple
    cdef unsigned char b0, b1, b2
    cdef char* o
    out.reserve((total + 2) // 3 * 4 + 2)
    o = out.data + out.size
    o[0] = b'"'
    k = 1
    while i + 3 <= total:
        b0 = s[i] if i < n else 0
        b1 = s[i + 1] if i + 1 < n else 0
        b2 = s[i + 2] if i + 2 < n else 0
        triple = (b0 << 16) | (b1 << 8) | b2
        o[k] = BASE64[(triple >> 18) & 63]
        o[k + 1] = BASE64[(triple >> 12) & 63]
        o[k + 2] = BASE64[(triple >> 6) & 63]
        o[k + 3] = BASE64[triple & 63]
        k += 4
        i += 3
    if total - i == 1:
        b0 = s[i] if i < n else 0
        o[k] = BASE64[b0 >> 2]
        o[k + 1] = BASE64[(b0 & 3) << 4]
        o[k + 2] = b'='
        o[k + 3] = b'='
        k += 4
    elif total - i == 2:
        b0 = s[i] if i < n else 0
        b1 = s[i + 1] if i + 1 < n else 0
        o[k] = BASE64[b0 >> 2]
        o[k + 1] = BASE64[((b0 & 3) << 4) | (b1 >> 4)]
        o[k + 2] = BASE64[(b1 & 15) << 2]
        o[k + 3] = b'='
        k += 4
    o[k] = b'"'
    out.size += k + 1
    return 0
