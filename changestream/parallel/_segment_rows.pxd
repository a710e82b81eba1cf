# The compiled decode worker path's event walk and table plans (see _segment_rows.pyx),
# shared with the encoders that write other forms of its rows (_segment_arrow.pyx).

from libc.stdint cimport int64_t, uint8_t, uint64_t

from changestream.native.json_text cimport Buffer

# How a column's values are read.
cdef enum:
    K_INT = 0        # size bytes little-endian, signed or not
    K_DOUBLE = 1
    K_DECIMAL = 2
    K_DATETIME2 = 3
    K_TIMESTAMP2 = 4
    K_DATE = 5
    K_TIME2 = 6
    K_YEAR = 7
    K_UTF8 = 8       # length-prefixed UTF-8 text
    K_ASCII = 9      # length-prefixed text in a charset whose ASCII bytes are ASCII
    K_BYTES = 10     # length-prefixed bytes (padded to a width)
    K_GENERIC = 11   # the column's Python reader

cdef enum:
    OP_INSERT = 0
    OP_UPDATE = 1
    OP_DELETE = 2


cdef struct Slot:
    # one change of the open transaction: its op, its table (index into the transaction's
    # plans), the spans of its before image, after image and key in ``rows`` (equal ends:
    # null), where its rows event is, its row in that event, its statement (index)
    int op
    int plan
    Py_ssize_t before0, before1, after0, after1, key0, key1
    int64_t pos
    Py_ssize_t row
    Py_ssize_t sql


cdef class TablePlan:
    cdef int ncols
    cdef int* kinds
    cdef int* sizes       # int bytes, length-prefix bytes, fractional digits, ...
    cdef int* extras      # unsigned, BINARY width, DECIMAL scale, ...
    cdef int* precisions
    cdef int* key         # primary key column indexes
    cdef int nkey
    cdef bint direct
    cdef tuple prefixes   # b'{"a":', b',"b":', ...
    cdef tuple key_prefixes
    cdef tuple readers    # Python value readers (generic columns)
    cdef tuple formats    # Python temporal writers or None (generic columns)
    cdef bytes names      # b'"database":"d","table":"t",'
    cdef bint generic     # some column is read by its Python reader
    cdef tuple counted    # (database, table, op) keys of the metrics' counts
    cdef readonly object schema


cdef tuple column_kind(object column)
cdef bint is_ascii(const uint8_t* s, Py_ssize_t n) noexcept


cdef class SegmentEncoder:
    cdef public object decoder, filter, table_counts
    cdef public object refusal  # why the last segment was given up (for the tests)
    cdef public bint include_sql
    cdef object _shapes, _formats, _format_description, _last_commit_seconds
    cdef dict _table_maps
    cdef Buffer rows      # the open transaction's images
    cdef Buffer record
    cdef Py_ssize_t* starts
    cdef Py_ssize_t* ends
    cdef int width        # columns starts/ends can hold
    cdef Slot* slots      # the open transaction's changes
    cdef Py_ssize_t nslots, slot_capacity
    cdef bytes _commit_text
    cdef bytes _sid           # the last MySQL GTID's server UUID, and as text
    cdef str _sid_text, _gtid
    cdef Buffer _scratch      # short texts made one at a time
    cdef bytes _file_json, _record_end
    # the rows event being read: the segment's bytes, where its body is, the body as bytes
    # once a Python reader needs it
    cdef bytes _data
    cdef Py_ssize_t _body_start, _body_end
    cdef object _body

    cdef int _columns(self, int n) except -1
    cdef Slot* _slot(self) except NULL
    cdef object body(self)
    cdef int _begin(self, str name, str stamp) except -1
    cdef Py_ssize_t _read_rows(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                               Py_ssize_t end, int kind, int64_t offset, list tx_plans,
                               int sql_index) except -1
    cdef int _commit(self, list lines, list tx_plans, list sqls, str tid, object gtid,
                     bytes gtid_json, object xid, int64_t commit_micros,
                     object commit) except -1
    cdef Py_ssize_t _image(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                           Py_ssize_t end) except -1
    cdef Py_ssize_t _generic(self, TablePlan plan, int j, Py_ssize_t pos) except -1
    cdef object _encode(self, str file, bytes data, offsets, str stamp, list lines)
    cdef Py_ssize_t _full_images(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                                 Py_ssize_t end, int kind) except -1
    cdef int _key(self, TablePlan plan, Slot* slot) except -1
    cdef int64_t _mysql_gtid(self, const uint8_t* b, Py_ssize_t p, Py_ssize_t end) except -2
    cdef bytes _micros_json(self, int64_t micros)
    cdef bytes _mariadb_gtid_json(self, uint64_t domain, uint64_t server_id,
                                  uint64_t seq_no)
    cdef bytes _commit_json(self, object commit)
    cdef int _records(self, list lines, list tx_plans, list sqls, bytes tid, bytes gtid,
                      object xid, bytes commit) except -1
