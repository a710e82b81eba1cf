"""Snapshot chunks into the Spark sink: the frames its chunk encoding makes straight from
the server's text are the general path's (the chunk's ``snapshot`` changes grouped into
runs), column for column and type for type."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from changestream.decoding import field_types as ft  # noqa: E402
from changestream.decoding.table_schema import Column, TableSchema  # noqa: E402
from changestream.model.changes import EncodedRun, Position  # noqa: E402
from changestream.sinks.spark import snapshot_frames  # noqa: E402
from changestream.sinks.spark.frames import (  # noqa: E402
    Span,
    TableRun,
    decode_runs,
    table_runs,
)
from changestream.sinks.spark.worker_encoding import ArrowFrames  # noqa: E402
from changestream.snapshot.chunks import ChunkQuery  # noqa: E402
from changestream.snapshot.coordinator import (  # noqa: E402
    ChunkOffer,
    SnapshotCoordinator,
    WholePiece,
)
from changestream.snapshot.encodings import ChunkEncoding  # noqa: E402
from changestream.snapshot.progress import SnapshotProgress  # noqa: E402
from changestream.snapshot.reader import ReadChunk, TablePlan, _row_reader  # noqa: E402
from changestream.snapshot.row_readers import values_reader  # noqa: E402
from tests.servers import skip_or_fail  # noqa: E402
from tests.unit.test_snapshot_rows import SCHEMA, VALUES, text_row  # noqa: E402
from tests.unit.test_snapshot_rows import rows as unit_rows  # noqa: E402

UTF8MB4, BINARY = 45, 63
READ_AT = dt.datetime(2026, 11, 27, 18, 0, 0, 123456, tzinfo=dt.UTC)
STREAM = Position("mariadb-bin.000003", 4_000)

# The other types a snapshot reads, with texts that take each reader's edges.
MORE = TableSchema("shop", "more", (
    Column(0, ft.LONG, name="id", nullable=False),
    Column(1, ft.TINY, name="tiny"),
    Column(2, ft.TINY, name="utiny", unsigned=True),
    Column(3, ft.SHORT, name="small"),
    Column(4, ft.INT24, name="medium"),
    Column(5, ft.LONGLONG, name="big"),
    Column(6, ft.FLOAT, name="f"),
    Column(7, ft.NEWDECIMAL, name="wide_decimal", precision=50, scale=4),
    Column(8, ft.NEWDECIMAL, name="exact", precision=38, scale=0),
    Column(9, ft.ENUM, name="color", enum_values=("red", "green"), collation=UTF8MB4),
    Column(10, ft.STRING, name="fixed", collation=BINARY, max_length=4),
    Column(11, ft.BLOB, name="body", collation=UTF8MB4),
    Column(12, ft.DATETIME2, name="at3", fsp=3),
    Column(13, ft.NEWDATE, name="d2"),
    Column(14, ft.LONG, name="zf", unsigned=True),
), primary_key=(0,))
MORE_VALUES: dict[str, list[bytes]] = {
    "tiny": [b"-128", b"127", b"0", b"-1"],
    "utiny": [b"255", b"0", b"007"],
    "small": [b"-32768", b"32767"],
    "medium": [b"-8388608", b"8388607"],
    "big": [b"-9223372036854775808", b"9223372036854775807", b"0"],
    "f": [b"3.14", b"-1.17549e-38", b"3.40282e38", b"0.1", b"1e-45"],
    "wide_decimal": [b"1234567890123456789012345678901234567890.1234", b"-0.0001",
                     b"0000000000000000000000000000000000000000000001.0000"],
    "exact": [b"99999999999999999999999999999999999999",
              b"-99999999999999999999999999999999999999", b"0"],
    "color": [b"red", b"green", b""],
    "fixed": [b"ab\x00\x00", b"\x00\x00\x00\x00", b"\xff\xfe\xfd\xfc"],
    "body": ["é€✓𝄞".encode(), b"", b"lorem " * 100],
    "at3": [b"1969-12-31 23:59:59.999", b"0001-01-01 00:00:00.000",
            b"9999-12-31 23:59:59.999", b"2000-02-29 12:00:00.500", b"2100-02-29 00:00:00.000"],
    "d2": [b"1970-01-01", b"1969-12-31", b"2000-02-29", b"1900-02-29", b"0000-01-01"],
    "zf": [b"0000000042", b"4294967295"],
}


def needs_compiled() -> None:
    if snapshot_frames.native() is None:
        skip_or_fail("the compiled snapshot frames module is not built "
                     "(scripts/install.sh builds it)")


GENERAL_FRAME = snapshot_frames.general_frame


@pytest.fixture(autouse=True)
def compiled_frames_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks' frames are the compiled module's: its falling back to the general path
    is an error here, but where a test puts it back."""

    def refused(*_: Any) -> None:
        raise AssertionError("the compiled frame was not made")

    monkeypatch.setattr(snapshot_frames, "general_frame", refused)


def more_rows(count: int) -> list[list[bytes | None]]:
    import random

    rng = random.Random(11)
    return [[str(i + 1).encode()] + [
        None if rng.random() < 0.1 else rng.choice(MORE_VALUES[c.name or ""])
        for c in MORE.columns[1:]] for i in range(count)]


def _plan(schema: TableSchema, key: tuple[str, ...], encoding: ChunkEncoding | None
          ) -> TablePlan:
    read_values = values_reader(len(schema.columns))
    used, read_row = _row_reader(schema, key, frozenset(), encoding, read_values)
    assert (used is None) == (encoding is None)
    query = ChunkQuery(schema.database, schema.table, schema.column_names, key, 1000) \
        if key else None
    return TablePlan(schema.database, schema.table, schema, query, 0, frozenset(), used,
                     read_row, read_values)


def _runs(schema: TableSchema, key: tuple[str, ...], texts: list[list[bytes | None]],
          encoding: ChunkEncoding | None, changed: set[tuple[Any, ...]] = frozenset(),
          block: bool = False) -> tuple[list[TableRun], list[Any]]:
    """The runs a Spark sink makes of a chunk of ``texts`` (rows of ``schema``) delivered
    with or without ``encoding``, the keys ``changed`` noted in its window; ``block``: the
    rows read by a scan of their packets into the row reader's block, as a result is."""
    plan = _plan(schema, key, encoding)
    # The rows as a result block holds them: one after the other in one buffer.
    packets = [text_row(r) for r in texts]
    buf = b"".join(packets)
    starts = [sum(len(p) for p in packets[:i]) for i in range(len(packets))]
    rows: Any = [plan.read_row(buf, at) for at in starts]
    if block:
        rows = plan.read_row.rows()  # type: ignore[attr-defined]
        framed = b"".join(len(p).to_bytes(3, "little") + b"\x00" + p for p in packets)
        # In two buffers, as a result comes: the rows keep where they are in each.
        middle = 4 * (len(packets) // 2) + sum(len(p) for p in packets[:len(packets) // 2])
        at, stopped, _ = rows.scan(framed[:middle + 2], 0)
        assert (at, stopped) == (middle, 0)
        assert rows.scan(framed[middle:], 0)[:2] == (len(framed) - middle, 0)
        assert len(rows) == len(texts)
    chunk = ReadChunk(rows, None, True, ("mariadb-bin.000003", 3_000), READ_AT)
    coordinator = SnapshotCoordinator(SnapshotProgress("s1", (plan.name,)))
    if key:
        coordinator.track(plan.database, plan.table, key)
        coordinator.tracked[(plan.database, plan.table)].keys |= set(changed)
    delivered = coordinator.deliver(
        ChunkOffer(plan, chunk), STREAM,
        lambda p: Position(STREAM.file, STREAM.pos, snapshot=p.as_dict()))
    assert delivered is not None
    parts, _ = delivered
    if encoding is not None:
        assert all(isinstance(p, EncodedRun) for p in parts)
    return table_runs(parts), parts


def assert_same_runs(got: list[TableRun], wanted: list[TableRun]) -> None:
    def shape(run: TableRun) -> tuple[Any, ...]:
        return (run.name, [(f.name, f.spark_type, f.arrow) for f in run.fields], run.spans,
                run.insert_gaps, run.absent)

    assert [shape(r) for r in got] == [shape(r) for r in wanted]
    for mine, theirs in zip(got, wanted, strict=True):
        frame, table = mine.frame, theirs.frame
        assert frame.schema == table.schema
        for name in table.column_names:
            assert frame.column(name).type == table.column(name).type, name
            assert frame.column(name).to_pylist() == table.column(name).to_pylist(), name
        assert frame.equals(table)


@pytest.mark.parametrize(("schema", "key", "texts"), [
    (SCHEMA, ("id", "code"), unit_rows(400)),
    (MORE, ("id",), more_rows(400)),
    (MORE, (), more_rows(50)),  # a table read whole: no key
], ids=["every-type", "more-types", "keyless"])
def test_a_chunks_frame_is_the_general_paths(schema: TableSchema, key: tuple[str, ...],
                                             texts: list[list[bytes | None]]) -> None:
    needs_compiled()
    fast, _ = _runs(schema, key, texts, ArrowFrames().chunk_encoding())
    general, _ = _runs(schema, key, texts, None)
    assert sum(r.rows for r in general) == len(texts)
    assert_same_runs(fast, general)


def _pieces(schema: TableSchema, texts: list[list[bytes | None]], cuts: tuple[int, ...],
            encoding: ChunkEncoding | None) -> tuple[list[Any], list[Position | None],
                                                    SnapshotCoordinator]:
    """The parts and positions a table without a key delivered as one transaction in
    pieces (cut before the rows ``cuts`` number) makes."""
    plan = _plan(schema, (), encoding)
    packets = [text_row(r) for r in texts]
    buf = b"".join(packets)
    starts = [sum(len(p) for p in packets[:i]) for i in range(len(packets))]
    rows = [plan.read_row(buf, at) for at in starts]
    coordinator = SnapshotCoordinator(SnapshotProgress("s1", (plan.name,)))
    parts: list[Any] = []
    afters: list[Position | None] = []
    bounds = (0, *cuts, len(rows))
    for first, end in itertools.pairwise(bounds):
        piece = WholePiece(first, len(rows), end == len(rows))
        chunk = ReadChunk(rows[first:end], None, piece.last, ("mariadb-bin.000003", 3_000),
                          READ_AT)
        delivered = coordinator.deliver(
            ChunkOffer(plan, chunk, piece=piece), STREAM,
            lambda p: Position(STREAM.file, STREAM.pos, snapshot=p.as_dict()))
        assert delivered is not None
        parts += delivered[0]
        afters.append(delivered[1])
    return parts, afters, coordinator


def test_a_table_read_whole_in_pieces_lands_as_one_transaction() -> None:
    """A table without a key in three pieces: one transaction numbered through, only the
    last piece complete and positioned (the progress moves on once), and every row's span
    at that position, from the compiled frames as on the general path."""
    needs_compiled()
    texts = more_rows(250)
    runs = {}
    for name, encoding in (("fast", ArrowFrames().chunk_encoding()), ("general", None)):
        parts, afters, coordinator = _pieces(MORE, texts, (100, 200), encoding)
        assert afters[:2] == [None, None] and afters[2] is not None
        assert afters[2].snapshot is not None and afters[2].snapshot["chunks"] == 1
        progress = coordinator.progress
        assert progress is not None and progress.finished and progress.rows == 250
        assert [p.complete for p in parts] == [False, False, True]
        if encoding is not None:
            assert [p.position for p in parts] == afters
            assert [p.transactions for p in parts] == [0, 0, 1]
        [run] = runs[name] = table_runs(parts)
        assert run.frame.column("_seq").to_pylist() == list(range(250))
        assert all(s.position == afters[2] for s in run.spans)
        assert sum(s.rows for s in run.spans) == 250
        # A span per piece (the general path's changes make one): the same rows at the
        # same position.
        run.spans[:] = [Span(afters[2], 250, True)]
    assert_same_runs(runs["fast"], runs["general"])


def test_rows_whose_keys_changed_in_the_window_are_left_out_as_on_the_general_path() -> None:
    needs_compiled()
    texts = unit_rows(100)
    changed = {(int(t[0] or 0), (t[16] or b"").decode()) for t in texts[::7]}
    fast, _ = _runs(SCHEMA, ("id", "code"), texts, ArrowFrames().chunk_encoding(), changed)
    general, _ = _runs(SCHEMA, ("id", "code"), texts, None, changed)
    assert sum(r.rows for r in general) == 100 - len(texts[::7])
    assert_same_runs(fast, general)


@pytest.mark.parametrize("changed", [0, 7], ids=["no change", "every 7th key changed"])
def test_a_chunk_read_into_a_block_lands_as_its_rows_read_one_by_one(changed: int) -> None:
    """A result's rows read into the row reader's block (no Python object per row, keys
    made when the window needs them) land as the rows read one call each."""
    needs_compiled()
    for schema, texts, key in ((SCHEMA, unit_rows(100), ("id", "code")),
                               (MORE, more_rows(300), ("id",))):
        keys = _plan(schema, key, None).read_row
        noted = {keys(text_row(t), 0)[0] for t in texts[::changed]} if changed else set()
        block, _ = _runs(schema, key, texts, ArrowFrames().chunk_encoding(), noted, True)
        one_by_one, _ = _runs(schema, key, texts, ArrowFrames().chunk_encoding(), noted)
        general, _ = _runs(schema, key, texts, None, noted)
        assert sum(r.rows for r in general) == len(texts) - len(noted)
        assert_same_runs(block, one_by_one)
        assert_same_runs(block, general)


def test_every_text_of_every_column_lands_as_on_the_general_path() -> None:
    """Each value of the value lists in a row of its own, so that none is left untried."""
    needs_compiled()
    for schema, value_lists, key in ((SCHEMA, VALUES, ("id", "code")),
                                     (MORE, MORE_VALUES, ("id",))):
        texts = []
        for j, column in enumerate(schema.columns[1:], start=1):
            for value in value_lists[column.name or ""]:
                row = [str(len(texts) + 1).encode()] + [
                    value_lists[c.name or ""][0] for c in schema.columns[1:]]
                row[j] = value
                texts.append(row)
        fast, _ = _runs(schema, key, texts, ArrowFrames().chunk_encoding())
        general, _ = _runs(schema, key, texts, None)
        assert_same_runs(fast, general)


def test_a_value_the_compiled_readers_refuse_makes_the_chunk_on_the_general_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A DATETIME in a form the server does not print is read by Python's ``datetime``."""
    needs_compiled()
    monkeypatch.setattr(snapshot_frames, "general_frame", GENERAL_FRAME)
    texts = more_rows(20)
    texts[3][12] = b"2024-01-01T10:00:00"
    fast, parts = _runs(MORE, ("id",), texts, ArrowFrames().chunk_encoding())
    general, _ = _runs(MORE, ("id",), texts, None)
    assert_same_runs(fast, general)
    (_, _, frame), = parts[0].records.frames  # handed over as they are
    assert frame.column("at3")[3].as_py() == dt.datetime(2024, 1, 1, 10)


def test_a_row_cut_short_is_an_error_not_a_read_past_its_buffer() -> None:
    needs_compiled()
    read = ArrowFrames().chunk_encoding().row_reader(SCHEMA, ("id",), frozenset())
    assert read is not None
    whole = text_row(unit_rows(1)[0])
    for cut in (1, 5, len(whole) - 1):
        with pytest.raises(ValueError, match="row ends"):
            read(whole[:cut], 0)


def test_tables_the_encoding_does_not_take_are_read_as_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    encoding = ArrowFrames().chunk_encoding()
    # Columns the filter leaves out, and columns named like the change metadata.
    assert encoding.row_reader(SCHEMA, ("id",), frozenset({"secret"})) is None
    clash = TableSchema("d", "t", (Column(0, ft.LONG, name="id"),
                                   Column(1, ft.LONG, name="_op")), primary_key=(0,))
    assert encoding.row_reader(clash, ("id",), frozenset()) is None
    monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
    assert encoding.row_reader(SCHEMA, ("id",), frozenset()) is None


def test_the_frame_holds_the_chunks_metadata() -> None:
    needs_compiled()
    runs, parts = _runs(MORE, ("id",), more_rows(5), ArrowFrames().chunk_encoding())
    (run,) = runs
    frame = run.frame
    assert frame.column("_op").to_pylist() == ["snapshot"] * 5
    assert frame.column("_transaction_id").to_pylist() == ["snapshot-s1-1"] * 5
    assert frame.column("_seq").to_pylist() == list(range(5))
    assert frame.column("_commit_ts").to_pylist() == [READ_AT] * 5
    assert frame.column("_binlog_file").to_pylist() == [STREAM.file] * 5
    assert frame.column("_binlog_pos").to_pylist() == [STREAM.pos] * 5
    assert [s.snapshot for s in run.spans] == [True]
    assert run.spans[0].position == parts[0].position
    assert parts[0].tables == {("shop", "more", "snapshot"): 5}
    assert isinstance(frame.column("big").type, pa.DataType)


def test_a_rows_key_is_the_decoders_values_of_its_key_columns() -> None:
    """Integers read in C (the smallest BIGINT and leading zeros included), other key
    columns by their converters: the keys the window's noted changes are compared with."""
    needs_compiled()
    read = ArrowFrames().chunk_encoding().row_reader(MORE, ("big", "zf", "body", "id"),
                                                      frozenset())
    general = _plan(MORE, ("big", "zf", "body", "id"), None).read_row
    assert read is not None
    texts = more_rows(300)
    texts[0][5], texts[1][5] = b"-9223372036854775808", b"-0"
    for text in texts:
        row = text_row(text)
        key, (buf, at) = read(b"\x00" + row, 1)
        assert (buf[at:], at) == (row, 1)
        assert key == general(row, 0)[0], text


def test_decoded_frames_are_read_where_they_lie_in_the_message() -> None:
    from changestream.sinks.spark.frames import encode_frames

    schema = MORE
    frame = pa.table({"id": pa.array(range(100_000), pa.int64())})
    message = encode_frames([(schema, [(None, 100_000, True)], frame),
                             (schema, [(None, 3, False)], frame.slice(0, 3))])
    view = memoryview(message).toreadonly()
    decoded = decode_runs(view)
    assert [f.num_rows for _, _, f in decoded] == [100_000, 3]
    assert decoded[0][2].column("id").to_pylist() == list(range(100_000))
    assert decoded[0][1][0].rows == 100_000 and decoded[1][1][0].snapshot is False
    base = pa.py_buffer(view).address
    values = decoded[0][2].column("id").chunk(0).buffers()[1]
    assert base <= values.address < base + len(message)  # no copy of the frame
    assert values.address % 8 == 0


def test_the_frames_of_one_table_share_one_schema_object_across_messages() -> None:
    """A schema travels as its pickle, and the receiver makes one object per pickle: a
    table's frames from many messages share it (their field mappings are worked out once
    in ``table_runs``); another shape of the table is another object."""
    from dataclasses import replace

    from changestream.sinks.spark.frames import _SchemaPickles, encode_frames

    frame = pa.table({"id": pa.array([1, 2], pa.int64())})
    # Equal schemas as separate objects, as a worker's decoder may make per transaction.
    first, again = MORE, replace(MORE, columns=tuple(MORE.columns))
    changed = replace(MORE, columns=MORE.columns[:-1])
    decoded = [decode_runs(encode_frames([(s, [(None, 2, False)], frame)]))[0][0]
               for s in (first, again, changed, first)]
    assert decoded[0] is decoded[1] is decoded[3]
    assert decoded[0] == MORE and decoded[0] is not MORE
    assert decoded[2] is not decoded[0] and decoded[2] == changed

    # Bounded: each side starts again when full, and what it gives is still right.
    pickles = _SchemaPickles(limit=2)
    shapes = [replace(MORE, columns=MORE.columns[:n]) for n in range(1, 8)]
    for shape in shapes + shapes:
        assert pickles.schema(pickles.pickled(shape)) == shape
        assert len(pickles._pickles) <= 2 and len(pickles._schemas) <= 2
