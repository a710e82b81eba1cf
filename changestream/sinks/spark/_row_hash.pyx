# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""SipHash-2-4 with a 128-bit tag (Aumasson and Bernstein's reference: ``siphash.c``,
``vectors_sip128``) over each value of a binary Arrow array, for the row hashes of a
keyless Iceberg mirror (:func:`changestream.sinks.spark.iceberg.key_index.row_hashes`),
where a ``hashlib`` call per row was most of the plan's time. The loop runs without the
interpreter lock."""

from libc.stdint cimport int32_t, uint8_t, uint64_t, uintptr_t

import pyarrow as pa


cdef inline uint64_t _rotl(uint64_t x, int b) noexcept nogil:
    return (x << b) | (x >> (64 - b))


cdef inline uint64_t _load64(const uint8_t* p) noexcept nogil:
    # little-endian whatever the host's order (a compiler makes it one load on x86 and ARM)
    return (<uint64_t>p[0] | (<uint64_t>p[1] << 8) | (<uint64_t>p[2] << 16)
            | (<uint64_t>p[3] << 24) | (<uint64_t>p[4] << 32) | (<uint64_t>p[5] << 40)
            | (<uint64_t>p[6] << 48) | (<uint64_t>p[7] << 56))


cdef inline void _store64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(v >> (8 * i))


cdef inline void _rounds(uint64_t* v, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        v[0] += v[1]
        v[1] = _rotl(v[1], 13)
        v[1] ^= v[0]
        v[0] = _rotl(v[0], 32)
        v[2] += v[3]
        v[3] = _rotl(v[3], 16)
        v[3] ^= v[2]
        v[0] += v[3]
        v[3] = _rotl(v[3], 21)
        v[3] ^= v[0]
        v[2] += v[1]
        v[1] = _rotl(v[1], 17)
        v[1] ^= v[2]
        v[2] = _rotl(v[2], 32)


cdef void _siphash128(const uint8_t* data, size_t length, uint64_t k0, uint64_t k1,
                      uint8_t* out) noexcept nogil:
    cdef uint64_t v[4]
    cdef uint64_t m, b
    cdef size_t i, end = length - (length % 8)
    cdef int left = <int>(length & 7)
    v[0] = <uint64_t>0x736f6d6570736575 ^ k0
    v[1] = <uint64_t>0x646f72616e646f6d ^ k1 ^ <uint64_t>0xee
    v[2] = <uint64_t>0x6c7967656e657261 ^ k0
    v[3] = <uint64_t>0x7465646279746573 ^ k1
    i = 0
    while i < end:
        m = _load64(data + i)
        v[3] ^= m
        _rounds(v, 2)
        v[0] ^= m
        i += 8
    b = (<uint64_t>length) << 56
    while left > 0:
        left -= 1
        b |= (<uint64_t>data[end + left]) << (8 * left)
    v[3] ^= b
    _rounds(v, 2)
    v[0] ^= b
    v[2] ^= <uint64_t>0xee
    _rounds(v, 4)
    _store64(out, v[0] ^ v[1] ^ v[2] ^ v[3])
    v[1] ^= <uint64_t>0xdd
    _rounds(v, 4)
    _store64(out + 8, v[0] ^ v[1] ^ v[2] ^ v[3])


def siphash128(data: bytes, key: bytes) -> bytes:
    """The 16-byte SipHash-2-4 tag of ``data`` under the 16-byte ``key``."""
    if len(key) != 16:
        raise ValueError("a SipHash key has 16 bytes")
    cdef const uint8_t[::1] k = key
    cdef const uint8_t[::1] d = data
    cdef uint8_t[16] out
    cdef const uint8_t* start = &d[0] if len(data) else <const uint8_t*>&k[0]
    _siphash128(start, len(data), _load64(&k[0]), _load64(&k[8]), out)
    return bytes(out[:16])


def value_hashes(values: object, key: bytes) -> pa.Array:
    """The 16-byte SipHash-2-4 tag (under ``key``) of each value of ``values``, a binary
    Arrow array or chunked array without NULLs, as a ``fixed_size_binary(16)`` array."""
    if len(key) != 16:
        raise ValueError("a SipHash key has 16 bytes")
    cdef const uint8_t[::1] k = key
    cdef uint64_t k0 = _load64(&k[0]), k1 = _load64(&k[8])
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    cdef Py_ssize_t total = len(values), at = 0, i, n, offset
    out = bytearray(16 * total)
    cdef uint8_t[::1] o = out
    cdef const int32_t* offsets
    cdef const uint8_t* data
    cdef uint8_t* into = &o[0] if total else NULL
    for chunk in chunks:
        if chunk.type != pa.binary():
            raise TypeError(f"value_hashes takes binary values, not {chunk.type}")
        if chunk.null_count:
            raise ValueError("value_hashes takes no NULL")
        n = len(chunk)
        if not n:
            continue
        buffers = chunk.buffers()
        offset = chunk.offset
        offsets = (<const int32_t*><uintptr_t>buffers[1].address) + offset
        data = <const uint8_t*><uintptr_t>(buffers[2].address if buffers[2] is not None
                                           and buffers[2].size else 0)
        with nogil:
            for i in range(n):
                _siphash128(data + offsets[i], <size_t>(offsets[i + 1] - offsets[i]),
                            k0, k1, into + 16 * (at + i))
        at += n
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), total, [None, pa.py_buffer(out)])
