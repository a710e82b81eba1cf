"""A batch as Arrow tables and Spark DataFrames: one per table and table shape.

Changes are grouped by table in batch order; when a table's schema changes within the batch
(DDL between its changes) a new group starts, so every group has one shape: the one its
changes were logged with. Rows carry the change metadata (:data:`~.types.METADATA`) and the
row image: the after image of inserts and updates, the before image of deletes; a group is
held as one Arrow table from then on (:class:`TableRun`). DataFrames
are made from Arrow record batches handed to the JVM in Arrow's stream format (what
``createDataFrame`` does for pandas in Spark 3.5), never from Python rows.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Iterable, Iterator
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from changestream.decoding.table_schema import TableSchema
from changestream.model.changes import Change, EncodedRun, Position, TransactionPart
from changestream.model.errors import SinkError
from changestream.model.record import record

from .types import (
    METADATA,
    METADATA_NAMES,
    FieldMapping,
    arrow_schema,
    signature,
    spark_schema,
    table_mappings,
)

if TYPE_CHECKING:  # the decode workers import this module without PySpark
    from pyspark.sql import DataFrame, SparkSession

#: Where a run's frame keeps the before image of an update (the key columns of a keyed
#: table, every column of a keyless one): ``__before_<field index>``. The mirror needs it
#: (an update that changes the key deletes the old key; a keyless row is found by value).
BEFORE_PREFIX = "__before_"

_LENGTH = struct.Struct("<Q")  # a piece's length in an encoded message
_ALIGNMENT = 64  # where an encoded frame starts (Arrow's own buffer alignment)
_SCHEMA_LIMIT = 1_000  # schemas each side keeps (pickled, and by their pickle)


class _SchemaPickles:
    """A message's schemas travel as their pickles. The sender pickles a schema object
    once; the receiver makes one object per pickle it has seen, so the frames of one table
    share a schema and what is worked out per schema object (its field mappings, in
    :func:`table_runs`) is worked out once, not once per frame (40 columns' objects and
    mappings per message on a wide table)."""

    def __init__(self, limit: int = _SCHEMA_LIMIT):
        self.limit = limit
        self._pickles: dict[int, tuple[TableSchema, bytes]] = {}
        self._schemas: dict[bytes, TableSchema] = {}

    def pickled(self, schema: TableSchema) -> bytes:
        known = self._pickles.get(id(schema))
        if known is None or known[0] is not schema:  # an id outlives its object
            if len(self._pickles) >= self.limit:
                self._pickles.clear()
            known = self._pickles[id(schema)] = (schema, pickle.dumps(schema, protocol=5))
        return known[1]

    def schema(self, data: bytes) -> TableSchema:
        schema = self._schemas.get(data)
        if schema is None:
            if len(self._schemas) >= self.limit:
                self._schemas.clear()
            schema = self._schemas[data] = pickle.loads(data)
        return schema


_schema_pickles = _SchemaPickles()


def row_numbers(n: int, first: int = 0) -> pa.Array:
    """``first`` .. ``first`` + n-1 as int64, made by Arrow (``pa.array(range(n))`` makes a
    Python int per row with the interpreter lock held; numpy is not a dependency)."""
    if not n:
        return pa.array([], pa.int64())
    return pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), first - 1)


@record
class Span:
    """``rows`` consecutive rows of a run from one transaction, which ends at ``position``
    (``None`` while that transaction is not complete); ``snapshot``: rows a snapshot read."""

    position: Position | None
    rows: int
    snapshot: bool = False


@record
class TableRun:
    """Consecutive changes of one table with one shape, in commit order, as Arrow data.

    :attr:`frame` holds one row per change: the change metadata (:data:`~.types.METADATA`),
    the row image (the after image of inserts and updates, the before image of deletes)
    and the update's before columns (:data:`BEFORE_PREFIX`); :attr:`spans` say which
    transaction each row belongs to. Changes are added one at a time (:meth:`add`) and
    become Arrow data when the frame is first asked for.
    """

    database: str
    table: str
    schema: TableSchema
    fields: tuple[FieldMapping, ...]
    spans: list[Span] = field(default_factory=list)
    # Keep every column's before image, not only the key's (a decode worker's frames: the
    # run they join may take a table as keyless that the worker's schema gave a key).
    all_before: bool = False
    # The columns a row's image leaves out, by row of the frame (rows of updates whose
    # image the server logged without every column; decode workers' frames never have any).
    absent: dict[int, frozenset[str]] = field(default_factory=dict)
    # The columns an insert's image left out: excluded by the change filter (or never
    # logged), not columns an update's image left out.
    insert_gaps: set[str] = field(default_factory=set)
    _changes: list[Change] = field(default_factory=list)
    _pieces: list[pa.Table] = field(default_factory=list)
    _frame: pa.Table | None = None

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def key_names(self) -> tuple[str, ...]:
        pk = self.schema.primary_key or ()
        return tuple(self.fields[i].name for i in pk)

    @property
    def before_fields(self) -> tuple[int, ...]:
        """The fields whose before image an update keeps (by index)."""
        pk = self.schema.primary_key
        return tuple(pk) if pk and not self.all_before else tuple(range(len(self.fields)))

    @property
    def rows(self) -> int:
        return sum(span.rows for span in self.spans)

    def add(self, change: Change, position: Position | None) -> None:
        """Append one change of a transaction ending at ``position``."""
        after = change.after
        if after is not None and len(after) < len(self.fields):
            missing = frozenset(f.name for f in self.fields if f.name not in after)
            if change.op == "update":
                self.absent[self.rows] = missing
            else:
                self.insert_gaps |= missing
        self._changes.append(change)
        snapshot = change.op == "snapshot"
        last = self.spans[-1] if self.spans else None
        if last is not None and last.position is position and last.snapshot == snapshot:
            last.rows += 1
        else:
            self.spans.append(Span(position, 1, snapshot))
        self._frame = None

    def add_frame(self, frame: pa.Table, spans: list[Span]) -> None:
        """Append rows a decode worker or a snapshot already made into this run's frame
        (``spans``: which transactions they belong to)."""
        if self._changes:  # the rows before them, first
            self._pieces.append(_changes_table(self, self._changes))
            self._changes = []
        # A worker's frame holds every before image, a snapshot's none (its rows have
        # none: NULL); the run takes the ones its schema keeps. Any other column missing
        # is a frame made for another shape: refused, never filled.
        schema = frame_schema(self)
        names = set(frame.column_names)
        snapshot_only = all(span.snapshot for span in spans)
        for column in schema:
            if column.name in names:
                continue
            if not (snapshot_only and column.name.startswith(BEFORE_PREFIX)):
                raise SinkError(f"spark sink: a frame of {self.name} lacks column "
                                f"{column.name!r} of the run it joins")
            frame = frame.append_column(column, pa.nulls(frame.num_rows, column.type))
        self._pieces.append(frame.select(schema.names))
        self.spans.extend(spans)
        self._frame = None

    @property
    def frame(self) -> pa.Table:
        """Every row of the run (see the class docstring)."""
        if self._changes:
            self._pieces.append(_changes_table(self, self._changes))
            self._changes = []
        if self._frame is None:
            schema = frame_schema(self)
            self._frame = pa.concat_tables(self._pieces) if self._pieces else \
                schema.empty_table()
        return self._frame

    def changelog(self, rows: pa.Table | None = None) -> pa.Table:
        """The changelog columns (metadata, then the row image) of ``rows`` (default: the
        whole frame)."""
        table = self.frame if rows is None else rows
        return table.select([f.name for f in METADATA + self.fields])


def frame_schema(run: TableRun) -> pa.Schema:
    """The Arrow schema of a run's frame."""
    return frame_schema_of(run.fields, run.before_fields)


def frame_schema_of(fields: tuple[FieldMapping, ...], before: Iterable[int]) -> pa.Schema:
    """The Arrow schema of a frame of a table whose columns are ``fields``, keeping the
    before image of the fields ``before`` (by index)."""
    schema = arrow_schema(METADATA + fields)
    for i in before:
        schema = schema.append(pa.field(f"{BEFORE_PREFIX}{i}", fields[i].arrow))
    return schema


def clashing_names(fields: tuple[FieldMapping, ...]) -> set[str]:
    """The columns of ``fields`` named like the change metadata or the before columns."""
    return {f.name for f in fields if f.name in METADATA_NAMES
            or f.name.startswith(BEFORE_PREFIX)}


def _changes_table(run: TableRun, changes: list[Change]) -> pa.Table:
    arrays = metadata_arrays(changes)
    arrays += _columns(run.fields, [_image(c) for c in changes])
    before = [c.before if c.op == "update" and c.before is not None else {} for c in changes]
    arrays += _columns(tuple(run.fields[i] for i in run.before_fields), before)
    return pa.Table.from_arrays(arrays, schema=frame_schema(run))


Part = TransactionPart | EncodedRun
"""What a Spark sink's batch holds: transactions as changes, or whole transactions a decode
worker made into Arrow frames (:func:`encode_runs`)."""


@record
class WorkerFrames:
    """Whole transactions a decode worker made into Arrow frames, read back
    (:func:`decode_runs`) or handed over in-process (a backfill unit's, or as the records
    of a snapshot chunk's :class:`EncodedRun`): per table run its schema, spans and frame
    (a backfill's task cuts them where its staged pieces end)."""

    frames: list[tuple[TableSchema, list[Span], pa.Table]]

    @property
    def nbytes(self) -> int:
        """What the frames hold in memory."""
        return sum(frame.nbytes for _, _, frame in self.frames)


def transaction_positions(parts: Iterable[Part | WorkerFrames]) -> list[Position | None]:
    """For each part, the position after its transaction (from its complete part); for a
    decode worker's run, after its last transaction.

    A complete part that carries no position (the router's assembler hands the position
    with each message, not on the parts) ends at its transaction's end offset in its file:
    the same coordinates the batch positions are compared by.
    """
    parts = list(parts)
    out: list[Position | None] = [None] * len(parts)
    end: dict[str, Position | None] = {}
    run_end: Position | None = None  # of the encoded run after, which ends a piece's transaction
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i]
        if isinstance(part, EncodedRun):
            if part.complete:
                run_end = part.position
            out[i] = run_end
            continue
        if isinstance(part, WorkerFrames):
            out[i] = max((span.position for _, spans, _ in part.frames for span in spans
                          if span.position is not None), key=lambda p: p.order, default=None)
            continue
        if part.complete:
            end[part.info.id] = part.position or Position(part.info.file, part.info.end)
        out[i] = end.get(part.info.id)
    return out


def table_runs(parts: Iterable[Part | WorkerFrames], all_before: bool = False
               ) -> list[TableRun]:
    """The row changes of ``parts`` grouped by table, split where a table's shape changes
    (a decode worker's frames join the runs of their tables in their place);
    ``all_before``: the runs keep every column's before image (see :class:`TableRun`)."""
    parts = list(parts)
    runs: list[TableRun] = []
    current: dict[str, tuple[tuple[Any, ...], TableRun]] = {}
    # By the schema object's id, holding the object: an id is only unique while its object
    # lives, and a worker frame's schema is dropped once its rows have joined a run.
    shapes: dict[int, tuple[tuple[FieldMapping, ...], tuple[Any, ...], TableSchema]] = {}

    def run_for(schema: TableSchema) -> TableRun:
        key = schema.qualified_name
        known = current.get(key)
        if known is None or known[1].schema is not schema:
            mapped = shapes.get(id(schema))
            if mapped is None:
                fields = table_mappings(schema)
                mapped = shapes[id(schema)] = (fields, signature(fields), schema)
            fields, sig, _ = mapped
            if known is None or known[0] != sig:
                clash = clashing_names(fields)
                if clash:
                    raise SinkError(f"spark sink: table {key} has columns named like the "
                                    f"change metadata: {', '.join(sorted(clash))}")
                run = TableRun(schema.database, schema.table, schema, fields,
                               all_before=all_before)
                runs.append(run)
                known = (sig, run)
            else:
                known = (sig, known[1])
            current[key] = known
        return known[1]

    for part, position in zip(parts, transaction_positions(parts)):
        if isinstance(part, EncodedRun | WorkerFrames):
            # Frames handed over as they are (a backfill unit's; a snapshot chunk's as
            # an encoded run's records), or as a worker process sent them.
            held = part if isinstance(part, WorkerFrames) else part.records
            if isinstance(held, WorkerFrames):
                frames = held.frames
            else:
                assert isinstance(held, bytes | memoryview), type(held)
                frames = decode_runs(held)
            for schema, spans, frame in frames:
                if isinstance(part, EncodedRun) and not part.complete:
                    # A piece of a table read whole: its rows are new or landed with the
                    # piece that ends its transaction.
                    spans = [replace(s, position=position) for s in spans]
                run_for(schema).add_frame(frame, spans)
            continue
        for change in part.changes:
            if change.op == "ddl" or change.schema is None:
                continue
            run_for(change.schema).add(change, position)
    return runs


def encode_runs(runs: list[TableRun]) -> bytes:
    """``runs`` as one bytes object for another process (:func:`decode_runs`): each run's
    schema and spans, and its frame in Arrow's stream format. Make the runs with
    ``table_runs(parts, all_before=True)``: the frames then fit any run they join."""
    return encode_frames([(run.schema, [(s.position, s.rows, s.snapshot) for s in run.spans],
                           run.frame) for run in runs])


def encode_frames(frames: list[tuple[TableSchema, list[tuple[Position | None, int, bool]],
                                     pa.Table]]) -> bytes:
    """Frames (each with its table's schema and its spans as ``(position, rows,
    snapshot)``) as :func:`encode_runs` writes them: a pickled header whose frames are
    out-of-band buffers (pickle's protocol 5), then each frame in Arrow's stream format at
    an offset aligned to 64 bytes, each piece behind its length. The receiver reads the
    frames where they lie in the message (:func:`decode_runs`): pickling them inside the
    header copied every frame once more, on the router's side with the interpreter lock
    held (about 30 ms for 60 MB)."""
    buffers: list[pickle.PickleBuffer] = []
    items = []
    for schema, spans, frame in frames:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, frame.schema) as writer:
            writer.write_table(frame)
        items.append((_schema_pickles.pickled(schema), spans,
                      pickle.PickleBuffer(sink.getvalue())))
    header = pickle.dumps(items, protocol=5, buffer_callback=buffers.append)
    pieces: list[Any] = [_LENGTH.pack(len(header)), header]
    at = _LENGTH.size + len(header)
    for buffer in buffers:
        raw = buffer.raw()
        pad = -(at + _LENGTH.size) % _ALIGNMENT
        pieces += [bytes(pad), _LENGTH.pack(raw.nbytes), raw]
        at += pad + _LENGTH.size + raw.nbytes
    return b"".join(pieces)


def decode_runs(data: bytes | memoryview) -> list[tuple[TableSchema, list[Span], pa.Table]]:
    """What :func:`encode_runs` made: per run its schema, spans and frame (the frames'
    buffers are ``data``'s own memory)."""
    view = memoryview(data)
    (size,) = _LENGTH.unpack_from(view, 0)
    at = _LENGTH.size + size
    header = view[_LENGTH.size:at]
    frames = []
    while at < len(view):
        at += -(at + _LENGTH.size) % _ALIGNMENT
        (size,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        frames.append(view[at:at + size])
        at += size
    return [(_schema_pickles.schema(schema),
             [Span(position, rows, snapshot) for position, rows, snapshot in spans],
             pa.ipc.open_stream(pa.py_buffer(frame)).read_all())
            for schema, spans, frame in pickle.loads(header, buffers=frames)]


def _image(change: Change) -> dict[str, Any]:
    return (change.before if change.op == "delete" else change.after) or {}


def _columns(fields: tuple[FieldMapping, ...], images: list[dict[str, Any]]) -> list[pa.Array]:
    arrays = []
    for f in fields:
        values = [image.get(f.name) for image in images]
        if f.convert is not None:
            convert = f.convert
            values = [None if v is None else convert(v) for v in values]
        try:
            arrays.append(pa.array(values, type=f.arrow))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise SinkError(f"spark sink: column {f.name!r} ({f.spark_type}): "
                            f"{exc}") from None
    return arrays


def metadata_arrays(changes: list[Change], ops: list[str] | None = None) -> list[pa.Array]:
    """The change metadata columns (:data:`~.types.METADATA`) of ``changes``; ``_op`` is
    each change's ``op`` unless ``ops`` gives it (a DDL's mark: truncate, drop ...)."""
    meta: dict[str, list[Any]] = {name: [] for name in METADATA_NAMES}
    for i, c in enumerate(changes):
        t = c.transaction
        meta["_op"].append(c.op if ops is None else ops[i])
        meta["_transaction_id"].append(t.id if t else None)
        meta["_gtid"].append(t.gtid if t else None)
        meta["_xid"].append(None if t is None or t.xid is None else str(t.xid))
        meta["_commit_ts"].append(t.commit_ts if t else None)
        meta["_seq"].append(c.seq)
        meta["_binlog_file"].append(c.file)
        meta["_binlog_pos"].append(c.pos)
    return [pa.array(meta[f.name], type=f.arrow) for f in METADATA]


def _record_batches(table: pa.Table, parts: int) -> Iterator[pa.RecordBatch]:
    rows = max(1, -(-table.num_rows // max(1, parts)))
    batches = table.to_batches(max_chunksize=rows)
    if not batches:  # an empty table still needs its schema on the stream
        yield pa.RecordBatch.from_arrays(
            [pa.array([], type=f.type) for f in table.schema], schema=table.schema)
    yield from batches


def to_dataframe(spark: SparkSession, table: pa.Table, fields: tuple[FieldMapping, ...],
                 extra: tuple[tuple[str, Any], ...] = ()) -> DataFrame:
    """A DataFrame of the Arrow ``table`` whose columns are ``fields`` (+ ``extra`` Spark
    fields), one partition per record batch."""
    from pyspark.sql import DataFrame
    from pyspark.sql import types as T
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer

    schema = spark_schema(fields)
    for name, dtype in extra:
        schema = schema.add(T.StructField(name, dtype, True))
    sc = spark.sparkContext
    jvm = spark._jvm
    assert jvm is not None
    parallelism = sc.defaultParallelism
    jrdd = sc._serialize_to_jvm(
        _record_batches(table, parallelism), ArrowStreamSerializer(),
        lambda path: jvm.PythonSQLUtils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer())
    jdf = jvm.PythonSQLUtils.toDataFrame(jrdd, schema.json(), spark._jsparkSession)
    return DataFrame(jdf, spark)


def frame_dataframe(spark: SparkSession, run: TableRun, rows: pa.Table) -> DataFrame:
    """A DataFrame of ``rows`` of ``run``'s frame (every column of it) and ``_row``, each
    row's place among them."""
    from pyspark.sql import types as T

    before = tuple(FieldMapping(f"{BEFORE_PREFIX}{i}", run.fields[i].spark_type,
                                run.fields[i].arrow, None) for i in run.before_fields)
    numbered = rows.append_column("_row", row_numbers(rows.num_rows))
    return to_dataframe(spark, numbered, METADATA + run.fields + before,
                        (("_row", T.LongType()),))


def changelog_dataframe(spark: SparkSession, run: TableRun) -> DataFrame:
    """The changelog DataFrame of ``run``."""
    return to_dataframe(spark, run.changelog(), METADATA + run.fields)
