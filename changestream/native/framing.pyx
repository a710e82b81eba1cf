# cython: boundscheck=False, wraparound=False, cdivision=True
"""Compiled framing: whole events cut out of a buffer many at a time, for the two readers
whose loops otherwise spend more per event than the segmenter after them.

Each function takes the common case only and stops at the first thing it does not take,
returning where; the Python reader (:mod:`changestream.sources.files`,
:mod:`changestream.sources.live`) goes on from there as it would without this module,
so every error and every unusual event is still handled in one place.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_FromLongLong
from cpython.object cimport PyTypeObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from libc.stdint cimport uint32_t

from changestream.native.binlog_values cimport query_is

from changestream.sources.raw import RawEvent


cdef extern from "Python.h":
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)
    void PyObject_GC_UnTrack(object op)


cdef PyTypeObject* _RAW_EVENT = <PyTypeObject*>RawEvent


cdef inline object _raw_event(str name, long long offset, const unsigned char* data,
                              Py_ssize_t size):
    """``RawEvent(name, offset, data[:size])``, made as a tuple of its type is made (a
    call of ``tuple.__new__`` cost four times as much as the event's bytes)."""
    event = PyType_GenericAlloc(_RAW_EVENT, 3)
    # Holds a str, an int and bytes: no cycle to find (as the collector itself would
    # untrack such a tuple), and half a million tracked objects a second set it off often.
    PyObject_GC_UnTrack(event)
    Py_INCREF(name)
    PyTuple_SET_ITEM(event, 0, name)
    item = PyLong_FromLongLong(offset)
    Py_INCREF(item)
    PyTuple_SET_ITEM(event, 1, item)
    item = PyBytes_FromStringAndSize(<const char*>data, size)
    Py_INCREF(item)
    PyTuple_SET_ITEM(event, 2, item)
    return event

cdef enum:
    HEADER_SIZE = 19
    FORMAT_DESCRIPTION = 15
    QUERY = 2
    ROTATE = 4


cdef inline uint32_t _u32(const unsigned char* p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


def file_events(const unsigned char[::1] buf, Py_ssize_t p, str name, long long offset,
                long long start):
    """The whole events of a binlog file's bytes ``buf`` from ``p`` (at file ``offset``):
    ``(events, p, offset)`` where it stopped. It stops before an event cut short by the
    buffer's end, an event whose size is smaller than its header, and a FORMAT_DESCRIPTION
    event while ``offset < start`` (the caller skips ahead after it); events before
    ``start`` are left out."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef const unsigned char* data = &buf[0] if n else NULL
    cdef uint32_t size
    cdef list events = []
    while n - p >= HEADER_SIZE:
        size = _u32(data + p + 9)
        if size < HEADER_SIZE or <Py_ssize_t>size > n - p:
            break
        if offset < start:
            if data[p + 4] == FORMAT_DESCRIPTION:
                break
        else:
            events.append(_raw_event(name, offset, data + p, size))
        p += size
        offset += size
    return events, p, offset


def dump_events(const unsigned char[::1] buf, Py_ssize_t p, str name,
                const unsigned char[::1] kept, int bracket_tail):
    """The ordinary events of a binlog dump stream's packets in ``buf`` from ``p``:
    ``(events, p, log_pos)``, ``log_pos`` being the last event's end (0 if none). An
    ordinary packet is an OK byte and an event shorter than 16 MB, not ROTATE, with its end
    position set; it stops at any other packet and before one cut short. Events whose
    type's byte in ``kept`` (256 bytes) is 0 are left out, and with ``bracket_tail`` not
    -1 (the checksum's size), so are bare BEGIN and COMMIT QUERY events."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef const unsigned char* data = &buf[0] if n else NULL
    cdef const unsigned char* event
    cdef Py_ssize_t length, body
    cdef uint32_t log_pos, last = 0
    cdef list events = []
    if kept.shape[0] != 256:
        raise ValueError("kept: one byte per event type")
    while n - p >= 4:
        length = data[p] | (<Py_ssize_t>data[p + 1] << 8) | (<Py_ssize_t>data[p + 2] << 16)
        if n - p - 4 < length:
            break
        body = p + 4
        if length <= 20 or data[body] != 0 or length >= 0xFFFFFF or data[body + 5] == ROTATE \
                or _u32(data + body + 10) != <uint32_t>(length - 1):
            break  # (an event whose size field is not the packet's: the Python path says so)
        log_pos = _u32(data + body + 14)
        if log_pos == 0:
            break
        p = body + length
        last = log_pos
        event = data + body + 1
        # (a bare BEGIN or COMMIT: the dump protocol's servers write a 13-byte QUERY
        # post-header, binlog version 4)
        if not kept[event[4]] or (bracket_tail >= 0 and event[4] == QUERY and (
                query_is(event, length - 1 - bracket_tail, 13, b"BEGIN", 5)
                or query_is(event, length - 1 - bracket_tail, 13, b"COMMIT", 6))):
            continue
        events.append(_raw_event(name, <long long>log_pos - length + 1, event, length - 1))
    return events, p, last
