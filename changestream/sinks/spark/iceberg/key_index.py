"""Where the current row of each key of a mirror lives (its data file and row position), so
that a batch deletes the rows it replaces by position (position delete files, which every
engine reads; pyiceberg 0.12 and Snowflake refuse equality deletes).

Built from a snapshot (the key columns of its live data files, less the rows its position
deletes remove) and kept by the sink's own commits, each naming the snapshot the index was
built on and the files it deletes from: Iceberg refuses one (``ValidationException``) when
another writer removed one of them since, and the index is built again. It lives in the
driver's memory, one Arrow table per data file.

A mirror without a primary key is indexed by a 128-bit hash of each whole row
(:func:`row_hashes`), its copies apart: 16 bytes a row whatever the table's width."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from changestream.native import compiled

from ..frames import row_numbers
from .files import FIELD_ID, Unsupported, local_path, split_by_data_file

#: Iceberg's reserved field ids of a position delete file's two columns.
DELETE_FILE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), False, metadata={FIELD_ID: b"2147483546"}),
    pa.field("pos", pa.int64(), False, metadata={FIELD_ID: b"2147483545"})])
FILE_COLUMN, POSITION_COLUMN = "_cs_file", "_cs_pos"
#: The key of a keyless mirror's index: a hash of the whole row.
ROW_HASH, COPIES = "_cs_row", "_cs_copies"
ROW_HASH_SCHEMA = pa.schema([pa.field(ROW_HASH, pa.binary(16), False)])


class KeyIndex:
    """The live rows of one mirror by key, as of snapshot ``snapshot_id`` (-1: none).

    ``key_schema`` holds the key columns as the table types them, each field with its
    Iceberg id."""

    def __init__(self, key_schema: pa.Schema, snapshot_id: int):
        self.key_schema = key_schema
        self.snapshot_id = snapshot_id
        # the table it is of (uuid, schema, spec, format): another one needs another index
        self.table_ids: tuple[str, int, int, int] | None = None
        self.locations: list[str] = []  # file number -> data file location
        self._numbers: dict[str, int] = {}
        self._files: dict[int, pa.Table] = {}  # per data file: its live rows' keys
        # per data file: the least and greatest value of its first key column (None: any)
        self._ranges: dict[int, tuple[Any, Any] | None] = {}
        self._ranged = key_schema.names[0] != ROW_HASH and _ordered(key_schema.field(0).type)

    @property
    def rows(self) -> int:
        """How many live rows the index holds."""
        return sum(t.num_rows for t in self._files.values())

    def add_file(self, location: str, keys: pa.Table) -> None:
        """A new data file at ``location`` whose rows have ``keys`` (its key columns, in
        the file's row order)."""
        number = self._numbers.setdefault(location, len(self.locations))
        if number == len(self.locations):
            self.locations.append(location)
        n = keys.num_rows
        self._files[number] = pa.Table.from_arrays(
            [*keys.cast(self.key_schema).columns, pa.repeat(pa.scalar(number, pa.int32()), n),
             row_numbers(n)],
            names=[*self.key_schema.names, FILE_COLUMN, POSITION_COLUMN])
        if self._ranged:
            self._ranges[number] = value_range(self._files[number].column(0))

    def _holding(self, wanted: pa.Table) -> list[pa.Table]:
        """The files' keys that can hold any of ``wanted``'s: a file whose first key
        column's values all lie outside the range of ``wanted``'s cannot (a snapshot's
        chunks, and inserts of growing keys, each land beyond the files before them)."""
        asked = value_range(wanted.column(0)) if self._ranged else None
        if asked is None:
            return list(self._files.values())
        low, high = asked
        return [keys for number, keys in self._files.items()
                if (held := self._ranges.get(number)) is None
                or not (held[1] < low or high < held[0])]

    def locate(self, keys: pa.Table, count_missing: bool = True) -> tuple[pa.Table, int]:
        """The live rows holding any of ``keys`` (key columns; any order, repeats allowed),
        as a position delete file's rows (``file_path``, ``pos``), sorted by both; and how
        many of the distinct ``keys`` were not found (0 without ``count_missing``: the
        count groups every key twice, a third of a snapshot batch's locating)."""
        if not keys.num_rows:
            return DELETE_FILE_SCHEMA.empty_table(), 0
        names = self.key_schema.names
        wanted = keys.select(names).cast(self.key_schema)
        holding = self._holding(wanted) if self._files else []
        if not holding:
            return DELETE_FILE_SCHEMA.empty_table(), \
                _distinct(wanted) if count_missing else 0
        try:
            found = pa.concat_tables(holding).join(
                wanted, names, join_type="left semi", use_threads=True)
        except pa.ArrowNotImplementedError as exc:  # a key type Arrow's join lacks
            raise Unsupported(f"key columns {names}: {exc}") from None
        locations = pa.array(self.locations, pa.string())
        rows = pa.Table.from_arrays(
            [pc.take(locations, found.column(FILE_COLUMN)), found.column(POSITION_COLUMN)],
            schema=DELETE_FILE_SCHEMA).sort_by([("file_path", "ascending"),
                                                 ("pos", "ascending")])
        if not count_missing:
            return rows, 0
        return rows, _distinct(wanted) - _distinct(found.select(names))

    def locate_copies(self, wanted: pa.Table) -> tuple[pa.Table, int]:
        """Up to ``COPIES`` live rows of each key of ``wanted`` (the key columns and
        ``COPIES``, a key once), as in :meth:`locate`; and how many of the copies asked
        for were not found."""
        names = self.key_schema.names
        asked = int(pc.sum(wanted.column(COPIES)).as_py() or 0)
        if not self._files or not asked:
            return DELETE_FILE_SCHEMA.empty_table(), asked
        wanted = pa.Table.from_arrays(
            [*wanted.select(names).cast(self.key_schema).columns, wanted.column(COPIES)],
            names=[*names, COPIES])
        try:
            found = pa.concat_tables(self._files.values()).join(
                wanted, names, join_type="inner", use_threads=True)
        except pa.ArrowNotImplementedError as exc:
            raise Unsupported(f"key columns {names}: {exc}") from None
        found = found.sort_by([(n, "ascending") for n in names]
                              + [(FILE_COLUMN, "ascending"), (POSITION_COLUMN, "ascending")])
        keys = list(zip(*(found.column(n).to_pylist() for n in names)))
        taken: dict[tuple[object, ...], int] = {}
        picks = []
        for i, (key, copies) in enumerate(zip(keys, found.column(COPIES).to_pylist())):
            have = taken.get(key, 0)
            if have < copies:
                taken[key] = have + 1
                picks.append(i)
        found = found.take(pa.array(picks, pa.int64()))
        locations = pa.array(self.locations, pa.string())
        rows = pa.Table.from_arrays(
            [pc.take(locations, found.column(FILE_COLUMN)), found.column(POSITION_COLUMN)],
            schema=DELETE_FILE_SCHEMA).sort_by([("file_path", "ascending"),
                                                 ("pos", "ascending")])
        return rows, asked - len(picks)

    def remove(self, deleted: pa.Table) -> None:
        """Forget the rows ``deleted`` (a position delete file's rows) names."""
        for location, part in split_by_data_file(deleted):
            positions = part.column("pos")
            number = self._numbers.get(location)
            if number is None or number not in self._files:
                continue
            rows = self._files[number]
            rows = rows.filter(pc.invert(pc.is_in(rows.column(POSITION_COLUMN),
                                                  value_set=positions)))
            if rows.num_rows:
                self._files[number] = rows  # its range holds what is left
            else:
                del self._files[number]
                self._ranges.pop(number, None)

    def drop_files(self, locations: Iterable[str]) -> None:
        """Forget data files that are no longer live."""
        for location in locations:
            number = self._numbers.get(location)
            if number is not None:
                self._files.pop(number, None)
                self._ranges.pop(number, None)


def _ordered(t: pa.DataType) -> bool:
    """Whether ``t``'s values order as they compare equal, in Arrow and as Python values (a
    value outside a range is in no row of it): not floats (NaN), nested or dictionary
    types, nor nanoseconds (Python's values of them lose digits)."""
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_decimal(t)
            or pa.types.is_date(t)
            or ((pa.types.is_timestamp(t) or pa.types.is_time(t)) and t.unit != "ns"))


def value_range(values: pa.Array | pa.ChunkedArray) -> tuple[Any, Any] | None:
    """The least and greatest of ``values`` (NULLs aside: no key equals one), where their
    type's order is their equality's; ``None``: no such range (another type, no values)."""
    if not _ordered(values.type) or len(values) == values.null_count:
        return None
    try:
        low_high = pc.min_max(values).as_py()
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if low_high is None or low_high["min"] is None:
        return None
    return low_high["min"], low_high["max"]


def _distinct(keys: pa.Table) -> int:
    """How many distinct rows ``keys`` holds."""
    if not keys.num_rows:
        return 0
    return keys.group_by(keys.column_names, use_threads=False).aggregate([]).num_rows


def read_keys(path: Path, key_schema: pa.Schema) -> pa.Table:
    """The key columns of data file ``path``, found by field id (a column renamed since the
    file was written has its old name in it) and cast to the table's types now."""
    parquet = pq.ParquetFile(path)
    by_id = {f.metadata[FIELD_ID]: f.name for f in parquet.schema_arrow
             if f.metadata and FIELD_ID in f.metadata}
    names = [by_id.get(f.metadata[FIELD_ID]) for f in key_schema]
    read = parquet.read(columns=[n for n in names if n is not None])
    n = parquet.metadata.num_rows
    columns = [read.column(name) if name is not None else pa.nulls(n, field.type)
               for name, field in zip(names, key_schema)]
    return pa.Table.from_arrays(columns, names=key_schema.names).cast(key_schema)


def row_hashes(rows: pa.Table, row_schema: pa.Schema) -> pa.Table:
    """A 128-bit hash of each of ``rows`` whole (a ``ROW_HASH_SCHEMA`` table): its values
    cast to ``row_schema`` (the table's columns; one ``rows`` lacks is NULL), so equal rows
    hash equal however they were typed, NULLs included. Equal hashes of unequal rows are as
    likely as a random 128-bit collision, whoever chose the rows.

    What is hashed is each value's text (as Arrow casts it) behind its length, or a
    NULL's mark: a few passes of Arrow's kernels over each column, where a Python object
    per value took 2.5 to 4.5 times as long (docs/performance.md). A column Arrow
    cannot cast to text (a list) makes the row's values Python objects instead.

    The hash is SipHash-2-4's 128-bit tag under a key drawn for the process
    (:data:`HASH_KEY`), compiled (:mod:`changestream.sinks.spark._row_hash`), else
    BLAKE2b's keyed with it; no hash outlives the process (the index is read from the
    table's files at each start)."""
    n = rows.num_rows
    present = set(rows.column_names)
    typed = [rows.column(f.name).cast(f.type) if f.name in present else pa.nulls(n, f.type)
             for f in row_schema]
    try:
        texts = [_value_text(column) for column in typed]
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        texts = None
    if texts is None:
        values: Any = pa.array([repr(row).encode() for row in zip(
            *(column.to_pylist() for column in typed))], pa.binary())
    elif not texts:
        values = pa.array([b""] * n, pa.binary())
    else:
        values = pc.binary_join_element_wise(*texts, b"") if len(texts) > 1 else texts[0]
    return pa.Table.from_arrays([value_hashes(values)], schema=ROW_HASH_SCHEMA)


#: The key of the rows' hashes: drawn for the process, so that rows chosen to collide
#: cannot be made without it.
HASH_KEY = os.urandom(16)


def value_hashes(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The 128-bit keyed hash (:data:`HASH_KEY`) of each of binary ``values`` (no NULL)."""
    native = _compiled_hash()
    if native is not None:
        return native.value_hashes(values, HASH_KEY)
    digest = hashlib.blake2b
    return pa.array([digest(value, digest_size=16, key=HASH_KEY).digest()
                     for value in values.to_pylist()], pa.binary(16))


@functools.cache
def _compiled_hash() -> Any:
    return compiled("changestream.sinks.spark._row_hash")


def _value_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Each value of ``column`` as bytes that no other value's (nor a run of values') can
    be read as: its length, ``:`` and its text (a binary value's bytes); ``N`` for NULL."""
    kind = column.type
    if pa.types.is_temporal(kind):
        # its count of units: the same value, and Arrow's text of a zoned timestamp took
        # nine tenths of a keyless plan's hashing (129 ms for 150,000 rows)
        column = column.cast(pa.int64() if kind.bit_width == 64 else pa.int32())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) \
            or pa.types.is_fixed_size_binary(kind):
        raw = column.cast(pa.binary())
    else:
        raw = column.cast(pa.string()).cast(pa.binary())
    length = pc.binary_length(raw).cast(pa.string()).cast(pa.binary())
    return pc.fill_null(pc.binary_join_element_wise(length, raw, b":"), b"N")


def build_index(listing: str, key_schema: pa.Schema,
                read: Callable[[Path], pa.Table] | None = None) -> KeyIndex | None:
    """The index of a table from its live files (``DriverCommits.liveFilesAndDeletes``'s
    text), each file's keys read by ``read`` (default: its ``key_schema`` columns);
    ``None`` when it cannot be built here: an equality delete applies (a mirror from
    before position deletes, until ``maintain`` rewrites it) or a file is not on a local
    file system."""
    lines = listing.splitlines()
    index = KeyIndex(key_schema, int(lines[0]))
    position_files: set[str] = set()
    for line in lines[1:]:
        kind, location = line.split("\t")[:2]
        if kind == "E":
            return None
        path = local_path(location)
        if path is None:
            return None
        if kind == "D":
            index.add_file(location, read(path) if read is not None
                           else read_keys(path, key_schema))
        else:
            position_files.add(location)
    for location in sorted(position_files):
        path = local_path(location)
        assert path is not None
        index.remove(pq.read_table(path, columns=["file_path", "pos"]))
    return index
