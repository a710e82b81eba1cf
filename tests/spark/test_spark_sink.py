"""The Spark sink lands hand-built batches of every column type; read back with Spark SQL."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import time
from decimal import Decimal
from typing import Any

import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.table_schema import TableSchema
from changestream.delivery.plugins import make_sink
from changestream.model.changes import Batch, EncodedRun, TransactionPart
from changestream.model.errors import SinkError
from changestream.sinks.spark import SparkSink
from changestream.sinks.spark.frames import encode_runs, table_runs
from changestream.sinks.spark.iceberg.commit_queue import StagedCommit

from .conftest import Binlog, all_types_row, all_types_schema, batch, col, simple_schema

pytestmark = pytest.mark.spark

os.environ["TZ"] = "UTC"
time.tzset()

EXPECTED_TYPES = {
    "id": "int", "tiny": "tinyint", "tiny_u": "smallint", "small_u": "int", "medium": "int",
    "int_u": "bigint", "big": "bigint", "big_u": "decimal(20,0)", "price": "decimal(10,2)",
    "huge": "string", "f": "float", "d": "double", "born": "date", "at": "timestamp_ntz",
    "ts": "timestamp", "t": "string", "y": "int", "name": "string", "code": "string",
    "notes": "string", "raw": "binary", "bin": "binary", "doc": "string", "color": "string",
    "tags": "array<string>", "flags": "bigint", "shape": "binary", "vec": "array<float>",
}
METADATA_TYPES = {"_op": "string", "_transaction_id": "string", "_gtid": "string",
                  "_xid": "string", "_commit_ts": "timestamp", "_seq": "bigint",
                  "_binlog_file": "string", "_binlog_pos": "bigint"}


def landed(row: dict[str, Any]) -> dict[str, Any]:
    """What Spark gives back for a row of ``all_types_row``."""
    out = dict(row)
    out.update({
        "big_u": Decimal(row["big_u"]), "huge": format(row["huge"], "f"),
        "ts": row["ts"].replace(tzinfo=None), "t": "-838:59:59.000000",
        "doc": json.dumps(json.loads('{"k":[1,2.5,null,"x"],"n":{"d":"1.10"}}'),
                          separators=(",", ":")),
        "flags": -1,
    })
    return out


def values(row: Any) -> dict[str, Any]:
    d = row.asDict()
    return {k: (bytes(v) if isinstance(v, bytearray) else v) for k, v in d.items()}


def assert_rows_equal(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, want in expected.items():
        assert actual[key] == want, f"{key}: {actual[key]!r} != {want!r}"


# -- callback -----------------------------------------------------------------------------


def test_callback_gets_dataframes_typed_from_the_table_schema(spark: Any) -> None:
    log = Binlog()
    schema = all_types_schema()
    rows = [all_types_row(i) for i in range(3)]
    parts = [log.transaction([("insert", schema, None, r) for r in rows]),
             log.transaction([("update", schema, rows[0], {**rows[0], "name": "renamed"}),
                              ("delete", schema, rows[1], None)])]
    seen: dict[str, Any] = {}

    def function(batch_id: int, frames: dict[str, list[Any]], info: Any) -> None:
        seen["id"], seen["info"] = batch_id, info
        seen["rows"] = {name: [df.collect() for df in dfs] for name, dfs in frames.items()}
        seen["types"] = {f.name: f.dataType.simpleString()
                         for f in frames["shop.items"][0].schema.fields}

    sink = SparkSink("callback", function=function, spark=spark)
    assert sink.open() is None
    sink.write(batch(7, parts))
    sink.close()

    assert seen["id"] == 7
    assert seen["info"].position == parts[-1].position
    assert seen["info"].rows == {"shop.items": 5}
    assert seen["types"] == {**METADATA_TYPES, **EXPECTED_TYPES}
    [got] = seen["rows"]["shop.items"]
    assert [r["_op"] for r in got] == ["insert"] * 3 + ["update", "delete"]
    for r, want in zip(got[:3], rows):
        assert_rows_equal(values(r), landed(want))
    assert got[3]["name"] == "renamed" and got[4]["id"] == 1  # after image, before image
    first = got[0]
    assert first["_gtid"] == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1"
    assert first["_transaction_id"] == first["_gtid"] and first["_xid"] == "1001"
    assert first["_commit_ts"] == dt.datetime(2024, 5, 1, 10, 0, 1)
    assert (first["_seq"], first["_binlog_file"], first["_binlog_pos"]) == (0, "binlog.000001", 4)
    assert [r["_seq"] for r in got[3:]] == [0, 1]


def test_callback_splits_a_table_whose_schema_changes_within_the_batch(spark: Any) -> None:
    log = Binlog()
    v1 = simple_schema("orders")
    v2 = simple_schema("orders", ("id", "name", "qty", "amount"))
    parts = [log.transaction([("insert", v1, None, {"id": 1, "name": "a", "qty": 2})]),
             log.ddl("ALTER TABLE orders ADD COLUMN amount DECIMAL(8,2)", "orders"),
             log.transaction([("insert", v2, None, {"id": 2, "name": "b", "qty": 3,
                                                    "amount": Decimal("9.99")})])]
    got: dict[str, Any] = {}
    sink = make_sink("spark:callback", spark=spark,
                     function=lambda i, frames, info: got.update(frames=frames, info=info))
    sink.open()
    sink.write(batch(1, parts))
    frames = got["frames"]["shop.orders"]
    assert [len(df.columns) for df in frames] == [8 + 3, 8 + 4]
    assert frames[1].collect()[0]["amount"] == Decimal("9.99")
    assert got["info"].ddl == ["ALTER TABLE orders ADD COLUMN amount DECIMAL(8,2)"]


def test_mariadb_uuid_and_inet_columns_land_as_text(spark: Any) -> None:
    """Logged as BINARY(16)/BINARY(4); the schema history marks them (Column.text_type)."""
    binary = {"collation": 63, "max_length": 16}
    schema = TableSchema("shop", "hosts", (
        col(0, "id", ft.LONG), col(1, "u", ft.STRING, text_type="uuid", **binary),
        col(2, "ip", ft.STRING, text_type="inet6", **binary),
        col(3, "v4", ft.STRING, text_type="inet4", collation=63, max_length=4),
        col(4, "raw", ft.STRING, **binary)), primary_key=(0,), names_logged=True)
    row = {"id": 1, "u": "6ccd780c-baba-1026-9564-5b8c656024db", "ip": "::ffff:10.0.0.1",
           "v4": "10.0.0.1", "raw": b"\x00" * 16}
    got: dict[str, Any] = {}
    sink = make_sink("spark:callback", spark=spark,
                     function=lambda i, frames, info: got.update(frames=frames))
    sink.open()
    sink.write(batch(1, [Binlog().transaction([("insert", schema, None, row)])]))
    [frame] = got["frames"]["shop.hosts"]
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert [types[n] for n in ("u", "ip", "v4", "raw")] == ["string"] * 3 + ["binary"]
    landed_row = values(frame.collect()[0])
    assert {k: landed_row[k] for k in row} == row


# -- parquet ------------------------------------------------------------------------------


def test_parquet_appends_a_changelog_per_table_and_replay_is_a_no_op(spark: Any,
                                                                     tmp_path: Any) -> None:
    log = Binlog()
    schema = all_types_schema()
    rows = [all_types_row(i) for i in range(4)]
    day2 = dt.datetime(2024, 5, 2, 0, 0, 1, tzinfo=dt.UTC)
    b1 = batch(1, [log.transaction([("insert", schema, None, r) for r in rows[:2]])])
    b2 = batch(2, [log.transaction([("insert", schema, None, r) for r in rows[2:]],
                                   commit_ts=day2),
                   log.transaction([("delete", schema, rows[0], None)], commit_ts=day2)])
    sink = make_sink("spark:parquet", path=str(tmp_path), spark=spark)
    assert sink.open() is None
    sink.write(b1)
    sink.write(b2)
    sink.write(b2)  # replayed: nothing new
    sink.close()

    table = tmp_path / "shop" / "items"
    assert sorted(p.name for p in table.iterdir()) == ["_commit_date=2024-05-01",
                                                       "_commit_date=2024-05-02"]
    df = spark.read.parquet(str(table))
    got = sorted(df.collect(), key=lambda r: (r["_binlog_pos"], r["_seq"]))
    assert [(r["_op"], r["id"]) for r in got] == [("insert", 0), ("insert", 1), ("insert", 2),
                                                   ("insert", 3), ("delete", 0)]
    for r, want in zip(got, rows):
        assert_rows_equal(values(r), landed(want))
    assert str(got[-1]["_commit_date"]) == "2024-05-02"

    reopened = SparkSink("parquet", path=tmp_path, spark=spark)
    assert reopened.open() == b2.position
    reopened.write(b1)  # a batch from before the stored position: skipped
    assert spark.read.parquet(str(table)).count() == 5
    manifest = (tmp_path / "_changestream" / "manifest.jsonl").read_text().splitlines()
    assert [json.loads(line)["batch"] for line in manifest] == [1, 2]


def test_parquet_open_removes_files_of_a_batch_that_never_committed(spark: Any,
                                                                    tmp_path: Any) -> None:
    log = Binlog()
    schema = simple_schema("orders")
    b1 = batch(1, [log.transaction([("insert", schema, None, {"id": 1, "name": "a",
                                                              "qty": 1})])])
    b2 = batch(2, [log.transaction([("insert", schema, None, {"id": 2, "name": "b",
                                                              "qty": 2})])])
    sink = SparkSink("parquet", path=tmp_path, spark=spark)
    sink.open()
    sink.write(b1)
    sink.write(b2)
    # As if the process died after moving batch 2's files, before its manifest line.
    manifest = tmp_path / "_changestream" / "manifest.jsonl"
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text(lines[0] + lines[1][:10])
    again = SparkSink("parquet", path=tmp_path, spark=spark)
    assert again.open() == b1.position
    assert [r["id"] for r in spark.read.parquet(str(tmp_path / "shop" / "orders")).collect()] \
        == [1]
    again.write(b2)
    assert sorted(r["id"] for r in spark.read.parquet(str(tmp_path / "shop" / "orders"))
                  .collect()) == [1, 2]


# -- iceberg ------------------------------------------------------------------------------


_catalogs = iter(range(1, 1000))


@pytest.fixture
def catalog() -> str:
    """A catalog name of its own per test (Spark keeps a catalog's warehouse for good)."""
    return f"cs{next(_catalogs)}"


def mirror(spark: Any, catalog: str, table: str, order: str = "id") -> list[dict[str, Any]]:
    return [values(r) for r in spark.sql(f"SELECT * FROM {catalog}.shop.{table} "
                                         f"ORDER BY {order}").collect()]


WRITERS = {"arrow": {}, "spark": {"arrow_appends": "false", "append_new_keys": "false"}}


def writers(spark: Any, catalog: str, table: str) -> set[str]:
    """Who wrote the Parquet data files of Iceberg table ``table`` (its live ones)."""
    import pyarrow.parquet as pq

    files = spark.sql(f"SELECT file_path FROM {catalog}.shop.{table}.files").collect()
    return {pq.ParquetFile(r["file_path"].removeprefix("file:")).metadata.created_by
            .split(" ")[0] for r in files}


def test_iceberg_makes_its_own_tables_with_their_columns_and_properties(
        spark: Any, tmp_path: Any, catalog: str) -> None:
    """The control table (at the open) and the schema history's table (at its first state)
    are created through the catalog's call, not SQL: the same columns and properties."""
    from changestream.sinks.spark.iceberg.history import WarehouseHistoryStore
    from changestream.sinks.spark.iceberg.names import CONTROL_TABLE_PROPERTIES

    sink = make_sink("spark:iceberg", warehouse=str(tmp_path), spark=spark, catalog=catalog)
    assert sink.open() is None
    WarehouseHistoryStore(spark, catalog).save("d1", b'{"tables": []}')
    for table, columns in (("batches", [("batch", "bigint"), ("position", "string"),
                                        ("committed_at", "timestamp")]),
                           ("schema_states", [("digest", "string"), ("state", "string"),
                                              ("stored_at", "timestamp")])):
        name = f"{catalog}._changestream.{table}"
        assert [(f.name, f.dataType.simpleString())
                for f in spark.table(name).schema.fields] == columns
        properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
        assert {k: properties.get(k) for k in CONTROL_TABLE_PROPERTIES} == \
            CONTROL_TABLE_PROPERTIES, table
    assert [r["digest"] for r in spark.table(f"{catalog}._changestream.schema_states")
            .collect()] == ["d1"]


class _LookedUpAfterEverySet:
    """A session whose catalogs another thread looks up after every ``conf.set``: the
    worst interleaving of a sink opening on a session somebody else uses (Spark builds a
    catalog at its first lookup and keeps it)."""

    def __init__(self, spark: Any, catalog: str):
        self._spark, self._catalog = spark, catalog
        self.conf = self

    def get(self, key: str, default: Any = None) -> Any:
        return self._spark.conf.get(key, default)

    def set(self, key: str, value: str) -> None:
        self._spark.conf.set(key, value)
        # Before the catalog is there, its name reads as a namespace of Spark's own: refused.
        with contextlib.suppress(Exception):
            self._spark.catalog.tableExists(f"{self._catalog}.shop.nothing")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)


def test_iceberg_opens_on_a_session_looked_up_while_its_catalog_is_set(
        spark: Any, tmp_path: Any, catalog: str) -> None:
    """The catalog's options are set before the key that names its class: a lookup in
    between does not build a catalog without them (with no ``type``, a Hive one that
    cannot connect)."""
    sink = make_sink("spark:iceberg", warehouse=str(tmp_path), spark=spark, catalog=catalog)
    sink.spark = _LookedUpAfterEverySet(spark, catalog)
    assert sink.open() is None
    assert spark.catalog.tableExists(f"{catalog}._changestream.batches")
    assert (tmp_path / "_changestream" / "batches" / "metadata").is_dir()
    sink.close()


@pytest.mark.parametrize("writer", WRITERS)
def test_iceberg_keeps_a_mirror_and_a_changelog_with_the_position(
        spark: Any, tmp_path: Any, catalog: str, writer: str) -> None:
    log = Binlog()
    schema = all_types_schema()
    rows = [all_types_row(i) for i in range(4)]
    b1 = batch(1, [log.transaction([("insert", schema, None, r) for r in rows])])
    changed = {**rows[1], "name": "changed", "price": Decimal("1.00")}
    moved = {**rows[3], "id": 30}
    b2 = batch(2, [log.transaction([("update", schema, rows[1], changed),
                                    ("delete", schema, rows[2], None)]),
                   log.transaction([("update", schema, rows[3], moved),  # key changes
                                    ("insert", schema, None, rows[2]),   # 2 comes back
                                    ("update", schema, rows[2], {**rows[2], "y": 1901})])])
    sink = make_sink("spark:iceberg", warehouse=str(tmp_path), spark=spark,
                     catalog=catalog, **WRITERS[writer])
    assert sink.open() is None
    sink.write(b1)
    # pyarrow's files ("parquet-cpp-arrow") or Spark's ("parquet-mr")
    want = "parquet-cpp-arrow" if writer == "arrow" else "parquet-mr"
    assert writers(spark, catalog, "items") == {want}
    assert writers(spark, catalog, "items__changelog") == {want}
    sink.write(b2)

    got = mirror(spark, catalog, "items")
    assert [r["id"] for r in got] == [0, 1, 2, 30]
    expected = [landed(rows[0]), landed(changed), landed({**rows[2], "y": 1901}),
                landed(moved)]
    for r, want in zip(got, expected):
        assert_rows_equal(r, want)
    types = {f.name: f.dataType.simpleString()
             for f in spark.table(f"{catalog}.shop.items").schema.fields}
    assert types == {**EXPECTED_TYPES, "tiny": "int", "tiny_u": "int"}  # Iceberg's ints

    log_rows = spark.sql(f"SELECT _op, id FROM {catalog}.shop.items__changelog "
                         "ORDER BY _binlog_pos, _seq").collect()
    assert [(r["_op"], r["id"]) for r in log_rows] == [
        ("insert", 0), ("insert", 1), ("insert", 2), ("insert", 3), ("update", 1),
        ("delete", 2), ("update", 30), ("insert", 2), ("update", 2)]

    stored = spark.sql("SELECT summary['changestream.position'] p FROM "
                       f"{catalog}.shop.items.snapshots ORDER BY committed_at").collect()
    assert json.loads(stored[-1]["p"])["pos"] == b2.position.pos

    # each batch is one snapshot of the control table, without rows, naming the batch
    marks = spark.sql("SELECT summary['changestream.batch'] b, summary['changestream.position'] "
                      f"p FROM {catalog}._changestream.batches.snapshots ORDER BY committed_at"
                      ).collect()
    assert [int(m["b"]) for m in marks] == [b1.id, b2.id]
    assert json.loads(marks[-1]["p"])["pos"] == b2.position.pos
    assert spark.table(f"{catalog}._changestream.batches").count() == 0

    sink.write(b2)  # replayed batch: no new snapshot anywhere
    snapshots = spark.sql(f"SELECT count(*) c FROM {catalog}.shop.items.snapshots") \
        .collect()[0]["c"]
    sink.close()
    again = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    assert again.open() == b2.position
    again.write(b1)
    assert spark.sql(f"SELECT count(*) c FROM {catalog}.shop.items.snapshots") \
        .collect()[0]["c"] == snapshots
    assert len(mirror(spark, catalog, "items")) == 4


def _a_then_a_and_b() -> tuple[Batch, Batch]:
    """Batch 1: an insert into table a; batch 2: an insert into a, then one into b."""
    log = Binlog()
    a, b = simple_schema("a"), simple_schema("b")
    b1 = batch(1, [log.transaction([("insert", a, None, {"id": 1, "name": "x", "qty": 1})])])
    b2 = batch(2, [log.transaction([("insert", a, None, {"id": 2, "name": "y", "qty": 1})]),
                   log.transaction([("insert", b, None, {"id": 1, "name": "z", "qty": 1})])])
    return b1, b2


def test_iceberg_resumes_a_batch_cut_short_without_doubling_rows(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: Any) -> None:
    b1, b2 = _a_then_a_and_b()
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(b1)
    from changestream.sinks.spark.iceberg import landing as iceberg

    real = iceberg.IcebergLanding.land_mirror

    def flaky(self: Any, s: Any, run: Any) -> int:
        if run.table == "b":
            raise RuntimeError("killed")
        return real(self, s, run)

    monkeypatch.setattr(iceberg.IcebergLanding, "land_mirror", flaky)
    with pytest.raises(Exception, match="killed"):
        sink.write(b2)
    monkeypatch.undo()

    restarted = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    assert restarted.open() == b1.position  # batch 2 never finished
    restarted.write(b2)
    assert [r["id"] for r in mirror(spark, catalog, "a")] == [1, 2]
    assert [r["id"] for r in mirror(spark, catalog, "b")] == [1]
    assert spark.table(f"{catalog}.shop.a__changelog").count() == 2
    assert spark.table(f"{catalog}.shop.b__changelog").count() == 1


@pytest.mark.parametrize("table", ["a__changelog`", ".`a`"], ids=["changelog", "mirror"])
def test_iceberg_a_commit_whose_reply_is_lost_is_not_made_again_by_the_retry(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: Any, table: str) -> None:
    """A commit the catalog made but whose reply never came back (a network error, a commit
    state the catalog could not tell): the writer's retry of the batch, on the same sink,
    reads what each table holds again instead of trusting what it knew, so the batch lands
    once."""
    b1, b2 = _a_then_a_and_b()
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(b1)
    from changestream.sinks.spark.iceberg.files import ArrowAppender

    lost = []

    def reply_lost(real: Any) -> Any:
        def prepare(self: Any, name: str, *args: Any) -> Any:
            made = real(self, name, *args)

            def commit(written: Any) -> Any:
                done = made.commit(written)
                if name.endswith(table) and not lost:
                    lost.append(name)
                    raise RuntimeError("Error while sending or receiving")  # after the commit
                return done
            return None if made is None else StagedCommit(made.write, commit)
        return prepare

    for method in ("prepare_row_delta", "prepare_position_delta"):
        monkeypatch.setattr(ArrowAppender, method, reply_lost(getattr(ArrowAppender, method)))
    with pytest.raises(Exception, match="receiving"):
        sink.write(b2)
    sink.write(b2)  # the writer actor's retry
    assert lost
    assert spark.table(f"{catalog}.shop.a__changelog").count() == 2
    assert spark.table(f"{catalog}.shop.b__changelog").count() == 1
    assert [r["id"] for r in mirror(spark, catalog, "a")] == [1, 2]
    assert [r["id"] for r in mirror(spark, catalog, "b")] == [1]


def test_iceberg_a_mirror_commit_refused_after_another_writer_s_is_planned_again(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: Any, caplog: Any) -> None:
    """Another writer deletes from the mirror's data file after the batch was planned on
    the key index, while the batch's commit waits in the queue: Iceberg refuses the
    commit, and the batch is planned again on the mirror as it now is and landed, the
    tables after it in the batch too."""
    log = Binlog()
    a, b = simple_schema("a"), simple_schema("b")
    rows = [{"id": i, "name": "x", "qty": 1} for i in (1, 2, 3)]
    b1 = batch(1, [log.transaction([("insert", a, None, r) for r in rows])])
    b2 = batch(2, [log.transaction([("delete", a, rows[0], None)]),
                   log.transaction([("update", a, rows[2], {**rows[2], "qty": 9})])])
    b3 = batch(3, [log.transaction([("update", a, {**rows[2], "qty": 9},
                                     {**rows[2], "qty": 10})]),
                   log.transaction([("insert", b, None, {"id": 7, "name": "z", "qty": 1})])])
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(b1)
    sink.write(b2)  # the mirror's key index is built
    from changestream.sinks.spark.iceberg.files import ArrowAppender

    real = ArrowAppender.prepare_position_delta
    interfered: list[str] = []

    def prepare(self: Any, name: str, *args: Any) -> Any:
        made = real(self, name, *args)

        def commit(written: Any) -> Any:
            if not interfered:
                interfered.append(name)
                spark.sql(f"DELETE FROM {catalog}.shop.a WHERE id = 2")  # another writer
            return made.commit(written)
        return None if made is None else StagedCommit(made.write, commit)

    monkeypatch.setattr(ArrowAppender, "prepare_position_delta", prepare)
    with caplog.at_level("INFO", logger="changestream.sinks.spark"):
        sink.write(b3)
    assert interfered
    assert "changed under the router" in caplog.text
    assert [(r["id"], r["qty"]) for r in mirror(spark, catalog, "a")] == [(3, 10)]
    assert [r["id"] for r in mirror(spark, catalog, "b")] == [7]
    assert spark.table(f"{catalog}.shop.a__changelog").count() == 6


def test_iceberg_a_batch_cut_between_its_merge_and_its_append_lands_once(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: Any) -> None:
    """Where the mirror is written by Spark (arrow_appends=false), a batch with old keys
    (merged) and new ones (appended) commits the mirror twice; only the second commit
    carries the position: killed between them, the batch lands again whole and the mirror
    still holds each key once. (Files written by the driver land a batch in one row delta.)"""
    log = Binlog()
    t = simple_schema("orders")
    b1 = batch(1, [log.transaction([("insert", t, None, {"id": 1, "name": "a", "qty": 1})])])
    b2 = batch(2, [log.transaction([
        ("update", t, {"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "a", "qty": 2}),
        ("insert", t, None, {"id": 2, "name": "b", "qty": 1})])])
    options = WRITERS["spark"] | {"append_new_keys": "true"}  # where the split is used
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog, **options)
    sink.open()
    sink.write(b1)
    from changestream.sinks.spark.iceberg.tables import IcebergTables

    real = IcebergTables.spark_append

    def killed(self: Any, s: Any, name: str, df: Any, last: Any) -> None:
        if "changelog" not in name:
            raise RuntimeError("killed")
        real(self, s, name, df, last)

    monkeypatch.setattr(IcebergTables, "spark_append", killed)
    with pytest.raises(Exception, match="killed"):
        sink.write(b2)
    monkeypatch.undo()
    assert mirror(spark, catalog, "orders") == [{"id": 1, "name": "a", "qty": 2}]  # merged

    restarted = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog,
                          **options)
    assert restarted.open() == b1.position
    restarted.write(b2)
    assert mirror(spark, catalog, "orders") == [{"id": 1, "name": "a", "qty": 2},
                                                {"id": 2, "name": "b", "qty": 1}]
    assert spark.table(f"{catalog}.shop.orders__changelog").count() == 3


@pytest.mark.parametrize("writer", WRITERS)
def test_iceberg_evolves_tables_on_add_drop_and_rename_column(
        spark: Any, tmp_path: Any, catalog: str, writer: str) -> None:
    log = Binlog()
    v1 = simple_schema("orders", ("id", "name", "qty"))
    v2 = simple_schema("orders", ("id", "name", "qty", "amount"))
    v3 = simple_schema("orders", ("id", "title", "qty", "amount"))
    v4 = simple_schema("orders", ("id", "title", "amount"))
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog,
                     **WRITERS[writer])
    sink.open()
    sink.write(batch(1, [log.transaction([("insert", v1, None,
                                           {"id": 1, "name": "a", "qty": 5})])]))
    sink.write(batch(2, [
        log.ddl("ALTER TABLE orders ADD COLUMN amount DECIMAL(8,2)", "orders"),
        log.transaction([("insert", v2, None, {"id": 2, "name": "b", "qty": 6,
                                               "amount": Decimal("2.50")})]),
        log.ddl("ALTER TABLE orders RENAME COLUMN name TO title", "orders"),
        log.transaction([("update", v3, {"id": 1, "title": "a", "qty": 5, "amount": None},
                          {"id": 1, "title": "A", "qty": 5, "amount": Decimal("1.25")})])]))
    sink.write(batch(3, [
        log.ddl("ALTER TABLE orders DROP COLUMN qty", "orders"),
        log.transaction([("insert", v4, None, {"id": 3, "title": "c",
                                               "amount": Decimal("3.75")})])]))
    assert mirror(spark, catalog, "orders") == [
        {"id": 1, "title": "A", "amount": Decimal("1.25")},
        {"id": 2, "title": "b", "amount": Decimal("2.50")},
        {"id": 3, "title": "c", "amount": Decimal("3.75")}]
    changelog = spark.sql("SELECT id, title, qty, amount FROM "
                          f"{catalog}.shop.orders__changelog ORDER BY _binlog_pos").collect()
    # The changelog keeps the dropped column (NULL from then on); the rename is carried
    # back to rows landed before it.
    assert [tuple(r) for r in changelog] == [(1, "a", 5, None), (2, "b", 6, Decimal("2.50")),
                                             (1, "A", 5, Decimal("1.25")),
                                             (3, "c", None, Decimal("3.75"))]


def test_iceberg_mirrors_a_table_without_primary_key_by_whole_rows(
        spark: Any, tmp_path: Any, catalog: str) -> None:
    log = Binlog()
    t = simple_schema("events", ("id", "name", "qty"), pk=False)
    r = [{"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "a", "qty": 1},
         {"id": 2, "name": "b", "qty": 2}, {"id": 3, "name": "c", "qty": 3}]
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(batch(1, [log.transaction([("insert", t, None, x) for x in r])]))
    assert len(mirror(spark, catalog, "events")) == 4  # duplicates kept
    sink.write(batch(2, [log.transaction([
        ("update", t, r[2], {"id": 2, "name": "b", "qty": 20}),
        ("delete", t, r[3], None),
        ("insert", t, None, {"id": 4, "name": None, "qty": 4}),
        ("delete", t, {"id": 4, "name": None, "qty": 4}, None),
        ("insert", t, None, {"id": 5, "name": None, "qty": 5})])]))
    got = mirror(spark, catalog, "events", "id, qty")
    assert [(x["id"], x["name"], x["qty"]) for x in got] == [
        (1, "a", 1), (1, "a", 1), (2, "b", 20), (5, None, 5)]
    sink.write(batch(3, [log.transaction([("delete", t, {"id": 5, "name": None, "qty": 5},
                                           None)])]))  # NULLs match NULLs
    assert [x["id"] for x in mirror(spark, catalog, "events", "id")] == [1, 1, 2]


# -- throughput ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["parquet", "iceberg"])
def test_throughput_of_a_batch_of_every_type(spark: Any, tmp_path: Any, mode: str,
                                             catalog: str, capsys: Any) -> None:
    log = Binlog()
    schema = all_types_schema()
    n = 20_000
    parts = [log.transaction([("insert", schema, None, all_types_row(i))
                              for i in range(j, j + 100)]) for j in range(0, n, 100)]
    options = {"path": tmp_path} if mode == "parquet" else {"warehouse": tmp_path,
                                                            "catalog": catalog}
    sink = SparkSink(mode, spark=spark, **options)
    sink.open()
    seconds = []
    for k in range(3):
        started = time.perf_counter()
        sink.write(batch(k + 1, parts[k * len(parts) // 3:(k + 1) * len(parts) // 3]))
        seconds.append(time.perf_counter() - started)
    rows = spark.read.parquet(str(tmp_path / "shop" / "items")).count() if mode == "parquet" \
        else spark.table(f"{catalog}.shop.items").count()
    assert rows == n
    with capsys.disabled():
        print(f"\n{mode}: {n} rows of 28 columns in 3 batches: "
              f"{', '.join(f'{s:.2f}s' for s in seconds)}; {n / sum(seconds):,.0f} rows/s")


@pytest.mark.parametrize("kind", ["hadoop", "jdbc"])
def test_iceberg_mirrors_follow_truncate_rename_and_drop_exactly_once(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: Any, kind: str) -> None:
    """TRUNCATE empties the mirror, a gh-ost cut-over (RENAME pair, DROP) leaves the mirror
    and changelog under the table's name, DROP TABLE/DATABASE drop mirrors and mark the
    changelogs; a keyless DELETE of one of equal rows removes one. A batch cut short after
    its DDL, landed again, gives the same tables. A Hadoop catalog copies a renamed table;
    a JDBC catalog (on SQLite here) renames it, its snapshots kept."""
    options: Any = catalog if kind == "hadoop" else {
        "name": catalog, "type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}"}
    log = Binlog()
    orders, ghost = simple_schema("orders"), simple_schema("_orders_gho")
    events = simple_schema("events", pk=False)
    other = TableSchema("other", "t", simple_schema("t").columns, primary_key=(0,),
                        names_logged=True)
    same = {"id": 9, "name": "same", "qty": 1}
    first = [log.transaction([("insert", orders, None, {"id": i, "name": "o", "qty": i})
                              for i in (1, 2)]
                             + [("insert", events, None, same)] * 3
                             + [("insert", other, None, {"id": 1, "name": "x", "qty": 1})])]
    second = [
        log.ddl("TRUNCATE TABLE orders", "orders"),
        log.transaction([("insert", orders, None, {"id": 3, "name": "after", "qty": 3})]),
        log.transaction([("insert", ghost, None, {"id": i, "name": "g", "qty": i})
                         for i in (3, 4)]),
        log.ddl("RENAME TABLE orders TO _orders_del, _orders_gho TO orders", "orders"),
        log.ddl("DROP TABLE _orders_del /* generated by server */", "_orders_del"),
        log.transaction([("delete", events, same, None)]),
        log.ddl("DROP DATABASE other", None),  # type: ignore[arg-type]
        log.transaction([("insert", orders, None, {"id": 5, "name": "new", "qty": 5})]),
    ]
    second[6].changes[0].database = "other"
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=options)
    sink.open()
    sink.write(batch(1, first))
    # The first try of the second batch dies after landing everything but its commit.
    from changestream.sinks.spark.iceberg import IcebergLanding

    def crash(*args: Any) -> None:
        raise RuntimeError("killed before the batch's commit")

    monkeypatch.setattr(IcebergLanding, "commit_batch", crash)
    with pytest.raises(Exception, match="killed"):
        sink.write(batch(2, second))
    monkeypatch.undo()
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=options)
    sink.open()
    sink.write(batch(2, second))
    history = spark.sql(f"SELECT count(*) FROM {catalog}.shop.orders.snapshots").collect()
    # the ghost table's two commits (its inserts, then the new row) or the copy's two
    assert history[0][0] == 2

    assert [(r["id"], r["name"]) for r in mirror(spark, catalog, "orders")] == [
        (3, "g"), (4, "g"), (5, "new")]
    assert [tuple(r.values())[:3] for r in mirror(spark, catalog, "events")] == [
        (9, "same", 1), (9, "same", 1)]
    tables = {r["tableName"] for r in spark.sql(f"SHOW TABLES IN {catalog}.shop").collect()}
    assert tables == {"orders", "orders__changelog", "events", "events__changelog",
                      "_orders_del__changelog"}
    assert not spark.catalog.tableExists(f"{catalog}.other.t")
    marks = [(r["_op"], r["id"]) for r in spark.sql(
        f"SELECT _op, id FROM {catalog}.shop._orders_del__changelog "
        "ORDER BY _binlog_file, _binlog_pos, _seq").collect()]
    assert marks == [("insert", 1), ("insert", 2), ("truncate", None), ("insert", 3),
                     ("drop", None)]
    assert [r["_op"] for r in spark.sql(
        f"SELECT _op FROM {catalog}.other.t__changelog ORDER BY _binlog_pos").collect()] == [
        "insert", "drop"]
    assert [(r["_op"], r["id"]) for r in spark.sql(
        f"SELECT _op, id FROM {catalog}.shop.orders__changelog "
        "ORDER BY _binlog_pos, _seq").collect()] == [("insert", 3), ("insert", 4),
                                                       ("insert", 5)]


@pytest.mark.parametrize("arrow_workers", [False, True], ids=["parts", "arrow-workers"])
def test_iceberg_keyless_changes_that_cancel_out_after_the_table_has_rows(
        spark: Any, tmp_path: Any, catalog: str, arrow_workers: bool) -> None:
    # A DELETE ... LIMIT 1 of one of two equal rows, then the same row inserted again, once
    # stopped every batch that held it ("array_take has no kernel matching (int32, null)").
    log = Binlog()
    n = simple_schema("n", ("id", "name"), pk=False)
    dup, one = {"id": 0, "name": "dup"}, {"id": 1, "name": "one"}

    def parts(transactions: list[list[tuple[str, Any, Any]]]) -> list[Any]:
        made = [log.transaction([(op, n, b, a) for op, b, a in t]) for t in transactions]
        if not arrow_workers:
            return made
        records = encode_runs(table_runs(made, all_before=True))
        return [EncodedRun(records, sum(len(p.changes) for p in made), len(made), None,
                           made[-1].position)]

    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(batch(1, parts([[("insert", None, dup), ("insert", None, dup),
                                ("insert", None, one)]])))
    second = batch(2, parts([[("delete", dup, None)], [("insert", None, dup)]]))
    sink.write(second)
    assert sorted((x["id"], x["name"]) for x in mirror(spark, catalog, "n", "id")) == [
        (0, "dup"), (0, "dup"), (1, "one")]
    reopened = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    assert reopened.open() == second.position
    sink.write(batch(3, parts([[("update", one, {"id": 1, "name": "uno"})],
                               [("update", {"id": 1, "name": "uno"}, one)],
                               [("delete", one, None)]])))
    assert sorted((x["id"], x["name"]) for x in mirror(spark, catalog, "n", "id")) == [
        (0, "dup"), (0, "dup")]


def test_iceberg_mirror_keeps_the_columns_an_update_image_leaves_out(
        spark: Any, tmp_path: Any, catalog: str) -> None:
    # MariaDB 11.8 logs no generated column in update images, FULL ones included; MINIMAL
    # images leave out every column the statement did not set. The mirror keeps their values.
    log = Binlog()
    t = simple_schema("orders", ("id", "name", "qty"))
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    rows = [{"id": i, "name": f"n{i}", "qty": i * 10} for i in range(1, 5)]
    sink.write(batch(1, [log.transaction([("insert", t, None, r) for r in rows])]))
    sink.write(batch(2, [log.transaction([
        ("update", t, {"id": 1}, {"id": 1, "name": "one"}),  # qty from the mirror
        ("update", t, {"id": 2}, {"id": 20, "qty": 7}),  # a key move: name from key 2's row
        ("insert", t, None, {"id": 5, "name": "n5", "qty": 50}),
        ("update", t, {"id": 5}, {"id": 5, "qty": 51}),  # name from the insert above
        ("update", t, {"id": 3}, {"id": 30}),  # moved, then updated again in the batch
        ("update", t, {"id": 30}, {"id": 30, "qty": 31}),
    ])]))
    got = [(r["id"], r["name"], r["qty"]) for r in mirror(spark, catalog, "orders")]
    assert got == [(1, "one", 10), (4, "n4", 40), (5, "n5", 51), (20, "n2", 7),
                   (30, "n3", 31)]


def test_iceberg_keyless_mirror_refuses_update_images_without_every_column(
        spark: Any, tmp_path: Any, catalog: str) -> None:
    log = Binlog()
    t = simple_schema("events", ("id", "name"), pk=False)
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(batch(1, [log.transaction([("insert", t, None, {"id": 1, "name": "a"})])]))
    with pytest.raises(SinkError, match="without every column"):
        sink.write(batch(2, [log.transaction([("update", t, {"id": 1}, {"id": 2})])]))


def test_iceberg_mirror_reads_no_rows_for_columns_the_filter_excludes(
        spark: Any, tmp_path: Any, catalog: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # An excluded column is left out of inserts too: it is not looked for in the mirror.
    from changestream.sinks.spark.iceberg import mirror_images

    def no_read(*args: Any) -> Any:
        raise AssertionError("the mirror was read for an excluded column")
    monkeypatch.setattr(mirror_images, "_mirror_rows", no_read)
    log = Binlog()
    t = simple_schema("orders", ("id", "name", "qty"))
    sink = SparkSink("iceberg", warehouse=tmp_path, spark=spark, catalog=catalog)
    sink.open()
    sink.write(batch(1, [log.transaction([("insert", t, None, {"id": 1, "qty": 1})])]))
    sink.write(batch(2, [log.transaction([("update", t, {"id": 1, "qty": 1},
                                           {"id": 1, "qty": 2})])]))
    assert [(r["id"], r["name"], r["qty"]) for r in mirror(spark, catalog, "orders")] == [
        (1, None, 2)]


@pytest.mark.parametrize("mode", ["parquet", "iceberg"])
def test_a_batch_that_ends_inside_a_transaction_lands_its_first_parts_with_the_rest(
        spark: Any, tmp_path: Any, catalog: str, mode: str) -> None:
    """A big transaction comes in parts; a batch can hold a whole transaction and the first
    part of the next one: such a batch has no position (given one, the sink refuses it).
    Those first rows land with the rest of their transaction in the next batch, not never
    (they were dropped: taken for landed once the rest had)."""
    log = Binlog()
    schema, other = simple_schema("items"), simple_schema("other")
    first = log.transaction([("insert", other, None, {"id": 1, "name": "a", "qty": 1})])
    big = log.transaction([("insert", schema, None, {"id": i, "name": "b", "qty": i})
                           for i in range(10, 16)] +
                          [("delete", other, {"id": 1, "name": "a", "qty": 1}, None)])
    head = TransactionPart(big.info, big.changes[:4], False, None)
    rest = TransactionPart(big.info, big.changes[4:], True, big.position)
    options = {"path": str(tmp_path)} if mode == "parquet" else {
        "warehouse": str(tmp_path), "catalog": catalog}
    sink = make_sink(f"spark:{mode}", spark=spark, **options)
    sink.open()
    with pytest.raises(SinkError, match="batch 1 ends inside a transaction"):
        sink.write(Batch(1, [first, head], first.position))  # against Batch's contract
    sink.write(Batch(1, [first, head], None))  # as the Sink actor cuts it
    sink.write(Batch(2, [rest], big.position))
    sink.close()
    if mode == "parquet":
        items = spark.read.parquet(str(tmp_path / "shop" / "items"))
        others = spark.read.parquet(str(tmp_path / "shop" / "other"))
    else:
        items = spark.table(f"{catalog}.shop.items__changelog")
        others = spark.table(f"{catalog}.shop.other__changelog")
        assert [r["id"] for r in mirror(spark, catalog, "items")] == list(range(10, 16))
        assert mirror(spark, catalog, "other") == []
    assert sorted((r["_op"], r["id"]) for r in items.collect()) == [
        ("insert", i) for i in range(10, 16)]
    assert sorted((r["_op"], r["id"]) for r in others.collect()) == [
        ("delete", 1), ("insert", 1)]
