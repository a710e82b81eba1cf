# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The Spark sink's compiled decode worker walk (its worker encoding's fast path,
:mod:`changestream.sinks.spark.worker_encoding`): a segment's plain DML transactions from
their bytes straight to the sink's Arrow frames, the ones
``frames.table_runs(parts, all_before=True)`` makes of the general path's change objects
(the tests hold both to it on every corpus file and live workloads).

The event walk is the record encoder's (:mod:`changestream.parallel._segment_rows`); each
row's values go into Arrow column buffers in C for the common types, with no Python object
per row; other types and values are read by the column's Python reader and converted as the
sink converts them. A segment this path does not take (``None``) goes to the general path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from changestream.native.binlog_values cimport (
    int128_t,
    little_endian,
    put_time2_text,
    read_date_days,
    read_datetime2_micros,
    read_decimal128,
    read_timestamp2_micros,
    sign_extended,
)
from changestream.native.json_text cimport Buffer, valid_utf8
from changestream.parallel._segment_rows cimport (
    K_ASCII,
    K_BYTES,
    K_DATE,
    K_DATETIME2,
    K_DECIMAL,
    K_DOUBLE,
    K_INT,
    K_TIME2,
    K_TIMESTAMP2,
    K_UTF8,
    K_YEAR,
    OP_INSERT,
    OP_UPDATE,
    SegmentEncoder,
    TablePlan,
    column_kind,
    is_ascii,
)

import datetime as dt
import struct

import pyarrow as pa

from changestream.decoding import field_types as ft
from changestream.model.changes import Position
from changestream.parallel._segment_rows import NotPlain
from changestream.sinks.spark.frames import (
    Span,
    clashing_names,
    encode_frames,
    frame_schema_of,
)
from changestream.sinks.spark.types import METADATA, signature, table_mappings

# How a column's Arrow values are made.
cdef enum:
    A_INT = 0         # an integer of the column's bytes, in the Arrow type's width
    A_UINT128 = 1     # BIGINT UNSIGNED as decimal128(20, 0)
    A_YEAR = 2
    A_COPY = 3        # FLOAT, DOUBLE: their bytes are Arrow's
    A_DECIMAL = 4
    A_DATETIME = 5
    A_TIMESTAMP = 6
    A_DATE = 7
    A_TIME = 8
    A_UTF8 = 9
    A_ASCII = 10
    A_BYTES = 11
    A_PYTHON = 12     # the column's Python reader and the sink's conversion

cdef enum:
    META_OP = 0
    META_TRANSACTION = 1
    META_GTID = 2
    META_XID = 3
    META_COMMIT = 4
    META_SEQ = 5
    META_FILE = 6
    META_POS = 7
    META_COLUMNS = 8

assert tuple(f.name for f in METADATA) == (
    "_op", "_transaction_id", "_gtid", "_xid", "_commit_ts", "_seq", "_binlog_file",
    "_binlog_pos")

_OP_TEXT = (b"insert", b"update", b"delete")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)
_INT_WIDTHS = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 4, pa.int64(): 8}


cdef class Column:
    """One Arrow column being filled: fixed-width values (``width`` bytes each),
    variable-length ones (``width`` 0: offsets and data), or Python values (``width`` -1,
    made into an array by pyarrow at the end)."""

    def __init__(self, object arrow_type, int width):
        self.type = arrow_type
        self.width = width
        self.data, self.offsets, self.valid = Buffer(), Buffer(), Buffer()
        self.values = []
        cdef int32_t zero = 0
        if width == 0:
            self.offsets.put(<const char*>&zero, 4)

    cdef int _mark(self, bint present) except -1:
        if (self.length & 7) == 0:
            self.valid.reserve(1)
            self.valid.data[self.valid.size] = 0
            self.valid.size += 1
        if present:
            self.valid.data[self.length >> 3] |= <char>(1 << (self.length & 7))
        else:
            self.nulls += 1
        self.length += 1
        return 0

    cdef int null(self) except -1:
        cdef int32_t end
        if self.width < 0:
            self.values.append(None)
            self.length += 1
            return 0
        self._mark(False)
        if self.width > 0:
            self.data.reserve(self.width)
            memset(self.data.data + self.data.size, 0, self.width)
            self.data.size += self.width
        else:
            end = <int32_t>self.data.size
            self.offsets.put(<const char*>&end, 4)
        return 0

    cdef char* fixed(self) except NULL:
        """Room for one present value's ``width`` bytes."""
        cdef char* at
        self._mark(True)
        self.data.reserve(self.width)
        at = self.data.data + self.data.size
        self.data.size += self.width
        return at

    cdef int var(self, const char* s, Py_ssize_t n) except -1:
        """One present variable-length value."""
        cdef int32_t end
        self._mark(True)
        self.data.put(s, n)
        if self.data.size > 0x7FFFFFFF:
            raise NotPlain("a column's data passes 2 GiB")
        end = <int32_t>self.data.size
        self.offsets.put(<const char*>&end, 4)
        return 0

    cdef int value(self, object value) except -1:
        """One value as the sink converted it (text, bytes or ``None``)."""
        cdef bytes raw
        if self.width < 0:
            self.values.append(value)
            self.length += 1
        elif value is None:
            self.null()
        elif self.width == 0 and isinstance(value, (str, bytes)):
            raw = value.encode() if isinstance(value, str) else value
            self.var(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))
        else:
            raise NotPlain(f"a {type(value).__name__} for a {self.type} column")
        return 0

    cdef int repeat(self, bytes value, Py_ssize_t times) except -1:
        """``value`` (``None``: null) ``times`` times, in a variable-length column."""
        cdef Py_ssize_t i
        for i in range(times):
            if value is None:
                self.null()
            else:
                self.var(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
        return 0

    def array(self):
        """The column as an Arrow array."""
        if self.width < 0:
            return pa.array(self.values, type=self.type)
        buffers = [pa.py_buffer(self.valid.take(0, self.valid.size)) if self.nulls else None]
        if self.width == 0:
            buffers.append(pa.py_buffer(self.offsets.take(0, self.offsets.size)))
        buffers.append(pa.py_buffer(self.data.take(0, self.data.size)))
        return pa.Array.from_buffers(self.type, self.length, buffers, null_count=self.nulls)


cdef class ArrowPlan:
    """How one table's values become Arrow values: per column its kind and width, and the
    sink's fields (name, types, conversion) and signature."""

    cdef int ncols
    cdef int[:] kinds
    cdef int[:] widths
    cdef tuple converts
    cdef readonly tuple fields
    cdef readonly object sig
    cdef readonly object schema

    def __init__(self, TablePlan plan):
        cdef int j
        schema = plan.schema
        self.schema = schema
        self.fields = table_mappings(schema)
        if clashing_names(self.fields):
            raise NotPlain("columns named like the change metadata")  # the sink says so
        self.sig = signature(self.fields)
        self.ncols = len(self.fields)
        self.kinds = _int_array(self.ncols)
        self.widths = _int_array(self.ncols)
        converts = []
        for j in range(self.ncols):
            field = self.fields[j]
            self.kinds[j], self.widths[j] = _arrow_kind(schema.columns[j], field.arrow)
            converts.append(field.convert)
        self.converts = tuple(converts)

    cdef list columns(self):
        """Empty columns for a frame of this table: the metadata, the values, every
        column's before image."""
        cdef int j
        columns = [Column(f.arrow, _metadata_width(f.arrow)) for f in METADATA]
        for _ in range(2):
            for j in range(self.ncols):
                columns.append(Column(self.fields[j].arrow, self.widths[j]))
        return columns


cdef int[:] _int_array(int n):
    import array
    return array.array("i", [0] * max(n, 1))


cdef int _metadata_width(object arrow_type):
    if arrow_type == pa.string():
        return 0
    return 8  # int64, timestamp[us]


cdef tuple _arrow_kind(object column, object arrow):
    """``(kind, width)`` of a column whose Arrow type is ``arrow`` (width: bytes of a fixed
    value, 0 for text and bytes, -1 for Python values)."""
    kind, size, extra, precision = column_kind(column)
    if kind == K_INT and arrow in _INT_WIDTHS and _INT_WIDTHS[arrow] >= size:
        return A_INT, _INT_WIDTHS[arrow]
    if kind == K_INT and size == 8 and extra and arrow == pa.decimal128(20, 0):
        return A_UINT128, 16
    if kind == K_YEAR and arrow == pa.int32():
        return A_YEAR, 4
    if kind == K_DOUBLE and arrow == pa.float64():
        return A_COPY, 8
    if column.type_code == ft.FLOAT and arrow == pa.float32():
        return A_COPY, 4
    if kind == K_DECIMAL and pa.types.is_decimal128(arrow) and precision <= 38 \
            and arrow.precision == precision and arrow.scale == extra:
        return A_DECIMAL, 16
    if kind == K_DATETIME2 and arrow == pa.timestamp("us"):
        return A_DATETIME, 8
    if kind == K_TIMESTAMP2 and arrow == pa.timestamp("us", tz="UTC"):
        return A_TIMESTAMP, 8
    if kind == K_DATE and arrow == pa.date32():
        return A_DATE, 4
    if kind == K_TIME2 and arrow == pa.string():
        return A_TIME, 0
    if kind == K_UTF8 and arrow == pa.string():
        return A_UTF8, 0
    if kind == K_ASCII and arrow == pa.string():
        return A_ASCII, 0
    if kind == K_BYTES and arrow == pa.binary():
        return A_BYTES, 0
    return A_PYTHON, 0 if arrow in (pa.string(), pa.binary()) else -1


cdef class ArrowRun:
    """A table's rows of one shape in a segment (as ``frames.TableRun``): its columns, and
    where the open transaction's rows begin."""

    cdef ArrowPlan plan
    cdef list columns
    cdef Py_ssize_t rows, open_from
    cdef int index
    cdef object table


cdef class ArrowSegmentEncoder(SegmentEncoder):
    """Encodes segments of plain transactions into the Spark sink's frames (see the module
    docstring): ``encode`` as the record encoder's, then :meth:`payload`."""

    cdef dict _arrow_plans      # TablePlan -> ArrowPlan
    cdef list _runs             # this segment's ArrowRuns
    cdef dict _current          # table name -> its current ArrowRun
    cdef list _touched          # runs the open transaction has rows in
    cdef list _transactions     # per transaction with rows: [(run index, rows), ...]
    cdef bytes _file_name

    def __init__(self, decoder, change_filter, bint include_sql):
        super().__init__(decoder, change_filter, include_sql)
        self._arrow_plans = {}

    def encode(self, str file, bytes data, offsets, str stamp, list lines):
        """The transactions of the events in ``data`` (read from ``file`` at ``offsets``),
        their rows kept for :meth:`payload`; ``None`` when the segment is not one this
        path takes."""
        done = SegmentEncoder.encode(self, file, data, offsets, stamp, lines)
        if done is None:
            return None
        try:
            for run in self._runs:
                (<ArrowRun>run).table = pa.Table.from_arrays(
                    [(<Column>c).array() for c in (<ArrowRun>run).columns],
                    schema=frame_schema_of((<ArrowRun>run).plan.fields,
                                           range((<ArrowRun>run).plan.ncols)))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            self.refusal = exc  # the general path gives the sink's error
            return None
        return done

    def payload(self, list done, str file, bint encoded=True):
        """What a worker run of the last segment's transactions ``done[first:end]`` holds:
        ``payload(first, end, ...)`` gives their frames as ``frames.encode_runs`` writes
        them (``file``: the binlog file's name, their positions' file), or with
        ``encoded`` false as ``frames.decode_runs`` reads them back."""
        runs, transactions = self._runs, self._transactions
        ends = [(t.end, t.changes) for t in done]

        def frames(int first, int end, _begin=None, _end=None):
            cdef int i, k = 0, index
            cdef Py_ssize_t rows
            starts = [0] * len(runs)
            for i in range(first):
                if ends[i][1]:
                    for index, rows in transactions[k]:
                        starts[index] += rows
                    k += 1
            taken = {}  # run index -> [first row, rows, spans], in first-appearance order
            for i in range(first, end):
                if not ends[i][1]:
                    continue
                position = Position(file, ends[i][0])
                for index, rows in transactions[k]:
                    found = taken.get(index)
                    if found is None:
                        found = taken[index] = [starts[index], 0, []]
                    found[1] += rows
                    found[2].append((position, rows, False))
                k += 1
            frames = [((<ArrowRun>runs[index]).plan.schema, spans,
                       (<ArrowRun>runs[index]).table.slice(start, count))
                      for index, (start, count, spans) in taken.items()]
            if encoded:
                return encode_frames(frames)
            return [(schema, [Span(*span) for span in spans], frame)
                    for schema, spans, frame in frames]

        return frames

    cdef int _begin(self, str name, str stamp) except -1:
        self._runs, self._current, self._touched, self._transactions = [], {}, [], []
        self._file_name = name.encode()
        return 0

    cdef ArrowRun _run_of(self, TablePlan plan):
        """The run ``plan``'s rows join (a new one when the table's shape changed)."""
        cdef ArrowPlan arrow = self._arrow_plans.get(plan)
        cdef ArrowRun run
        if arrow is None:
            if len(self._arrow_plans) > 4096:
                self._arrow_plans.clear()
            arrow = self._arrow_plans[plan] = ArrowPlan(plan)
        name = arrow.schema.qualified_name
        run = self._current.get(name)
        if run is None or run.plan is not arrow and run.plan.sig != arrow.sig:
            run = ArrowRun()
            run.plan, run.columns, run.rows, run.open_from = arrow, arrow.columns(), 0, 0
            run.index = len(self._runs)
            self._runs.append(run)
            self._current[name] = run
        if run.rows == run.open_from and run not in self._touched:
            self._touched.append(run)
        return run

    cdef Py_ssize_t _read_rows(self, TablePlan plan, const uint8_t* b, Py_ssize_t pos,
                               Py_ssize_t end, int kind, int64_t offset, list tx_plans,
                               int sql_index) except -1:
        cdef ArrowRun run = self._run_of(plan)
        cdef list columns = run.columns
        cdef Py_ssize_t row = 0
        cdef int n = plan.ncols, j
        cdef bytes op = _OP_TEXT[kind]
        if n == 0 and pos < end:
            raise NotPlain()  # images of no column take no bytes: the loop would not end
        while pos < end:
            (<Column>columns[META_OP]).var(PyBytes_AS_STRING(op), PyBytes_GET_SIZE(op))
            (<int64_t*>(<Column>columns[META_SEQ]).fixed())[0] = self.nslots
            (<Column>columns[META_FILE]).var(PyBytes_AS_STRING(self._file_name),
                                              PyBytes_GET_SIZE(self._file_name))
            (<int64_t*>(<Column>columns[META_POS]).fixed())[0] = offset
            if kind == OP_UPDATE:
                pos = self._values(run, plan, b, pos, end, META_COLUMNS + n)
                pos = self._values(run, plan, b, pos, end, META_COLUMNS)
            else:
                pos = self._values(run, plan, b, pos, end, META_COLUMNS)
                for j in range(META_COLUMNS + n, META_COLUMNS + 2 * n):
                    (<Column>columns[j]).null()
            run.rows += 1
            self.nslots += 1
            row += 1
        if pos != end:
            raise NotPlain()
        return row

    cdef Py_ssize_t _values(self, ArrowRun run, TablePlan plan, const uint8_t* b,
                            Py_ssize_t pos, Py_ssize_t end, int first) except -1:
        """One full row image from ``pos`` into the run's columns ``first`` on; where it
        ends."""
        cdef ArrowPlan arrow = run.plan
        cdef list columns = run.columns
        cdef int ncols = plan.ncols, j, kind, size, extra
        cdef Py_ssize_t nb = (ncols + 7) >> 3, n, used
        cdef const uint8_t* nulls = b + pos
        cdef uint64_t u
        cdef int64_t v
        cdef int32_t days
        cdef int128_t unscaled
        cdef bint valid
        cdef Column column
        cdef char* at
        if pos + nb > end:
            raise NotPlain()
        pos += nb
        for j in range(ncols):
            column = <Column>columns[first + j]
            if (nulls[j >> 3] >> (j & 7)) & 1:
                column.null()
                continue
            kind, size, extra = arrow.kinds[j], plan.sizes[j], plan.extras[j]
            if kind == A_INT or kind == A_UINT128:
                if pos + size > end:
                    raise NotPlain()
                u = little_endian(b + pos, size)
                if not extra:
                    u = sign_extended(u, size)
                at = column.fixed()
                if kind == A_UINT128:
                    unscaled = <int128_t>u
                    memcpy(at, &unscaled, 16)
                else:
                    memcpy(at, &u, column.width)  # little-endian: the low bytes
                pos += size
            elif kind == A_UTF8 or kind == A_ASCII or kind == A_BYTES:
                if pos + size > end:
                    raise NotPlain()
                n = <Py_ssize_t>little_endian(b + pos, size)
                if pos + size + n > end:
                    raise NotPlain()
                if kind == A_BYTES:
                    column.var(<const char*>b + pos + size, n)
                    if extra > n:  # BINARY(n): padded with zero bytes to its width
                        column.data.reserve(extra - n)
                        memset(column.data.data + column.data.size, 0, extra - n)
                        column.data.size += extra - n
                        (<int32_t*>(column.offsets.data + column.offsets.size - 4))[0] = \
                            <int32_t>column.data.size
                elif (kind == A_UTF8 and valid_utf8(b + pos + size, n)) or \
                        (kind == A_ASCII and is_ascii(b + pos + size, n)):
                    column.var(<const char*>b + pos + size, n)
                else:
                    self._python(arrow, plan, j, column, pos)
                pos += size + n
            elif kind == A_COPY:
                if pos + column.width > end:
                    raise NotPlain()
                memcpy(column.fixed(), b + pos, column.width)
                pos += column.width
            elif kind == A_YEAR:
                if pos + 1 > end:
                    raise NotPlain()
                (<int32_t*>column.fixed())[0] = 1900 + b[pos] if b[pos] else 0
                pos += 1
            elif kind == A_DECIMAL:
                used = read_decimal128(b + pos, end - pos, plan.precisions[j], extra,
                                       &unscaled)
                if used < 0:
                    raise NotPlain()
                memcpy(column.fixed(), &unscaled, 16)
                pos += used
            elif kind == A_DATETIME or kind == A_TIMESTAMP:
                if kind == A_DATETIME:
                    used = read_datetime2_micros(b + pos, end - pos, size, &v, &valid)
                else:
                    used = read_timestamp2_micros(b + pos, end - pos, size, &v, &valid)
                if used < 0:
                    raise NotPlain()
                if valid:
                    (<int64_t*>column.fixed())[0] = v
                else:  # a zero or invalid date: NULL, as the sink lands it
                    column.null()
                pos += used
            elif kind == A_DATE:
                used = read_date_days(b + pos, end - pos, &days, &valid)
                if used < 0:
                    raise NotPlain()
                if valid:
                    (<int32_t*>column.fixed())[0] = days
                else:
                    column.null()
                pos += used
            elif kind == A_TIME:
                column._mark(True)
                used = put_time2_text(column.data, b + pos, end - pos, size)
                if used < 0:
                    raise NotPlain()
                days = <int32_t>column.data.size  # the text's end offset
                column.offsets.put(<const char*>&days, 4)
                pos += used
            else:
                pos = self._python(arrow, plan, j, column, pos)
        return pos

    cdef Py_ssize_t _python(self, ArrowPlan arrow, TablePlan plan, int j, Column column,
                            Py_ssize_t pos) except -1:
        """Column ``j``'s value at ``pos`` read by its Python reader and converted as the
        sink converts it; where it ends."""
        value, end = plan.readers[j](self.body(), pos - self._body_start)
        convert = arrow.converts[j]
        if value is not None and convert is not None:
            value = convert(value)
        column.value(value)
        return self._body_start + end

    cdef int _commit(self, list lines, list tx_plans, list sqls, str tid, object gtid,
                     bytes gtid_json, object xid, int64_t commit_micros,
                     object commit) except -1:
        """The open transaction's rows get its metadata."""
        cdef ArrowRun run
        cdef Py_ssize_t rows, i
        cdef int64_t micros = commit_micros if commit_micros > 0 \
            else (commit - _EPOCH) // _MICROSECOND
        cdef bytes tid_text = tid.encode()
        cdef bytes gtid_text = None if gtid is None else gtid.encode()
        cdef bytes xid_text = None if xid is None else str(xid).encode()
        cdef Column stamps
        entries = []
        for run in self._touched:
            rows = run.rows - run.open_from
            if rows == 0:
                continue
            (<Column>run.columns[META_TRANSACTION]).repeat(tid_text, rows)
            (<Column>run.columns[META_GTID]).repeat(gtid_text, rows)
            (<Column>run.columns[META_XID]).repeat(xid_text, rows)
            stamps = <Column>run.columns[META_COMMIT]
            for i in range(rows):
                (<int64_t*>stamps.fixed())[0] = micros
            entries.append((run.index, rows))
            run.open_from = run.rows
        self._transactions.append(entries)
        self._touched = []
        return 0
