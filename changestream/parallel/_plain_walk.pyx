# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled: the segmenter's common case, many events at a time. A plain transaction's
GTID event, BEGIN, rows events, TABLE_MAPs seen before and XID or COMMIT are taken into
the open transaction and the pending segment without a Python step per event.

:meth:`PlainWalk.walk` stops before the first event it does not take, without touching
it: the segmenter's Python loop (:mod:`changestream.parallel.segments`) handles that one
as it would without this module, so every decision but the common case is made in one
place. Built by the install script; without it the Python loop takes every event.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM

from changestream.native.binlog_values cimport query_is

from changestream.decoding import event_types as et
from changestream.transactions.plain import MARIADB_FLAGS_AT, MYSQL_GTID_EVENTS, NOT_PLAIN

# What an event type is to the walk.
cdef enum:
    OTHER = 0
    ROWS = 1  # a rows event, or an annotation read by someone
    ANNOTATION = 2
    TABLE_MAP = 3
    QUERY = 4
    XID = 5
    MYSQL_GTID = 6
    MARIADB_GTID = 7
    HEADER_SIZE = 19


def _kinds() -> bytes:
    kinds = bytearray(256)
    for code in et.ROWS_KINDS:
        kinds[code] = ROWS
    kinds[et.ROWS_QUERY] = kinds[et.MARIADB_ANNOTATE_ROWS] = ANNOTATION
    kinds[et.TABLE_MAP] = TABLE_MAP
    kinds[et.QUERY] = QUERY
    kinds[et.XID] = XID
    for code in MYSQL_GTID_EVENTS:
        kinds[code] = MYSQL_GTID
    kinds[et.MARIADB_GTID] = MARIADB_GTID
    return bytes(kinds)


cdef bytes _KINDS = _kinds()
cdef Py_ssize_t _FLAGS_AT = MARIADB_FLAGS_AT
cdef int _NOT_PLAIN = NOT_PLAIN


cdef class PlainWalk:
    """The segmenter's state a walk shares with its Python loop: the open transaction
    (``current``, ``size`` bytes), the pending segment's events (``pending``,
    ``pending_bytes``), and ``due`` when the walk stopped because a segment is due."""

    cdef public list current
    cdef public Py_ssize_t size
    cdef public list pending
    cdef public Py_ssize_t pending_bytes
    cdef public bint due
    cdef public dict names_logged  # a TABLE_MAP's bytes but the table id: logs its names
    cdef public object decoder
    # Schemas the loop resolved for TABLE_MAPs that do not log names (None: a table nobody
    # reads), valid while the decoder's table_maps_epoch and table_filter are these.
    cdef public dict resolved
    cdef public object epoch, filter
    cdef public dict pending_schemas  # those of the pending segment's TABLE_MAPs
    cdef public object kept  # a snapshot's coordinator, or None
    cdef public object kept_version  # the coordinator's version names_logged is valid for
    cdef public bint annotations
    cdef public Py_ssize_t transaction_bytes, segment_events, segment_bytes

    def __init__(self, object decoder, dict names_logged, object kept, bint annotations,
                 Py_ssize_t transaction_bytes, Py_ssize_t segment_events,
                 Py_ssize_t segment_bytes):
        self.decoder = decoder
        self.resolved = {}
        self.epoch = -1
        self.filter = None
        self.pending_schemas = {}
        self.names_logged = names_logged
        self.kept = kept
        self.kept_version = -1
        self.annotations = annotations
        self.transaction_bytes = transaction_bytes
        self.segment_events = segment_events
        self.segment_bytes = segment_bytes
        self.current = []
        self.size = 0
        self.pending = []
        self.pending_bytes = 0
        self.due = False

    def walk(self, list batch, Py_ssize_t i, int tail, int query_post, int table_map_post,
             bint can_open):
        """Take ``batch``'s events (raw events) from ``i`` while each is the common case;
        return where it stopped. ``tail``: the checksum's size; the QUERY and TABLE_MAP
        post-header lengths; ``can_open``: a worker may take a transaction that begins."""
        cdef Py_ssize_t n = PyList_GET_SIZE(batch)
        cdef const unsigned char* kinds = <const unsigned char*><const char*>_KINDS
        cdef const unsigned char* data
        cdef const unsigned char* first
        cdef Py_ssize_t length
        cdef int kind
        cdef object raw, key, decoder
        cdef PyObject* found
        cdef bytes event
        cdef list current
        self.due = False
        while i < n:
            raw = <object>PyList_GET_ITEM(batch, i)
            event = <bytes>PyTuple_GET_ITEM(raw, 2)
            data = <const unsigned char*><const char*>event
            length = len(event)
            if length < HEADER_SIZE:
                return i
            kind = kinds[data[4]]
            current = self.current
            if not current:
                if can_open and (kind == MYSQL_GTID or (
                        kind == MARIADB_GTID and length > _FLAGS_AT
                        and not (data[_FLAGS_AT] & _NOT_PLAIN))):
                    self.current = [raw]
                    self.size = length
                    i += 1
                    continue
                return i
            if kind == ANNOTATION:
                if not self.annotations:
                    i += 1  # read by no one: not copied and sent to a worker
                    continue
                kind = ROWS
            if kind == ROWS or kind == TABLE_MAP:
                if self.size + length > self.transaction_bytes:
                    return i
                if kind == TABLE_MAP:
                    if self.kept is not None and self.kept.version != self.kept_version:
                        return i
                    key = event[HEADER_SIZE + table_map_post - 2:length - tail]
                    found = PyDict_GetItem(self.names_logged, key)
                    if found == NULL:
                        return i
                    if <object>found is not True:
                        if <object>found is not None:
                            return i  # a table a snapshot tracks, or one not read
                        # Its names are not logged: the schema the loop resolved for it.
                        decoder = self.decoder
                        if decoder.table_maps_epoch != self.epoch or \
                                decoder.table_filter is not self.filter:
                            return i
                        found = PyDict_GetItem(self.resolved, key)
                        if found == NULL:
                            return i
                        if <object>found is not None:
                            self.pending_schemas[key] = <object>found
                current.append(raw)
                self.size += length
                i += 1
                continue
            if kind == QUERY and PyList_GET_SIZE(current) == 1 and \
                    query_is(data, length - tail, query_post, b"BEGIN", 5):
                first = <const unsigned char*><const char*><bytes>PyTuple_GET_ITEM(
                    <object>PyList_GET_ITEM(current, 0), 2)
                if kinds[first[4]] == MARIADB_GTID:
                    return i
                current.append(raw)
                self.size += length
                i += 1
                continue
            if kind == XID or (kind == QUERY and
                               query_is(data, length - tail, query_post, b"COMMIT", 6)):
                if self.pending and <object>PyTuple_GET_ITEM(
                        <object>PyList_GET_ITEM(self.pending, 0), 0) != \
                        <object>PyTuple_GET_ITEM(raw, 0):
                    return i  # a segment holds one file's events: the loop submits first
                current.append(raw)
                self.pending.extend(current)
                self.pending_bytes += self.size + length
                self.current = []
                i += 1
                if PyList_GET_SIZE(self.pending) >= self.segment_events or \
                        self.pending_bytes >= self.segment_bytes:
                    self.due = True
                    return i
                continue
            return i
        return i
