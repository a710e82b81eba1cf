# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A keyed mirror's row delta over one integer key column, in one pass over a batch's
changes (:func:`changestream.sinks.spark.iceberg.mirror_plan.mirror_delta`): per key its
first and last event, kept in a hash table of the batch's keys. Arrow's group-by did the
same through a hash aggregation and its allocations: alone, the whole plan took about twice
the time it takes with this pass; in a busy landing several times, most of it the kernel's
page faults of the aggregation's fresh memory. The loop runs without the interpreter
lock."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc

import pyarrow as pa

cdef enum:
    _INSERT = 0
    _UPDATE = 1
    _DELETE = 2

#: The op codes of ``ops`` (one byte a row); any other op (a snapshot's row: an upsert
#: whose key the mirror may have) is 3.
INSERT, UPDATE, DELETE, OTHER = _INSERT, _UPDATE, _DELETE, 3


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    # splitmix64's finalizer: consecutive keys spread over the table
    x ^= x >> 30
    x *= <uint64_t>0xbf58476d1ce4e5b9
    x ^= x >> 27
    x *= <uint64_t>0x94d049bb133111eb
    x ^= x >> 31
    return x


cdef const int64_t* _values(object array) except? NULL:
    if array.type != pa.int64() or array.null_count:
        raise TypeError("key_events takes int64 arrays without NULLs")
    return (<const int64_t*><uintptr_t>array.buffers()[1].address) + <Py_ssize_t>array.offset


cdef const uint8_t* _bytes(object array) except? NULL:
    if array.type != pa.uint8() or array.null_count:
        raise TypeError("key_events takes uint8 codes without NULLs")
    return (<const uint8_t*><uintptr_t>array.buffers()[1].address) + <Py_ssize_t>array.offset


def key_events(after: pa.Array, before: pa.Array, moved: pa.Array, ops: pa.Array,
               bint append_new_keys) -> tuple[pa.Array, pa.Array, int]:
    """The row delta of a batch's changes to a table keyed by one integer column.

    ``after``: each row's key (int64); ``before``: its key before an update (int64, read
    only where ``moved``); ``moved``: 1 where an update changes the row's key (uint8);
    ``ops``: each row's op code (:data:`INSERT` ...). Every row is an event of its key,
    ordered 2i+1; an update that moves a key is also an event of its old key, 2i.
    Returns (a boolean mask of the rows that are their key's last event and no delete:
    the images the mirror keeps; the keys to delete first, in the order of their first
    events, int64: every key the batch changes, but those it INSERTs first when
    ``append_new_keys``; how many rows the mask holds)."""
    cdef Py_ssize_t n = len(after)
    if len(before) != n or len(moved) != n or len(ops) != n:
        raise ValueError("key_events takes arrays of one length")
    mask = bytearray(n)
    if not n:
        return (pa.array([], pa.bool_()), pa.array([], pa.int64()), 0)
    cdef const int64_t* a = _values(after)
    cdef const int64_t* b = _values(before)
    cdef const uint8_t* m = _bytes(moved)
    cdef const uint8_t* op = _bytes(ops)
    cdef uint8_t[::1] keep = mask
    cdef Py_ssize_t events = n, i
    for i in range(n):
        events += m[i]
    if events >= 0x7fffffff:  # the table's slots hold an entry's index as an int32
        raise ValueError(f"key_events takes fewer than 2**31 events, not {events}")
    cdef uint64_t size = 16
    while size < <uint64_t>(2 * events):
        size <<= 1
    cdef uint64_t full = size - 1
    # the table: a slot holds the index of its key's entry (-1: empty); an entry, a key
    # with its first and last event, in the order keys are first seen
    cdef int32_t* slots = <int32_t*>malloc(size * sizeof(int32_t))
    cdef int64_t* keys = <int64_t*>malloc(events * sizeof(int64_t))
    cdef int64_t* first = <int64_t*>malloc(events * sizeof(int64_t))
    cdef int64_t* last = <int64_t*>malloc(events * sizeof(int64_t))
    cdef int64_t* gone = <int64_t*>malloc(events * sizeof(int64_t))
    if slots == NULL or keys == NULL or first == NULL or last == NULL or gone == NULL:
        free(slots); free(keys); free(first); free(last); free(gone)
        raise MemoryError()
    cdef Py_ssize_t count = 0, deleted = 0, present = 0, e, row
    cdef int64_t key, event, lead
    cdef uint64_t at
    cdef int step
    cdef uint8_t lead_op
    try:
        with nogil:
            for at in range(size):
                slots[at] = -1
            for i in range(n):
                for step in range(2):
                    if step == 0:
                        if not m[i]:
                            continue
                        key = b[i]
                        event = 2 * i
                    else:
                        key = a[i]
                        event = 2 * i + 1
                    at = _mix(<uint64_t>key) & full
                    while slots[at] >= 0 and keys[slots[at]] != key:
                        at = (at + 1) & full
                    if slots[at] < 0:
                        slots[at] = <int32_t>count
                        keys[count] = key
                        first[count] = event
                        count += 1
                    last[slots[at]] = event
            for e in range(count):
                event = last[e]
                if event & 1:
                    row = event >> 1
                    if op[row] != _DELETE:
                        keep[row] = 1
                        present += 1
                lead = first[e]
                lead_op = op[lead >> 1] if lead & 1 else _UPDATE
                if not (append_new_keys and lead_op == _INSERT):
                    gone[deleted] = keys[e]
                    deleted += 1
        out = pa.py_buffer(bytes((<char*>gone)[:deleted * sizeof(int64_t)])) if deleted \
            else None
    finally:
        free(slots); free(keys); free(first); free(last); free(gone)
    kept = pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(mask)])
    deletes = pa.Array.from_buffers(pa.int64(), deleted, [None, out]) if deleted \
        else pa.array([], pa.int64())
    return kept.cast(pa.bool_()), deletes, present
