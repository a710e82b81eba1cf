"""The text protocol's length-encoded values (a result row of the MySQL client protocol):
the one reader the snapshot's compiled row paths share (``snapshot._text_rows``,
``sinks.spark._snapshot_frames``)."""


cdef inline Py_ssize_t text_value(const unsigned char* b, Py_ssize_t i, Py_ssize_t size,
                                  Py_ssize_t* start, Py_ssize_t* n) except -1:
    """The length-encoded value at ``b[i]``: its ``start`` and length ``n`` (-1: NULL);
    returns the offset after it."""
    cdef Py_ssize_t length, width, k
    if i >= size:
        raise ValueError("a row ends before its last column")
    length = b[i]
    if length < 251:
        start[0] = i + 1
    elif length == 251:
        start[0], n[0] = i + 1, -1
        return i + 1
    else:
        width = 2 if length == 0xFC else 3 if length == 0xFD else 8
        if i + 1 + width > size:
            raise ValueError("a row ends inside a value's length")
        length = 0
        for k in range(width - 1, -1, -1):
            length = (length << 8) | b[i + 1 + k]
        start[0] = i + 1 + width
    if start[0] + length > size:
        raise ValueError("a row ends inside a value")
    n[0] = length
    return start[0] + length
