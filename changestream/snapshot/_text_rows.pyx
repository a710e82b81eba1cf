# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled snapshot rows: text-protocol rows to their records' ``after`` and ``primary_key``
JSON, and a chunk's records composed, as :mod:`changestream.snapshot.row_readers` and
:func:`changestream.snapshot.encodings.chunk_records` do in Python (the same bytes; the
tests hold both to it). Built by the install script; without it the Python path runs.

A result's rows are read into an :class:`EncodedRows` block: one buffer of their JSON and
one of their key columns' text, no Python object per row. Rows whose columns are all of
the kinds written here are read without the interpreter lock (the snapshot's other threads
run meanwhile); a value that needs its column's Python writer is written with it. Keys
become the decoder's values only when asked for (:meth:`EncodedRows.keys`): a chunk whose
window saw no change of its table never needs them.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int32_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy

from changestream.native.json_text cimport text_json, valid_utf8
from changestream.native.memory cimport regrow, reserve
from changestream.native.row_keys cimport (
    KEY_CONVERTED,
    KEY_INT,
    KEY_TEXT,
    KeyTexts,
    key_of,
    key_put,
    keys_copy_row,
    keys_free,
    keys_have_room,
    keys_make_room,
    keys_row_done,
)
from changestream.native.text_protocol cimport (
    PACKET_ROW,
    cut_short,
    next_packet,
    value_span,
)

from changestream.snapshot.values import utf8

# Column kinds (row_readers.KINDS names them).
cdef enum:
    K_NUMBER = 0     # integer text: as it is, unless it has leading zeros (ZEROFILL)
    K_DECIMAL = 1    # quoted, unless it has leading zeros
    K_QUOTED = 2     # DATE, TIME: quoted
    K_DATETIME = 3   # quoted, the first space a T
    K_TIMESTAMP = 4  # the same and +00:00
    K_TEXT = 5       # a JSON string of UTF-8 text
    K_GENERIC = 6    # the column's Python writer
    K_SKIP = 7       # read past (a column the filter leaves out)

# What reading a row's columns came to.
cdef enum:
    ROW_DONE = 0
    ROW_PYTHON = 1     # column ``col`` (its value at ``start``, ``n``) needs its writer
    ROW_KEY_TEXT = 2   # key column ``col`` is text that is not UTF-8 (utf8 refuses it)

# What stopped a scan of a buffer's packets besides the packets' own PACKET_* (which
# result_set names alike).
cdef enum:
    SCAN_ROOM = 4      # the block needs room for the next row
    SCAN_PYTHON = 5    # the next row needs the interpreter
    SCAN_CUT = 6       # a row ends too soon (``row.i`` says where)


# A table's row plan, for code without the interpreter lock (the encoder holds the
# Python objects the pointers are into).
cdef struct Plan:
    int ncols
    const unsigned char* kinds
    const char** prefix       # per column: its JSON prefix (``{"name":`` or ``,"name":``)
    Py_ssize_t* prefix_size
    int npk
    Py_ssize_t* pk_columns
    const char** pk_prefix
    Py_ssize_t* pk_prefix_size
    int32_t* key_at           # per column: its place in the key, or -1
    char* key_kind            # per place in the key: KEY_*
    bint python_columns       # a column is always written by its Python writer
    Py_ssize_t fixed          # the JSON a row takes besides its values' (a bound)


# Rows read: ``data`` holds each row's ``after`` then its ``primary_key`` JSON
# (``after_ends``, ``row_ends``: where they end), ``keys`` their keys' text.
cdef struct Block:
    char* data
    Py_ssize_t size, capacity
    Py_ssize_t* after_ends
    Py_ssize_t* row_ends
    Py_ssize_t count, rows_capacity
    KeyTexts keys


# Where reading a row stands: the next value's offset, the packet's end, the next
# column, where the row's JSON and keys began, the value that stopped it.
cdef struct RowState:
    Py_ssize_t i, end
    int col
    Py_ssize_t row_start, keys_start
    Py_ssize_t start, n
    Py_ssize_t* starts  # where each column's JSON is (for the primary key's)
    Py_ssize_t* ends


cdef inline Py_ssize_t _row_room(const Plan* plan, Py_ssize_t length) noexcept nogil:
    """The most JSON a row of ``length`` bytes can take: each value's text escaped (6
    bytes a byte at most), its prefix and quotes, and the primary key's copies."""
    return 2 * (plan.fixed + 6 * length) + 16


cdef inline bint _has_room(const Plan* plan, Block* block, Py_ssize_t length) noexcept nogil:
    return (block.count < block.rows_capacity
            and block.capacity - block.size >= _row_room(plan, length)
            and keys_have_room(&block.keys, length, plan.ncols))


cdef inline void _append(Block* block, const char* src, Py_ssize_t n) noexcept nogil:
    memcpy(block.data + block.size, src, n)
    block.size += n


cdef Py_ssize_t _columns(const Plan* plan, Block* block, const unsigned char* b,
                         RowState* row) noexcept nogil:
    """Reads a row's columns from ``row.col`` into the block (room made for it): ROW_DONE
    with the row's ``after`` written; ROW_PYTHON or ROW_KEY_TEXT where a value needs the
    interpreter (``row`` says which, the key's text kept); or a negative
    :func:`value_span` code (the row ends too soon)."""
    cdef Py_ssize_t i = row.i, start, n, k
    cdef int j
    cdef int32_t place
    cdef unsigned char kind
    cdef bint null
    for j in range(row.col, plan.ncols):
        i = value_span(b, i, row.end, &start, &n)
        if i < 0:
            return i
        null = n < 0
        place = plan.key_at[j]
        if place >= 0:
            key_put(&block.keys, place, b + start, n)
            if not null and plan.key_kind[place] == KEY_TEXT and not valid_utf8(b + start, n):
                row.i, row.col, row.start, row.n = i, j, start, n
                return ROW_KEY_TEXT
        kind = plan.kinds[j]
        if kind == K_SKIP:
            continue
        _append(block, plan.prefix[j], plan.prefix_size[j])
        row.starts[j] = block.size
        if null:
            _append(block, b"null", 4)
            row.ends[j] = block.size
            continue
        if kind == K_NUMBER and (b[start] != 48 or n == 1):
            _append(block, <const char*>b + start, n)
        elif kind == K_DECIMAL and (b[start] != 48 or (n > 1 and b[start + 1] == 46)):
            _append(block, b'"', 1)
            _append(block, <const char*>b + start, n)
            _append(block, b'"', 1)
        elif kind == K_QUOTED:
            _append(block, b'"', 1)
            _append(block, <const char*>b + start, n)
            _append(block, b'"', 1)
        elif kind == K_DATETIME or kind == K_TIMESTAMP:
            _append(block, b'"', 1)
            k = block.size
            _append(block, <const char*>b + start, n)
            while k < block.size:
                if block.data[k] == b' ':
                    block.data[k] = b'T'
                    break
                k += 1
            if kind == K_TIMESTAMP:
                _append(block, b'+00:00"', 7)
            else:
                _append(block, b'"', 1)
        elif kind == K_TEXT and valid_utf8(b + start, n):
            block.size += text_json(block.data + block.size, b + start, n)
        else:  # the writer's: rolled back to before the prefix, which it writes again
            block.size = row.starts[j] - plan.prefix_size[j]
            row.i, row.col, row.start, row.n = i, j, start, n
            return ROW_PYTHON
        row.ends[j] = block.size
    row.i, row.col = i, plan.ncols
    return ROW_DONE


cdef void _row_done(const Plan* plan, Block* block, RowState* row) noexcept nogil:
    """Ends a row whose columns are written: its ``after``'s brace, its primary key's
    JSON (room made for it)."""
    cdef int k
    cdef Py_ssize_t j
    if block.size == row.row_start:  # no column
        _append(block, b"{", 1)
    _append(block, b"}", 1)
    block.after_ends[block.count] = block.size
    if plan.npk:
        for k in range(plan.npk):
            j = plan.pk_columns[k]
            _append(block, plan.pk_prefix[k], plan.pk_prefix_size[k])
            _append(block, block.data + row.starts[j], row.ends[j] - row.starts[j])
        _append(block, b"}", 1)
    else:
        _append(block, b"null", 4)
    block.row_ends[block.count] = block.size
    block.count += 1
    keys_row_done(&block.keys)


cdef int _scan(const Plan* plan, Block* block, const unsigned char* b, Py_ssize_t size,
               Py_ssize_t* at, Py_ssize_t* last, RowState* row) noexcept nogil:
    """Reads the row packets whole in ``b`` from ``at[0]`` into the block while each is
    written here, moving ``at`` and ``last`` (the last row's start) on: what stopped it
    (a ``PACKET_*`` but PACKET_ROW, or SCAN_*: SCAN_PYTHON, the row at ``at[0]`` needs the
    interpreter; SCAN_CUT, ``row.i`` holds the :func:`value_span` code)."""
    cdef Py_ssize_t length = 0, start, code
    cdef int packet
    while True:
        packet = next_packet(b, at[0], size, &length)
        if packet != PACKET_ROW:
            return packet
        if not _has_room(plan, block, length):
            return SCAN_ROOM
        start = at[0] + 4
        row.i, row.end, row.col = start, start + length, 0
        row.row_start, row.keys_start = block.size, block.keys.size
        code = _columns(plan, block, b, row)
        if code != ROW_DONE:
            block.size, block.keys.size = row.row_start, row.keys_start
            if code < 0:
                row.i = code
                return SCAN_CUT
            return SCAN_PYTHON
        _row_done(plan, block, row)
        last[0] = start
        at[0] = start + length


cdef class RowEncoder:
    """Reads text-protocol rows into their key and their record's ``after`` and
    ``primary_key`` JSON: see :func:`changestream.snapshot.row_readers.encoded_reader`,
    whose plan (kinds, JSON prefixes, writers, key and primary key columns) it is given.
    Called with ``(buffer, offset)``, one row as ``(key, (after JSON, primary_key JSON))``;
    :meth:`rows`, a block to read a result's rows into."""

    cdef Plan plan
    cdef bytes kinds
    cdef tuple prefixes, writers, key_converters, pk_prefixes
    cdef tuple place_converters  # per place in the key: its column's converter
    cdef Py_ssize_t* starts
    cdef Py_ssize_t* ends

    def __init__(self, bytes kinds, tuple prefixes, tuple writers, tuple key_columns,
                 tuple key_converters, tuple pk_columns, tuple pk_prefixes):
        cdef Py_ssize_t j, place, ncols = len(kinds), npk = len(pk_columns)
        self.kinds, self.prefixes, self.writers = kinds, prefixes, writers
        self.key_converters, self.pk_prefixes = key_converters, pk_prefixes
        self.place_converters = tuple(key_converters[j] for j in key_columns)
        self.plan.ncols = <int>ncols
        self.plan.npk = <int>npk
        self.plan.kinds = <const unsigned char*>PyBytes_AS_STRING(kinds)
        self.plan.prefix = <const char**>calloc(max(ncols, 1), sizeof(char*))
        self.plan.prefix_size = <Py_ssize_t*>calloc(max(ncols, 1), sizeof(Py_ssize_t))
        self.plan.pk_columns = <Py_ssize_t*>calloc(max(npk, 1), sizeof(Py_ssize_t))
        self.plan.pk_prefix = <const char**>calloc(max(npk, 1), sizeof(char*))
        self.plan.pk_prefix_size = <Py_ssize_t*>calloc(max(npk, 1), sizeof(Py_ssize_t))
        self.plan.key_at = <int32_t*>malloc(max(ncols, 1) * sizeof(int32_t))
        self.plan.key_kind = <char*>calloc(max(len(key_columns), 1), 1)
        self.starts = <Py_ssize_t*>calloc(max(ncols, 1), sizeof(Py_ssize_t))
        self.ends = <Py_ssize_t*>calloc(max(ncols, 1), sizeof(Py_ssize_t))
        if self.plan.prefix == NULL or self.plan.prefix_size == NULL or \
                self.plan.pk_columns == NULL or self.plan.pk_prefix == NULL or \
                self.plan.pk_prefix_size == NULL or self.plan.key_at == NULL or \
                self.plan.key_kind == NULL or self.starts == NULL or self.ends == NULL:
            raise MemoryError()
        self.plan.fixed = 2 + 10 * ncols
        self.plan.python_columns = False
        for j in range(ncols):
            self.plan.prefix[j] = PyBytes_AS_STRING(<bytes>prefixes[j])
            self.plan.prefix_size[j] = PyBytes_GET_SIZE(<bytes>prefixes[j])
            self.plan.fixed += self.plan.prefix_size[j]
            self.plan.key_at[j] = -1
            if kinds[j] == K_GENERIC:
                self.plan.python_columns = True
        for j in range(npk):
            self.plan.pk_columns[j] = pk_columns[j]
            self.plan.pk_prefix[j] = PyBytes_AS_STRING(<bytes>pk_prefixes[j])
            self.plan.pk_prefix_size[j] = PyBytes_GET_SIZE(<bytes>pk_prefixes[j])
            self.plan.fixed += self.plan.pk_prefix_size[j]
        for place in range(len(key_columns)):
            j = key_columns[place]
            if self.plan.key_at[j] != -1:
                raise ValueError("a key column named twice")
            self.plan.key_at[j] = <int32_t>place
            convert = key_converters[j]
            self.plan.key_kind[place] = KEY_INT if convert is int else \
                KEY_TEXT if convert is utf8 else KEY_CONVERTED

    def __dealloc__(self):
        free(self.plan.prefix)
        free(self.plan.prefix_size)
        free(self.plan.pk_columns)
        free(self.plan.pk_prefix)
        free(self.plan.pk_prefix_size)
        free(self.plan.key_at)
        free(self.plan.key_kind)
        free(self.starts)
        free(self.ends)

    def rows(self):
        """A new, empty block of this table's rows."""
        return EncodedRows(self)

    def __call__(self, bytes buf, Py_ssize_t i):
        cdef EncodedRows one = EncodedRows(self)
        one.add(buf, i)
        return one.pair(0)


cdef class EncodedRows:
    """A result's rows as one encoder reads them (see the module docstring): their
    ``after`` and ``primary_key`` JSON, their keys on demand. Iterated, each row as the
    encoder's call gives it: ``(key, (after, primary_key))``."""

    cdef RowEncoder encoder
    cdef Block block

    def __cinit__(self, RowEncoder encoder):
        self.encoder = encoder

    def __dealloc__(self):
        free(self.block.data)
        free(self.block.after_ends)
        free(self.block.row_ends)
        keys_free(&self.block.keys)

    def __len__(self):
        return self.block.count

    cdef int _grow(self, Py_ssize_t length) except -1:
        """Room for one more row of ``length`` bytes."""
        cdef Block* b = &self.block
        cdef Py_ssize_t need
        reserve(&b.data, &b.capacity, b.size + _row_room(&self.encoder.plan, length), 1 << 16)
        if b.count >= b.rows_capacity:
            need = max(2 * b.rows_capacity, 256)
            regrow(<void**>&b.after_ends, need * sizeof(Py_ssize_t))
            regrow(<void**>&b.row_ends, need * sizeof(Py_ssize_t))
            b.rows_capacity = need
        keys_make_room(&b.keys, length, self.encoder.plan.ncols)
        return 0

    def scan(self, bytes buf, Py_ssize_t at):
        """Reads the row packets that are whole in ``buf`` from ``at``, up to the first
        packet that is not a row: ``(offset of that packet or of the part not yet whole,
        what stopped it, start of the last row read or -1)``, as
        :func:`changestream.snapshot.result_set.scan_rows` does into a list. Rows are read
        without the interpreter lock until one needs it: the rest of the buffer with it."""
        cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), last = -1, length = 0
        cdef const Plan* plan = &self.encoder.plan
        cdef RowState row
        cdef int stopped
        cdef bint locked = plan.python_columns
        row.starts, row.ends = self.encoder.starts, self.encoder.ends
        while True:
            if not locked:
                with nogil:
                    stopped = _scan(plan, &self.block, b, size, &at, &last, &row)
                if stopped == SCAN_ROOM:
                    self._grow(b[at] | (b[at + 1] << 8) | (b[at + 2] << 16))
                    continue
                if stopped == SCAN_CUT:
                    cut_short(row.i)
                if stopped != SCAN_PYTHON:
                    return at, stopped, last
                locked = True  # this row and the rest of the buffer: with the lock
            stopped = next_packet(b, at, size, &length)
            if stopped != PACKET_ROW:
                return at, stopped, last
            self._add(b, at + 4, at + 4 + length)
            last = at + 4
            at += 4 + length

    def add(self, bytes buf, Py_ssize_t start):
        """Reads the row at ``buf[start:]`` (one payload: the rest of the buffer)."""
        self._add(<const unsigned char*>PyBytes_AS_STRING(buf), start,
                  PyBytes_GET_SIZE(buf))

    cdef int _add(self, const unsigned char* b, Py_ssize_t start, Py_ssize_t end) except -1:
        """Reads one row, its values needing the interpreter written by their writers."""
        cdef RowEncoder encoder = self.encoder
        cdef const Plan* plan = &encoder.plan
        cdef Block* block = &self.block
        cdef RowState row
        cdef Py_ssize_t code
        cdef bytes piece
        self._grow(end - start)
        row.starts, row.ends = encoder.starts, encoder.ends
        row.i, row.end, row.col = start, end, 0
        row.row_start, row.keys_start = block.size, block.keys.size
        try:
            while True:
                code = _columns(plan, block, b, &row)
                if code == ROW_DONE:
                    break
                if code < 0:
                    cut_short(code)
                value = PyBytes_FromStringAndSize(<const char*>b + row.start, row.n)
                if code == ROW_KEY_TEXT:
                    encoder.key_converters[row.col](value)  # raises what utf8 raises
                    raise ValueError("a key's text is not UTF-8")
                piece = encoder.writers[row.col](value)
                self._grow(end - start + PyBytes_GET_SIZE(piece))
                _append(block, plan.prefix[row.col], plan.prefix_size[row.col])
                row.starts[row.col] = block.size
                _append(block, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece))
                row.ends[row.col] = block.size
                row.col += 1
        except BaseException:
            block.size, block.keys.size = row.row_start, row.keys_start
            raise
        _row_done(plan, block, &row)
        return 0

    cdef tuple pair(self, Py_ssize_t r):
        """Row ``r`` as ``(key, (after, primary_key))``."""
        cdef Py_ssize_t start = self.block.row_ends[r - 1] if r else 0
        cdef Py_ssize_t middle = self.block.after_ends[r], end = self.block.row_ends[r]
        return self._key(r), (PyBytes_FromStringAndSize(self.block.data + start,
                                                        middle - start),
                              PyBytes_FromStringAndSize(self.block.data + middle,
                                                        end - middle))

    cdef tuple _key(self, Py_ssize_t r):
        return key_of(&self.block.keys, r, self.encoder.plan.key_kind,
                      self.encoder.place_converters)

    def keys(self):
        """Each row's key in the decoder's values, in order."""
        return [self._key(r) for r in range(self.block.count)]

    def without(self, keys):
        """A block of the rows whose key is not in ``keys`` (a set of keys)."""
        cdef EncodedRows kept = EncodedRows(self.encoder)
        cdef Block* b = &self.block
        cdef Block* k = &kept.block
        cdef Py_ssize_t r, start, n
        for r in range(b.count):
            if self._key(r) in keys:
                continue
            start = b.row_ends[r - 1] if r else 0
            n = b.row_ends[r] - start
            kept._grow(n)
            memcpy(k.data + k.size, b.data + start, n)
            k.after_ends[k.count] = k.size + b.after_ends[r] - start
            k.size += n
            k.row_ends[k.count] = k.size
            k.count += 1
            keys_copy_row(&b.keys, r, &k.keys)
        return kept

    def __iter__(self):
        cdef Py_ssize_t r
        for r in range(self.block.count):
            yield self.pair(r)

    def __repr__(self):
        return f"<EncodedRows of {self.block.count} rows>"


cdef inline Py_ssize_t _digits(Py_ssize_t value, char* into) noexcept nogil:
    """``value`` (not negative) in decimal at the end of ``into`` (20 bytes): how many."""
    cdef int i = 20
    while True:
        i -= 1
        into[i] = <char>(48 + value % 10)
        value //= 10
        if value == 0:
            return 20 - i


cdef inline char* _put(char* at, const char* src, Py_ssize_t n) noexcept nogil:
    memcpy(at, src, n)
    return at + n


def chunk_lines(rows, bytes head, bytes transaction, bytes size, bytes position,
                bytes tail, bint keyed=False, Py_ssize_t first=0, Py_ssize_t last=-1):
    """A chunk's records: for each ``(after, primary_key)`` of ``rows`` (JSON; ``keyed``:
    each ``(key, (after, primary_key))``; or an :class:`EncodedRows` block), ``head``, the
    row's JSON, its sequence number (from ``first``) twice, and the parts between, as
    :func:`changestream.snapshot.encodings.chunk_records` joins them; the row numbered
    ``last`` (``-1``: the last of ``rows``) is its transaction's last. Written into one
    bytes object of the size measured first, the copies without the interpreter lock (the
    snapshot's readers parse meanwhile)."""
    cdef Py_ssize_t seq, n = len(rows), total = 0, start, middle
    cdef Py_ssize_t fixed = (PyBytes_GET_SIZE(head) + 15 + 26 + PyBytes_GET_SIZE(transaction)
                             + PyBytes_GET_SIZE(size) + PyBytes_GET_SIZE(position)
                             + PyBytes_GET_SIZE(tail))
    cdef tuple row
    cdef bytes after, pk, piece
    cdef char digits[20]
    cdef char* into
    cdef const char* pieces[5]  # head, transaction, size, position, tail
    cdef Py_ssize_t lengths[5]
    cdef Block* block = NULL
    if isinstance(rows, EncodedRows):
        block = &(<EncodedRows>rows).block
    elif not isinstance(rows, list):
        raise TypeError(f"chunk_lines takes a list or EncodedRows, not {type(rows).__name__}")
    # (after, its size, primary_key, its size) per row: read with the lock, copied without.
    cdef const char** parts = <const char**>malloc(max(n, 1) * 2 * sizeof(char*))
    cdef Py_ssize_t* sizes = <Py_ssize_t*>malloc(max(n, 1) * 2 * sizeof(Py_ssize_t))
    if parts == NULL or sizes == NULL:
        free(parts)
        free(sizes)
        raise MemoryError()
    if last < 0:
        last = first + n - 1
    try:
        for seq in range(n):
            if block != NULL:
                start = block.row_ends[seq - 1] if seq else 0
                middle = block.after_ends[seq]
                parts[2 * seq], sizes[2 * seq] = block.data + start, middle - start
                parts[2 * seq + 1] = block.data + middle
                sizes[2 * seq + 1] = block.row_ends[seq] - middle
            else:
                row = <tuple>rows[seq]
                if keyed:
                    row = <tuple>row[1]
                after, pk = <bytes>row[0], <bytes>row[1]
                parts[2 * seq], sizes[2 * seq] = PyBytes_AS_STRING(after), PyBytes_GET_SIZE(after)
                parts[2 * seq + 1], sizes[2 * seq + 1] = PyBytes_AS_STRING(pk), PyBytes_GET_SIZE(pk)
            total += (fixed + sizes[2 * seq] + sizes[2 * seq + 1]
                      + 2 * _digits(first + seq, digits) + (5 if first + seq == last else 6))
        result = PyBytes_FromStringAndSize(NULL, total)
        into = PyBytes_AS_STRING(result)
        for seq, piece in enumerate((head, transaction, size, position, tail)):
            pieces[seq], lengths[seq] = PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece)
        with nogil:
            _chunk_lines(into, n, first, last, parts, sizes, pieces, lengths)
    finally:
        free(parts)
        free(sizes)
    return result


cdef void _chunk_lines(char* at, Py_ssize_t n, Py_ssize_t first, Py_ssize_t last,
                       const char** parts, Py_ssize_t* sizes, const char** pieces,
                       Py_ssize_t* lengths) noexcept nogil:
    """:func:`chunk_lines`'s copies: ``pieces``/``lengths`` are its head, transaction,
    size, position and tail."""
    cdef Py_ssize_t seq, width
    cdef char digits[20]
    for seq in range(n):
        width = _digits(first + seq, digits)
        at = _put(at, pieces[0], lengths[0])
        at = _put(at, parts[2 * seq], sizes[2 * seq])
        at = _put(at, b',"primary_key":', 15)
        at = _put(at, parts[2 * seq + 1], sizes[2 * seq + 1])
        at = _put(at, b',"sql":null,"transaction":', 26)
        at = _put(at, pieces[1], lengths[1])
        at = _put(at, digits + 20 - width, width)
        at = _put(at, pieces[2], lengths[2])
        if first + seq == last:
            at = _put(at, b"true,", 5)
        else:
            at = _put(at, b"false,", 6)
        at = _put(at, pieces[3], lengths[3])
        at = _put(at, digits + 20 - width, width)
        at = _put(at, pieces[4], lengths[4])


def scan_rows(bytes buf, Py_ssize_t at, read_row, list rows):
    """Reads the row packets that are whole in ``buf`` from ``at``, appending what
    ``read_row(buf, start)`` gives for each to ``rows``, up to the first packet that is not
    a row: ``(offset of that packet or of the part not yet whole, what stopped it, start
    of the last row read or -1)``; see
    :func:`changestream.snapshot.result_set.scan_rows`."""
    cdef const unsigned char* b = <const unsigned char*>PyBytes_AS_STRING(buf)
    cdef Py_ssize_t size = PyBytes_GET_SIZE(buf), length = 0, last = -1
    cdef int packet
    while True:
        packet = next_packet(b, at, size, &length)
        if packet != PACKET_ROW:
            return at, packet, last
        rows.append(read_row(buf, at + 4))
        last = at + 4
        at += 4 + length
