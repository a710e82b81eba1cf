# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled decode worker fast path: a segment's plain DML transactions from their bytes
straight to records, the ones the worker's general path (the router's decoder, assembler
and record encoder) writes (the same bytes; the tests hold both to it on every corpus file
and live workloads).

Row images are read in C into the records' JSON text, without a Python object per value,
for the common types; any other type or value is read by the column's Python reader and
written by orjson, as the general path does. A segment it does not take (``None``) goes to
the general path. Built by the install script; without it the general path runs.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from changestream.native.binlog_values cimport (
    crc32,
    little_endian,
    put_date,
    put_datetime2,
    put_decimal,
    put_double,
    put_epoch_micros,
    put_time2,
    put_timestamp2,
    query_is,
    sign_extended,
    u16,
    u32,
    u64,
)
from changestream.native.json_text cimport Buffer, put_base64, put_text, valid_utf8
from changestream.native.memory cimport regrow

import struct
import uuid

import orjson

from changestream.decoding import event_types as et
from changestream.decoding import field_types as ft
from changestream.decoding.charsets import codec_for_collation
from changestream.decoding.event_decoder import CHECKSUM_CRC32, HEADER_SIZE
from changestream.decoding.row_values import value_reader
from changestream.decoding.statements import BEGIN, COMMIT
from changestream.decoding.table_map import identity_start
from changestream.encoding.records import commit_time_text, json_default
from changestream.encoding.temporal_text import FormatCache
from changestream.model.changes import binlog_name
from changestream.parallel.segment_encoder import EncodedTransaction
from changestream.transactions.groups import gtid_commit_time, utc_time
from changestream.decoding.query_kind import query_kind
from changestream.transactions.plain import MYSQL_GTID_EVENTS, mariadb_group_is_plain
from changestream.transactions.row_shapes import ShapeCache

_VALUE_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_NON_STR_KEYS
_dumps = orjson.dumps

# Charsets whose bytes below 0x80 are ASCII characters (text of them only takes the
# compiled path; other bytes go to the Python reader).
_ASCII_SUPERSETS = frozenset({"changestream_latin1", "ascii", "iso8859-2", "iso8859-9",
                              "iso8859-13", "cp1250", "cp1251", "cp1257"})

cdef const char* OP_HEADS[3]
OP_HEADS[0] = b'{"op":"insert",'
OP_HEADS[1] = b'{"op":"update",'
OP_HEADS[2] = b'{"op":"delete",'
cdef int OP_HEAD_SIZES[3]
OP_HEAD_SIZES[0] = 15
OP_HEAD_SIZES[1] = 15
OP_HEAD_SIZES[2] = 15

# The op of each plain rows event type (not version 0, compressed or partial), else -1.
cdef int ROWS_OPS[256]
for _code in range(256):
    ROWS_OPS[_code] = -1
for _code, (_kind, _version, _compressed) in et.ROWS_KINDS.items():
    if _version >= 1 and not _compressed and _code != et.PARTIAL_UPDATE_ROWS:
        ROWS_OPS[_code] = {"insert": 0, "update": 1, "delete": 2}[_kind]
_OP_NAMES = ("insert", "update", "delete")

# Each rows event type's version (compared with a C int: a module attribute looked up and an
# int made for every event cost more than the event's own reading in small transactions).
cdef int ROWS_VERSION[256]
for _code in range(256):
    ROWS_VERSION[_code] = et.ROWS_KINDS[_code][1] if _code in et.ROWS_KINDS else -1

# The event types the loop tells apart, as C constants (checked against event_types).
cdef enum:
    E_QUERY = 2
    E_XID = 16
    E_TABLE_MAP = 19
    E_ROWS_QUERY = 29
    E_GTID = 33
    E_ANONYMOUS_GTID = 34
    E_GTID_TAGGED = 42
    E_ANNOTATE_ROWS = 160
    E_MARIADB_GTID = 162
assert (E_QUERY, E_XID, E_TABLE_MAP, E_ROWS_QUERY, E_GTID, E_ANONYMOUS_GTID, E_GTID_TAGGED,
        E_ANNOTATE_ROWS, E_MARIADB_GTID) == (
    et.QUERY, et.XID, et.TABLE_MAP, et.ROWS_QUERY, et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED,
    et.MARIADB_ANNOTATE_ROWS, et.MARIADB_GTID)
assert MYSQL_GTID_EVENTS == {E_GTID, E_ANONYMOUS_GTID, E_GTID_TAGGED}

class NotPlain(Exception):
    """The segment needs the general path."""


cdef class TablePlan:
    """How one table's full row images become JSON: each column's kind, what it needs, its
    ``"name":`` prefix, and the primary key's columns."""

    def __dealloc__(self):
        free(self.kinds)
        free(self.sizes)
        free(self.extras)
        free(self.precisions)
        free(self.key)


cdef int* _ints(int n) except NULL:
    cdef int* p = NULL
    regrow(<void**>&p, sizeof(int) * (n if n > 0 else 1))
    return p


cdef TablePlan _plan(object schema, object shape, tuple formats):
    cdef TablePlan plan = TablePlan()
    cdef int i, n = len(schema.columns), t
    cdef int kind, size, extra, precision
    plan.ncols = n
    plan.schema = schema
    plan.direct = shape.direct
    plan.names = b'"database":' + _dumps(schema.database) + b',"table":' \
        + _dumps(schema.table) + b','
    plan.kinds, plan.sizes, plan.extras = _ints(n), _ints(n), _ints(n)
    plan.precisions = _ints(n)
    plan.counted = tuple((schema.database, schema.table, op) for op in _OP_NAMES)
    plan.generic = False
    by_name = dict(formats)
    prefixes, readers, writers = [], [], []
    names = shape.names
    for i in range(n):
        column = schema.columns[i]
        prefixes.append((b"{" if i == 0 else b",") + _dumps(names[i]) + b":")
        kind, size, extra, precision = column_kind(column)
        plan.kinds[i], plan.sizes[i], plan.extras[i] = kind, size, extra
        plan.precisions[i] = precision
        plan.generic |= kind == K_GENERIC
        readers.append(value_reader(column))
        writers.append(by_name.get(names[i]))
    plan.prefixes, plan.readers, plan.formats = tuple(prefixes), tuple(readers), \
        tuple(writers)
    key = shape.direct_key or ()
    plan.nkey = len(key)
    plan.key = _ints(plan.nkey)
    key_prefixes = []
    for i, (name, index) in enumerate(key):
        plan.key[i] = index
        key_prefixes.append((b"{" if i == 0 else b",") + _dumps(name) + b":")
    plan.key_prefixes = tuple(key_prefixes)
    return plan


cdef tuple column_kind(object column):
    """``(kind, size, extra, precision)`` of a column."""
    t = column.type_code
    if t in (ft.TINY, ft.SHORT, ft.INT24, ft.LONG, ft.LONGLONG):
        size = {ft.TINY: 1, ft.SHORT: 2, ft.INT24: 3, ft.LONG: 4, ft.LONGLONG: 8}[t]
        return K_INT, size, 1 if column.unsigned else 0, 0
    if t == ft.DOUBLE:
        return K_DOUBLE, 8, 0, 0
    if t == ft.NEWDECIMAL and 0 < column.precision <= 65 and \
            0 <= column.scale <= min(column.precision, 30):
        return K_DECIMAL, 0, column.scale, column.precision
    if t == ft.DATETIME2 and 0 <= column.fsp <= 6:
        return K_DATETIME2, column.fsp, 0, 0
    if t == ft.TIMESTAMP2 and 0 <= column.fsp <= 6:
        return K_TIMESTAMP2, column.fsp, 0, 0
    if t == ft.TIME2 and 0 <= column.fsp <= 6:
        return K_TIME2, column.fsp, 0, 0
    if t == ft.DATE or t == ft.NEWDATE:
        return K_DATE, 3, 0, 0
    if t == ft.YEAR:
        return K_YEAR, 1, 0, 0
    if t in (ft.VARCHAR, ft.VAR_STRING) or (t == ft.STRING and column.text_type is None):
        prefix = 1 if column.max_length < 256 else 2
        if column.collation is None:
            return K_UTF8, prefix, 0, 0
        codec = codec_for_collation(column.collation)
        if codec is None:
            return K_BYTES, prefix, column.max_length if t == ft.STRING else 0, 0
        if codec == "utf-8":
            return K_UTF8, prefix, 0, 0
        if codec in _ASCII_SUPERSETS:
            return K_ASCII, prefix, 0, 0
        return K_GENERIC, 0, 0, 0
    if t in ft.BLOB_TYPES and 1 <= (column.length_bytes or 2) <= 4:
        prefix = column.length_bytes or 2
        if column.collation is None:
            return K_BYTES, prefix, 0, 0
        codec = codec_for_collation(column.collation)
        if codec is None:
            return K_BYTES, prefix, 0, 0
        if codec == "utf-8":
            return K_UTF8, prefix, 0, 0
        if codec in _ASCII_SUPERSETS:
            return K_ASCII, prefix, 0, 0
    return K_GENERIC, 0, 0, 0


cdef class SegmentEncoder:
    """Encodes segments of plain transactions as the general path would (``encode`` gives
    the transactions, ``None`` for a segment it does not take; ``table_counts`` the last
    segment's changes by database, table and op)."""

    def __init__(self, decoder, change_filter, bint include_sql):
        self.decoder = decoder
        self.filter = None if change_filter is None or change_filter.everything \
            else change_filter
        self.include_sql = include_sql
        self._shapes = ShapeCache(self.filter)
        self._formats = FormatCache()
        self._table_maps = {}
        self._format_description = None
        self.table_counts = {}
        self.rows = Buffer()
        self.record = Buffer()
        self.width = 0
        self._last_commit_seconds = None
        self._sid = b""
        self._scratch = Buffer()

    def forget_table_maps(self):
        """Drop the plans made for TABLE_MAPs (their schemas changed in the decoder)."""
        self._table_maps.clear()

    def __dealloc__(self):
        free(self.starts)
        free(self.ends)
        free(self.slots)

    cdef int _columns(self, int n) except -1:
        if n > self.width:
            regrow(<void**>&self.starts, sizeof(Py_ssize_t) * n)
            regrow(<void**>&self.ends, sizeof(Py_ssize_t) * n)
            self.width = n
        return 0

    cdef Slot* _slot(self) except NULL:
        cdef Py_ssize_t capacity
        if self.nslots == self.slot_capacity:
            capacity = max(64, self.slot_capacity * 2)
            regrow(<void**>&self.slots, sizeof(Slot) * capacity)
            self.slot_capacity = capacity
        self.nslots += 1
        return self.slots + self.nslots - 1

    def encode(self, str file, bytes data, offsets, str stamp, list lines):
        """The transactions of the events in ``data`` (read from ``file`` at ``offsets``),
        their records appended to ``lines``; ``None`` when the segment is not one this path
        takes (``lines`` may then hold some records: discard them)."""
        self.refusal = None
        try:
            return self._encode(file, data, offsets, stamp, lines)
        except (NotPlain, LookupError, struct.error, ValueError, ArithmeticError) as exc:
            self.refusal = exc
            return None
        finally:
            self._data = self._body = None

    cdef Py_ssize_t _read_rows(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                               Py_ssize_t end, int kind, int64_t offset, list tx_plans,
                               int sql_index) except -1:
        """The rows of a rows event of ``kind`` from ``pos`` to the body's ``end`` (past
        the column count and bitmaps), as the open transaction's changes; how many."""
        cdef Slot* slot
        cdef Py_ssize_t row = 0, image_start
        cdef int plan_index = _index_of(tx_plans, plan)
        self._columns(plan.ncols)  # where each value's JSON is, for the key
        if plan.ncols == 0 and pos < end:
            raise NotPlain()  # images of no column take no bytes: the loop would not end
        while pos < end:
            slot = self._slot()
            slot.op, slot.plan, slot.pos, slot.row, slot.sql = \
                kind, plan_index, offset, row, sql_index
            image_start = self.rows.size
            pos = self._image(plan, b, pos, end)
            if kind == OP_UPDATE:
                slot.before0, slot.before1 = image_start, self.rows.size
                image_start = self.rows.size
                pos = self._image(plan, b, pos, end)
                slot.after0, slot.after1 = image_start, self.rows.size
            elif kind == OP_INSERT:
                slot.before0 = slot.before1 = 0
                slot.after0, slot.after1 = image_start, self.rows.size
            else:
                slot.before0, slot.before1 = image_start, self.rows.size
                slot.after0 = slot.after1 = 0
            self._key(plan, slot)
            row += 1
        if pos != end:
            raise NotPlain()
        return row

    cdef int _begin(self, str name, str stamp) except -1:
        """Before a segment's events from the file ``name``, its records' ``ts`` ``stamp``."""
        self._file_json = _dumps(name)
        self._record_end = b'},"ts":' + _dumps(stamp) + b'}\n'
        return 0

    cdef int _commit(self, list lines, list tx_plans, list sqls, str tid, object gtid,
                     bytes gtid_json, object xid, int64_t commit_micros,
                     object commit) except -1:
        """The open transaction's changes, committed: their records appended to
        ``lines`` (``commit_micros``: the commit time in microseconds when the GTID event
        gave it, else 0 and ``commit`` is the time)."""
        self._records(lines, tx_plans, sqls, gtid_json if gtid else _dumps(tid), gtid_json,
                      xid, self._micros_json(commit_micros) if commit_micros > 0
                      else self._commit_json(commit))
        return 0

    cdef object body(self):
        """The rows event being read, as bytes (for the Python readers)."""
        if self._body is None:
            self._body = self._data[self._body_start:self._body_end]
        return self._body

    cdef Py_ssize_t _image(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                           Py_ssize_t end) except -1:
        """One full row image from ``pos`` (the event's body ends at ``end``) as a JSON
        object appended to ``rows``; where it ends."""
        cdef Buffer out = self.rows
        cdef int ncols = plan.ncols, j, kind, size, fsp, extra
        cdef Py_ssize_t nb = (ncols + 7) >> 3, n, used
        cdef const uint8_t* nulls = b + pos
        cdef uint64_t u
        cdef double d
        cdef bytes prefix
        cdef Py_ssize_t* starts = self.starts
        cdef Py_ssize_t* ends = self.ends
        if pos + nb > end:
            raise NotPlain()
        pos += nb
        for j in range(ncols):
            prefix = <bytes>plan.prefixes[j]
            out.put(PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
            starts[j] = out.size
            if (nulls[j >> 3] >> (j & 7)) & 1:
                out.put(b"null", 4)
                ends[j] = out.size
                continue
            kind, size, extra = plan.kinds[j], plan.sizes[j], plan.extras[j]
            if kind == K_INT:
                if pos + size > end:
                    raise NotPlain()
                u = little_endian(b + pos, size)
                if extra:
                    out.put_uint(u)
                else:
                    out.put_int(<int64_t>sign_extended(u, size))
                pos += size
            elif kind == K_UTF8 or kind == K_ASCII or kind == K_BYTES:
                if pos + size > end:
                    raise NotPlain()
                n = <Py_ssize_t>little_endian(b + pos, size)
                if pos + size + n > end:
                    raise NotPlain()
                if kind == K_BYTES:
                    put_base64(out, b + pos + size, n, extra)
                elif (kind == K_UTF8 and valid_utf8(b + pos + size, n)) or \
                        (kind == K_ASCII and is_ascii(b + pos + size, n)):
                    put_text(out, b + pos + size, n)
                else:
                    self._generic(plan, j, pos)
                pos += size + n
            elif kind == K_YEAR:
                if pos + 1 > end:
                    raise NotPlain()
                out.put_uint(1900 + b[pos] if b[pos] else 0)
                pos += 1
            elif kind == K_DOUBLE:
                if pos + 8 > end:
                    raise NotPlain()
                memcpy(&d, b + pos, 8)
                if put_double(out, d):
                    self._generic(plan, j, pos)
                pos += 8
            else:
                if kind == K_DECIMAL:
                    used = put_decimal(out, b + pos, end - pos, plan.precisions[j], extra)
                elif kind == K_DATETIME2:
                    used = put_datetime2(out, b + pos, end - pos, size)
                elif kind == K_TIMESTAMP2:
                    used = put_timestamp2(out, b + pos, end - pos, size)
                elif kind == K_DATE:
                    used = put_date(out, b + pos, end - pos)
                elif kind == K_TIME2:
                    used = put_time2(out, b + pos, end - pos, size)
                else:
                    used = self._generic(plan, j, pos) - pos
                if used < 0:
                    raise NotPlain()
                pos += used
            ends[j] = out.size
        if ncols == 0:
            out.put(b"{", 1)
        out.put(b"}", 1)
        return pos
    cdef Py_ssize_t _generic(self, TablePlan plan, int j, Py_ssize_t pos) except -1:
        """Column ``j``'s value at ``pos`` read by its Python reader from the event's body
        and written by orjson (as the Python path writes it); where it ends."""
        value, end = plan.readers[j](self.body(), pos - self._body_start)
        write = plan.formats[j]
        if write is not None and value is not None:
            value = write(value)
        piece = _dumps(value, default=json_default, option=_VALUE_OPTIONS)
        self.rows.put_bytes(piece)
        return self._body_start + end

    cdef object _encode(self, str file, bytes data, offsets, str stamp, list lines):
        decoder = self.decoder
        cdef const uint8_t* b = <const uint8_t*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t total = PyBytes_GET_SIZE(data)
        cdef bint crc = decoder.checksum_alg == CHECKSUM_CRC32
        cdef bint verify = crc and decoder.verify_checksums
        cdef int tail = 4 if crc else 0
        cdef Py_ssize_t at = 0, end, body_end, pos, size, header = HEADER_SIZE
        cdef int64_t offset
        cdef int code, kind, version, post_rows, extra
        cdef bint inside = False, began = False, short_ids
        cdef TablePlan plan
        cdef uint64_t table_id
        name = binlog_name(file)  # as the assembler names it
        self._begin(name, stamp)
        if decoder.format_description is not self._format_description:
            self._format_description = decoder.format_description
            self._table_maps.clear()
        table_maps = self._table_maps
        table_filter = self.filter.table if self.filter is not None else None
        post = decoder.post_header_length(et.TABLE_MAP)
        short_ids = post == 6
        cdef Py_ssize_t key_start = HEADER_SIZE + identity_start(post)
        query_post = decoder.post_header_length(et.QUERY)
        posts = {}
        tables = {}
        counts = self.table_counts = {}
        tx_plans = []        # the open transaction's plans, by index
        sqls = [b"null"]     # the open transaction's statements (JSON), by index
        cdef int sql_index = 0
        done = []
        gtid = None
        gtid_json = b"null"
        server_id = 0
        cdef int64_t start = 0
        cdef int64_t commit_micros = 0
        cdef int query_post_size = query_post
        commit_ts = None
        self.nslots = 0
        self.rows.size = 0
        self._data = data
        for offset in offsets:
            if at + header > total:
                raise NotPlain()
            size = u32(b + at + 9)
            end = at + size
            body_end = end - tail
            if size < header + tail or end > total:
                raise NotPlain()
            if verify and crc32(b + at, body_end - at) != u32(b + body_end):
                raise NotPlain()
            code = b[at + 4]
            kind = ROWS_OPS[code]
            if kind >= 0:
                if not inside:
                    raise NotPlain()
                version = ROWS_VERSION[code]
                post_rows = posts.get(code, -1)
                if post_rows < 0:
                    post_rows = posts[code] = decoder.rows_post_header(code)
                pos = at + header
                if post_rows == 6:
                    table_id = u32(b + pos)
                else:
                    table_id = u32(b + pos) | (<uint64_t>u16(b + pos + 4) << 32)
                if version == 2:
                    extra = u16(b + pos + post_rows - 2)
                    pos += post_rows + (extra - 2 if extra > 2 else 0)
                else:
                    pos += post_rows
                found = tables.get(table_id)
                if found is None:
                    raise NotPlain()
                if found is False:  # a table the filter leaves out: its rows are not read
                    at = end
                    continue
                plan = <TablePlan>found
                if not plan.direct:
                    raise NotPlain()
                # the column count and the present-columns bitmaps: every column
                pos = self._full_images(plan, b, pos, body_end, kind)
                self._body_start, self._body_end, self._body = at + header, body_end, None
                row = self._read_rows(plan, b, pos, body_end, kind, offset, tx_plans,
                                      sql_index)
                counted = plan.counted[kind]
                counts[counted] = counts.get(counted, 0) + row
            elif code == E_TABLE_MAP:
                key = data[at + key_start:body_end]
                found = table_maps.get(key)
                if found is None:
                    table_id, _, schema = decoder.register_table_map(
                        data[at + header:body_end])
                    if table_filter is not None and not table_filter(schema.database,
                                                                     schema.table):
                        found = False
                    else:
                        rows_decoder = decoder.row_decoder(table_id)
                        found = _plan(rows_decoder.schema,
                                      self._shapes.shape(rows_decoder.schema),
                                      self._formats(rows_decoder.schema))
                    table_maps[key] = found
                    if len(table_maps) > 4096:
                        table_maps.clear()
                if short_ids:
                    tables[u32(b + at + header)] = found
                else:
                    tables[u32(b + at + header)
                           | (<uint64_t>u16(b + at + header + 4) << 32)] = found
            elif code == E_MARIADB_GTID:
                if inside or not mariadb_group_is_plain(b[at + header + 12]):
                    raise NotPlain()
                server_id = u32(b + at + 5)
                gtid_json = self._mariadb_gtid_json(u32(b + at + header + 8),
                                                    u32(b + at + 5), u64(b + at + header))
                gtid = gtid_json[1:len(gtid_json) - 1].decode("ascii")  # no wraparound here
                inside, began, start, commit_ts = True, True, offset, None
                commit_micros = 0
                sql_index = 0
                sqls = [b"null"]
            elif code == E_XID or code == E_QUERY:
                xid = None
                if code == E_QUERY:
                    statement = BEGIN if query_is(b + at, body_end - at, query_post_size,
                                                  b"BEGIN", 5) \
                        else query_kind(data[at:end], query_post, body_end - at)
                    if statement == BEGIN and inside and not began:
                        began = True
                        at = end
                        continue
                    if statement != COMMIT:
                        raise NotPlain()
                else:
                    xid = u64(b + at + header)
                if not inside:
                    raise NotPlain()
                if self.nslots:
                    commit = utc_time(u32(b + at)) if commit_ts is None else commit_ts
                    self._commit(lines, tx_plans, sqls,
                                 gtid if gtid else f"{server_id}-{name}-{start}", gtid,
                                 gtid_json, xid, commit_micros, commit)
                    done.append(EncodedTransaction(self.nslots, gtid, commit, offset + size))
                    self.nslots = 0
                    self.rows.size = 0
                    tx_plans = []
                    sqls = [b"null"]
                else:
                    done.append(EncodedTransaction(0, gtid, None, offset + size))
                inside = False
                sql_index = 0
            elif code == E_GTID or code == E_ANONYMOUS_GTID or code == E_GTID_TAGGED:
                if inside:
                    raise NotPlain()
                commit_micros = self._mysql_gtid(b, at + header, body_end) \
                    if code == E_GTID else -1
                if commit_micros >= 0:
                    gtid = self._gtid
                    gtid_json = b'"' + gtid.encode() + b'"'
                    commit_ts = utc_time(commit_micros / 1e6) if commit_micros else None
                    server_id = u32(b + at + 5)
                else:
                    event = decoder.decode(data[at:end], file, offset)
                    gtid = event.gtid
                    gtid_json = _dumps(gtid)
                    commit_ts = gtid_commit_time(event.original_commit_ts,
                                                 event.immediate_commit_ts)
                    server_id = event.header.server_id
                    commit_micros = 0
                inside, began, start = True, False, offset
                sql_index = 0
                sqls = [b"null"]
            elif code == E_ROWS_QUERY or code == E_ANNOTATE_ROWS:
                if self.include_sql and inside:
                    annotation = decoder.decode(data[at:end], file, offset)
                    sqls.append(_dumps(annotation.query))
                    sql_index = len(sqls) - 1
            else:
                raise NotPlain()
            at = end
        if inside:
            raise NotPlain()
        return done

    cdef Py_ssize_t _full_images(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                                 Py_ssize_t end, int kind) except -1:
        """Past the column count and the present-columns bitmap(s), which must name every
        column of the plan's table."""
        cdef uint64_t ncols
        cdef Py_ssize_t nb, i
        cdef int images = 2 if kind == OP_UPDATE else 1, k
        cdef int n = plan.ncols
        if pos >= end:
            raise NotPlain()
        ncols = b[pos]
        if ncols < 251:
            pos += 1
        elif ncols == 252 and pos + 3 <= end:
            ncols = u16(b + pos + 1)
            pos += 3
        elif ncols == 253 and pos + 4 <= end:
            ncols = b[pos + 1] | (<uint64_t>b[pos + 2] << 8) | (<uint64_t>b[pos + 3] << 16)
            pos += 4
        else:
            raise NotPlain()
        if ncols != <uint64_t>n:
            raise NotPlain()
        nb = (n + 7) >> 3
        if pos + nb * images > end:
            raise NotPlain()
        for k in range(images):
            for i in range(n):
                if not (b[pos + (i >> 3)] >> (i & 7)) & 1:
                    raise NotPlain()
            pos += nb
        return pos

    cdef int _key(self, TablePlan plan, Slot* slot) except -1:
        """The primary key's JSON, from the last image read (the after image, else the
        before image: their values' spans are in ``starts``/``ends``), appended to
        ``rows``; its span in ``slot``."""
        cdef Buffer out = self.rows
        cdef Py_ssize_t start = out.size, n
        cdef int i, j
        cdef bytes prefix
        if plan.nkey == 0:
            slot.key0 = slot.key1 = 0
            return 0
        for i in range(plan.nkey):
            j = plan.key[i]
            prefix = <bytes>plan.key_prefixes[i]
            out.put(PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix))
            n = self.ends[j] - self.starts[j]
            out.reserve(n)  # before copying: growing may move the data
            memcpy(out.data + out.size, out.data + self.starts[j], n)
            out.size += n
        out.put(b"}", 1)
        slot.key0, slot.key1 = start, out.size
        return 0

    cdef int64_t _mysql_gtid(self, const uint8_t* b, Py_ssize_t p, Py_ssize_t end) except -2:
        """A MySQL GTID event's body at ``p``: its GTID put in ``_gtid`` and its commit
        time returned (microseconds after the epoch, as ``gtid_commit_time`` takes it; 0:
        none); -1 when it is not one this reads (no logical clock, no commit time, a time
        whose float seconds would not be exact: the Python decoder reads it)."""
        cdef uint64_t immediate, original
        if end - p < 49 or b[p + 25] != 2:
            return -1
        immediate = _u56(b + p + 42)
        original = immediate & ~(<uint64_t>1 << 55)
        if immediate & (<uint64_t>1 << 55):
            if end - p < 56:
                return -1
            original = _u56(b + p + 49)
            immediate &= ~(<uint64_t>1 << 55)
        if original == 0:
            original = immediate
        if original >= (<uint64_t>1 << 51):
            return -1
        sid = PyBytes_FromStringAndSize(<const char*>b + p + 1, 16)
        if sid != self._sid:
            self._sid = sid
            self._sid_text = str(uuid.UUID(bytes=sid))
        self._gtid = f"{self._sid_text}:{<int64_t>u64(b + p + 17)}"
        return <int64_t>original

    cdef bytes _micros_json(self, int64_t micros):
        cdef Buffer out = self._scratch
        out.size = 0
        put_epoch_micros(out, <uint64_t>micros)
        return out.take(0, out.size)

    cdef bytes _mariadb_gtid_json(self, uint64_t domain, uint64_t server_id,
                                  uint64_t seq_no):
        """``"domain-server-seq"``, quoted (what ``mariadb_gtid`` writes, as JSON)."""
        cdef Buffer out = self._scratch
        out.size = 0
        out.put(b'"', 1)
        out.put_uint(domain)
        out.put(b"-", 1)
        out.put_uint(server_id)
        out.put(b"-", 1)
        out.put_uint(seq_no)
        out.put(b'"', 1)
        return out.take(0, out.size)

    cdef bytes _commit_json(self, object commit):
        if commit is not self._last_commit_seconds:
            self._last_commit_seconds = commit
            self._commit_text = _dumps(commit_time_text(commit))
        return self._commit_text

    cdef int _records(self, list lines, list tx_plans, list sqls, bytes tid, bytes gtid,
                      object xid, bytes commit) except -1:
        """The open transaction's records, one bytes each, appended to ``lines``."""
        cdef Buffer out = self.record
        cdef Buffer rows = self.rows
        cdef Py_ssize_t i, n = self.nslots
        cdef Slot* slot
        cdef TablePlan plan
        cdef bint has_xid = xid is not None  # the XID event's number, else null
        cdef uint64_t xid_number = xid if has_xid else 0
        for i in range(n):
            slot = self.slots + i
            plan = <TablePlan>tx_plans[slot.plan]
            out.size = 0
            out.put(OP_HEADS[slot.op], OP_HEAD_SIZES[slot.op])
            out.put_bytes(plan.names)
            out.put(b'"before":', 9)
            _span(out, rows, slot.before0, slot.before1)
            out.put(b',"after":', 9)
            _span(out, rows, slot.after0, slot.after1)
            out.put(b',"primary_key":', 15)
            _span(out, rows, slot.key0, slot.key1)
            out.put(b',"sql":', 7)
            out.put_bytes(<bytes>sqls[slot.sql])
            out.put(b',"transaction":{"id":', 21)
            out.put_bytes(tid)
            out.put(b',"gtid":', 8)
            out.put_bytes(gtid)
            out.put(b',"xid":', 7)
            if has_xid:
                out.put_uint(xid_number)
            else:
                out.put(b"null", 4)
            out.put(b',"seq":', 7)
            out.put_uint(i)
            out.put(b',"size":', 8)
            out.put_uint(n)
            if i == n - 1:
                out.put(b',"last":true', 12)
            else:
                out.put(b',"last":false', 13)
            out.put(b',"commit_ts":', 13)
            out.put_bytes(commit)
            out.put(b'},"position":{"file":', 21)
            out.put_bytes(self._file_json)
            out.put(b',"pos":', 7)
            out.put_uint(<uint64_t>slot.pos)
            out.put(b',"row":', 7)
            out.put_uint(<uint64_t>slot.row)
            out.put_bytes(self._record_end)
            lines.append(PyBytes_FromStringAndSize(out.data, out.size))
        return 0


cdef inline uint64_t _u56(const uint8_t* p) noexcept:
    """The 7-byte little-endian number at ``p`` (a MySQL GTID event's commit times)."""
    return u32(p) | (<uint64_t>u16(p + 4) << 32) | (<uint64_t>p[6] << 48)


cdef inline int _span(Buffer out, Buffer rows, Py_ssize_t start, Py_ssize_t end) except -1:
    if start == end:
        out.put(b"null", 4)
    else:
        out.put(rows.data + start, end - start)
    return 0


cdef int _index_of(list plans, object plan) except -1:
    cdef int i
    for i in range(len(plans)):
        if plans[i] is plan:
            return i
    plans.append(plan)
    return len(plans) - 1


cdef bint is_ascii(const uint8_t* s, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        if s[i] >= 0x80:
            return False
    return True
