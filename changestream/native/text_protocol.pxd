"""The text protocol's length-encoded values (a result row of the MySQL client protocol)
and its integers' text: the one reader the snapshot's compiled row paths share
(``snapshot._text_rows``, ``sinks.spark._snapshot_frames``)."""

from libc.stdint cimport uint64_t


cdef inline Py_ssize_t value_span(const unsigned char* b, Py_ssize_t i, Py_ssize_t size,
                                  Py_ssize_t* start, Py_ssize_t* n) noexcept nogil:
    """The length-encoded value at ``b[i]``: its ``start`` and length ``n`` (-1: NULL);
    returns the offset after it, or where the row ends too soon: -1 before the value,
    -2 inside its length, -3 inside the value."""
    cdef Py_ssize_t length, width, k
    if i >= size:
        return -1
    length = b[i]
    if length < 251:
        start[0] = i + 1
    elif length == 251:
        start[0], n[0] = i + 1, -1
        return i + 1
    else:
        width = 2 if length == 0xFC else 3 if length == 0xFD else 8
        if i + 1 + width > size:
            return -2
        length = 0
        for k in range(width - 1, -1, -1):
            length = (length << 8) | b[i + 1 + k]
        start[0] = i + 1 + width
    if length < 0 or start[0] + length > size:  # an 8-byte length past 63 bits: negative
        return -3
    n[0] = length
    return start[0] + length


cdef inline int cut_short(Py_ssize_t code) except -1:
    """Raises what :func:`value_span`'s ``code`` (negative) says."""
    raise ValueError("a row ends before its last column" if code == -1 else
                     "a row ends inside a value's length" if code == -2 else
                     "a row ends inside a value")


cdef inline Py_ssize_t text_value(const unsigned char* b, Py_ssize_t i, Py_ssize_t size,
                                  Py_ssize_t* start, Py_ssize_t* n) except -1:
    """:func:`value_span`, a row that ends too soon raised (``ValueError``)."""
    cdef Py_ssize_t after = value_span(b, i, size, start, n)
    if after < 0:
        cut_short(after)
    return after


cdef inline bint text_integer(const unsigned char* s, Py_ssize_t n, bint* negative,
                              uint64_t* value) noexcept:
    """Decimal integer text (a minus sign, up to 20 digits, leading zeros allowed) as its
    sign and magnitude; false for any other text, or one past 64 bits."""
    cdef Py_ssize_t k = 0
    cdef uint64_t v = 0, before
    negative[0] = n > 0 and s[0] == 45
    if negative[0]:
        k = 1
    if k >= n:
        return False
    while k < n:
        if s[k] < 48 or s[k] > 57:
            return False
        before = v
        v = v * 10 + (s[k] - 48)
        if v // 10 != before:  # past 64 bits
            return False
        k += 1
    value[0] = v
    return True


# What the packet at an offset of a result's buffer is (:func:`next_packet`).
cdef enum:
    PACKET_ROW = -1     # a row whole in the buffer
    PACKET_WHOLE = 0    # not whole in the buffer (or none left)
    PACKET_END = 1      # the end of the rows (an EOF packet)
    PACKET_FAILED = 2   # an error packet
    PACKET_LONG = 3     # a payload that goes on in the next packet (16 MiB or more)


cdef inline int next_packet(const unsigned char* b, Py_ssize_t at, Py_ssize_t size,
                            Py_ssize_t* length) noexcept nogil:
    """What the packet at ``b[at]`` is (``PACKET_*``); ``length``: its payload's length
    (the payload starts at ``at + 4``)."""
    if at + 4 > size:
        return PACKET_WHOLE
    length[0] = b[at] | (b[at + 1] << 8) | (b[at + 2] << 16)
    if length[0] == 0xFFFFFF:
        return PACKET_LONG
    if at + 4 + length[0] > size:
        return PACKET_WHOLE
    if b[at + 4] == 0xFE and length[0] < 9:
        return PACKET_END
    if b[at + 4] == 0xFF:
        return PACKET_FAILED
    return PACKET_ROW
