"""The key index of a mirror: live rows by key, and a keyless mirror's rows by the hash of
the whole row, copies apart (pure Arrow: no Spark)."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

from changestream.sinks.spark.iceberg.key_index import (  # noqa: E402
    COPIES,
    ROW_HASH,
    ROW_HASH_SCHEMA,
    KeyIndex,
    row_hashes,
)

ROW = pa.schema([pa.field("v", pa.int64()), pa.field("w", pa.string()),
                 pa.field("d", pa.decimal128(10, 2)),
                 pa.field("at", pa.timestamp("us", tz="UTC"))])
AT = datetime.datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=datetime.UTC)


def rows(*values: tuple) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ROW.names, v)) for v in values], schema=ROW)


def test_row_hashes_are_equal_for_equal_rows_however_typed_and_tell_nulls_apart() -> None:
    one = row_hashes(rows((1, "a", decimal.Decimal("1.50"), AT)), ROW)
    # the batch's own types: int32, a decimal of another scale, a column left out
    other = pa.table({"v": pa.array([1, 1, None], pa.int32()),
                      "w": ["a", "a", "a"],
                      "d": pa.array([decimal.Decimal("1.5")] * 3, pa.decimal128(12, 1)),
                      "at": pa.array([AT, None, AT], pa.timestamp("us", tz="UTC"))})
    hashes = row_hashes(other, ROW).column(ROW_HASH).to_pylist()
    assert hashes[0] == one.column(ROW_HASH)[0].as_py()
    assert len(set(hashes)) == 3  # a NULL is not any value, nor another column's NULL
    absent = row_hashes(other.drop_columns(["at"]), ROW).column(ROW_HASH).to_pylist()
    assert absent[1] == hashes[1]  # a column the rows lack is NULL


def test_row_hashes_tell_apart_values_that_run_together_and_empty_text_from_null() -> None:
    schema = pa.schema([pa.field("a", pa.string()), pa.field("b", pa.string())])
    table = pa.table({"a": ["x:1", "x", "", None, "1:x", "2:x"],
                      "b": ["y", ":1y", None, "", "y", None]}, schema=schema)
    hashes = row_hashes(table, schema).column(ROW_HASH).to_pylist()
    assert len(set(hashes)) == len(hashes)


def test_row_hashes_of_a_list_column_are_equal_for_equal_rows() -> None:
    schema = pa.schema([pa.field("v", pa.int64()), pa.field("l", pa.list_(pa.int32()))])
    table = pa.table({"v": [1, 1, 1, None], "l": [[1, 2], [1, 2], [2, 1], [1, 2]]},
                     schema=schema)
    hashes = row_hashes(table, schema).column(ROW_HASH).to_pylist()
    assert hashes[0] == hashes[1]
    assert len({hashes[0], hashes[2], hashes[3]}) == 3


def _index_of(files: dict[str, pa.Table]) -> KeyIndex:
    index = KeyIndex(ROW_HASH_SCHEMA, 7)
    for location, table in files.items():
        index.add_file(location, row_hashes(table, ROW))
    return index


def _wanted(table: pa.Table, copies: list[int]) -> pa.Table:
    return row_hashes(table, ROW).append_column(COPIES, pa.array(copies, pa.int64()))


def test_locate_copies_takes_as_many_copies_as_asked_across_files() -> None:
    dup, one = (0, "dup", None, None), (1, "one", decimal.Decimal("2.00"), AT)
    index = _index_of({"f1": rows(dup, one, dup), "f2": rows(dup, dup)})
    assert index.rows == 5
    located, short = index.locate_copies(_wanted(rows(dup, one), [3, 1]))
    assert short == 0
    got = list(zip(located.column("file_path").to_pylist(), located.column("pos").to_pylist()))
    assert got == sorted(got) and len(got) == 4
    assert ("f1", 1) in got  # the one copy of ``one``
    assert sum(1 for f, p in got if (f, p) != ("f1", 1)) == 3  # three of the four dups
    index.remove(located)
    assert index.rows == 1
    # more than the mirror holds: what there is, and how many were short
    located, short = index.locate_copies(_wanted(rows(dup, one), [2, 1]))
    assert located.num_rows == 1 and short == 2
    assert index.locate_copies(_wanted(rows(one), [0]))[0].num_rows == 0


def test_locate_copies_of_an_empty_index_finds_nothing() -> None:
    index = KeyIndex(ROW_HASH_SCHEMA, -1)
    located, short = index.locate_copies(_wanted(rows((0, "x", None, None)), [2]))
    assert located.num_rows == 0 and short == 2


# SipHash-2-4's 128-bit tags of the messages 00, 00 01, ... under the key 00 01 .. 0f: the
# reference implementation's vectors_sip128 (veorq/SipHash, vectors.h), lengths 0-10, 63.
SIP128 = {0: "a3817f04ba25a8e66df67214c7550293", 1: "da87c1d86b99af44347659119b22fc45",
          2: "8177228da4a45dc7fca38bdef60affe4", 3: "9c70b60c5267a94e5f33b6b02985ed51",
          4: "f88164c12d9c8faf7d0f6e7c7bcd5579", 5: "1368875980776f8854527a07690e9627",
          6: "14eeca338b208613485ea0308fd7a15e", 7: "a1f1ebbed8dbc153c0b84aa61ff08239",
          8: "3b62a9ba6258f5610f83e264f31497b4", 9: "264499060ad9baabc47f8b02bb6d71ed"}


def _compiled_row_hash() -> Any:
    from changestream.native import compiled

    native = compiled("changestream.sinks.spark._row_hash")
    if native is None:
        pytest.skip("the compiled row hash is not built")
    return native


def test_the_compiled_row_hash_is_siphash_2_4_128_as_its_reference_gives_it() -> None:
    native = _compiled_row_hash()
    key = bytes(range(16))
    for length, tag in SIP128.items():
        assert native.siphash128(bytes(range(length)), key).hex() == tag, length
    values = pa.array([bytes(range(length)) for length in SIP128], pa.binary())
    assert [v.hex() for v in native.value_hashes(values, key).to_pylist()] == \
        list(SIP128.values())


def test_the_compiled_row_hash_reads_slices_and_chunks_where_they_lie() -> None:
    native = _compiled_row_hash()
    key = bytes(range(16, 32))
    texts = [f"row {i}".encode() * (i % 5) for i in range(40)]
    whole = pa.array(texts, pa.binary())
    expected = [native.siphash128(t, key) for t in texts]
    chunked = pa.chunked_array([whole.slice(0, 7), whole.slice(7, 0), whole.slice(7)])
    assert native.value_hashes(chunked, key).to_pylist() == expected
    assert native.value_hashes(whole.slice(11, 9), key).to_pylist() == expected[11:20]
    assert native.value_hashes(pa.array([], pa.binary()), key).to_pylist() == []
    with pytest.raises(ValueError, match="NULL"):
        native.value_hashes(pa.array([b"a", None], pa.binary()), key)
    with pytest.raises(TypeError, match="binary"):
        native.value_hashes(pa.array(["a"], pa.string()), key)


def test_row_hashes_are_the_same_rows_equal_with_the_compiled_hash_and_without(
        monkeypatch: Any) -> None:
    from changestream.sinks.spark.iceberg import key_index

    table = pa.concat_tables([rows((1, "a", decimal.Decimal("1.50"), AT)),
                              rows((2, None, None, None)),
                              rows((1, "a", decimal.Decimal("1.5"), AT))])
    compiled_hashes = row_hashes(table, ROW).column(ROW_HASH).to_pylist()
    monkeypatch.setattr(key_index, "_compiled_hash", lambda: None)
    python_hashes = row_hashes(table, ROW).column(ROW_HASH).to_pylist()
    for hashes in (compiled_hashes, python_hashes):
        assert hashes[0] == hashes[2] != hashes[1]
        assert all(len(h) == 16 for h in hashes)


def test_locate_finds_the_same_rows_whether_or_not_it_counts_the_keys_not_found() -> None:
    """The count of keys not found groups every key twice; a batch that cannot use it (a
    snapshot's rows) locates without it."""
    key = pa.schema([pa.field("id", pa.int64())])
    index = KeyIndex(key, 7)
    assert index.locate(pa.table({"id": [1, 2]}), count_missing=False)[1] == 0
    assert index.locate(pa.table({"id": [1, 2, 2]}))[1] == 2  # an empty index: all
    index.add_file("a.parquet", pa.table({"id": pa.array([5, 1, 3], pa.int32())}))
    index.add_file("b.parquet", pa.table({"id": pa.array([7, 2], pa.int64())}))
    wanted = pa.table({"id": pa.array([2, 3, 9, 3, 10], pa.int64())})
    counted, missing = index.locate(wanted)
    uncounted, none = index.locate(wanted, count_missing=False)
    assert counted.equals(uncounted)
    assert list(zip(counted.column("file_path").to_pylist(),
                    counted.column("pos").to_pylist())) == [("a.parquet", 2), ("b.parquet", 1)]
    assert (missing, none) == (2, 0)


@pytest.mark.parametrize("kind", ["integers", "text", "timestamps", "decimals", "two columns"])
def test_locate_looks_only_in_files_whose_key_range_can_hold_the_keys(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's least and greatest first key value rule it out for keys beyond them: the
    rows found are those a look in every file finds, files of growing keys (a snapshot's
    chunks) are skipped, and NULLs or a type without such an order look everywhere."""
    import random

    from changestream.sinks.spark.iceberg import key_index

    rng = random.Random(kind)

    def value(i: int) -> Any:
        return {"integers": i, "text": f"k{i:05d}é", "decimals": decimal.Decimal(i) / 100,
                "timestamps": AT + datetime.timedelta(seconds=i), "two columns": i // 3}[kind]

    types = {"integers": pa.int64(), "text": pa.string(), "decimals": pa.decimal128(12, 2),
             "timestamps": pa.timestamp("us", tz="UTC"), "two columns": pa.int32()}
    schema = pa.schema([pa.field("a", types[kind])]
                       + ([pa.field("b", pa.string())] if kind == "two columns" else []))

    def table(numbers: list[int]) -> pa.Table:
        columns = [pa.array([value(i) for i in numbers], types[kind])]
        if kind == "two columns":
            columns.append(pa.array([str(i % 3) for i in numbers]))
        return pa.Table.from_arrays(columns, schema=schema)

    anywhere = [[*rng.sample(range(1000, 2000), 50), f * 3] for f in range(2)]

    def index() -> KeyIndex:
        built = KeyIndex(schema, 1)
        for f in range(6):  # growing ranges, then two files of keys from anywhere
            built.add_file(f"grow{f}", table(list(range(f * 100, f * 100 + 100))))
        for f, numbers in enumerate(anywhere):
            built.add_file(f"any{f}", table(numbers))
        return built

    ranged = index()
    asks = [list(range(250, 330)), list(range(590, 620)), [5, 1500, 1999, 3000],
            list(range(700, 800)), rng.sample(range(0, 2000), 300)]
    for numbers in asks:
        wanted = table(numbers)
        got = ranged.locate(wanted)
        with monkeypatch.context() as patched:
            patched.setattr(key_index, "value_range", lambda values: None)
            everywhere = index().locate(wanted)
        assert got[0].equals(everywhere[0]) and got[1] == everywhere[1], numbers
    looked: list[int] = []
    concat = pa.concat_tables

    def counted(tables: list[pa.Table], *args: Any, **kwargs: Any) -> pa.Table:
        looked.append(sum(t.num_rows for t in tables))  # the files' keys joined
        return concat(tables, *args, **kwargs)

    monkeypatch.setattr(pa, "concat_tables", counted)
    ranged.locate(table(list(range(250, 330))))  # two growing files, and those of any key
    assert looked == [200 + 102]
    ranged.locate(table(list(range(2100, 2200))))  # beyond every file: no join
    assert looked == [302]
    with_null = pa.Table.from_arrays(
        [pa.array([None, value(5)], types[kind]), *table([5, 5]).columns[1:]], schema=schema)
    assert ranged.locate(with_null)[0].num_rows == 1
