"""Values as the server holds them, in change records, on MariaDB and MySQL, through the
router's own process and through the decode workers: character sets after a GEOMETRY
column, FLOAT, temporal precision, JSON null, and the record fields of every row image
(FULL, MINIMAL, NOBLOB)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter

pytestmark = pytest.mark.integration

WORKERS = pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])


def _records(server: Any, db: str, start: tuple[str, int], out: Path,
             workers: int) -> list[dict[str, Any]]:
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[db]),
                          decode_workers=workers,
                          decode_workers_wait=True), JsonLinesSink(out)).run()
    return [r for r in map(orjson.loads, out.read_bytes().splitlines()) if r["op"] != "ddl"]


@WORKERS
def test_text_after_a_geometry_column_keeps_its_own_charset(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, g GEOMETRY, t TEXT, "
        "l VARCHAR(10) CHARACTER SET latin1, u VARCHAR(10) CHARACTER SET utf8mb4, "
        "g2 POINT, j JSON, c CHAR(3) CHARACTER SET latin1)",
        f"INSERT INTO `{db}`.t VALUES (1, ST_GeomFromText('POINT(1 2)'), 'txt', 'é', 'ü', "
        "ST_GeomFromText('POINT(3 4)'), '{\"k\": \"ß\"}', 'àé')",
    ])
    (record,) = _records(server, db, start, tmp_path / "out.jsonl", workers)
    after = record["after"]
    assert (after["t"], after["l"], after["u"], after["c"]) == ("txt", "é", "ü", "àé")
    # MariaDB's JSON is LONGTEXT: its text; MySQL's is binary JSON: the document.
    assert after["j"] in ('{"k": "ß"}', {"k": "ß"})


@WORKERS
def test_float_is_the_shortest_decimal_that_reads_back_as_its_4_byte_value(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    values = ["5.6", "0.1", "-123456.79", "3.40282e38", "1.5", "16777216", "1e-30"]
    server.execute([f"CREATE TABLE `{db}`.f (id INT PRIMARY KEY, f FLOAT, d DOUBLE)"] + [
        f"INSERT INTO `{db}`.f VALUES ({i}, {v}, {v})" for i, v in enumerate(values)])
    printed = [row[0] for row in server.execute(f"SELECT CAST(f AS CHAR) FROM `{db}`.f "
                                                "ORDER BY id")]
    records = _records(server, db, start, tmp_path / "out.jsonl", workers)
    got = [r["after"]["f"] for r in records]
    assert got == [float(v) for v in values]
    # The servers print FLOAT with 6 significant digits: the same where that reads back as
    # the stored value, else rounded (-123457 for -123456.79, 16777200 for 16777216).
    assert [f"{g:.6g}" for g in got] == [f"{float(p):.6g}" for p in printed]
    assert got[:2] == [float(p) for p in printed[:2]] and got[4] == float(printed[4])
    assert [r["after"]["d"] for r in records] == [float(v) for v in values]


_SHAPES = {
    "d0": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d",
    "d3": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}",
    "d6": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}",
    "t0": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00",
    "t2": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{2}\+00:00",
    "tm0": r"-?\d\d+:\d\d:\d\d",
    "tm1": r"-?\d\d+:\d\d:\d\d\.\d",
    "tm6": r"-?\d\d+:\d\d:\d\d\.\d{6}",
}


@WORKERS
def test_every_temporal_value_of_a_column_is_written_with_the_column_precision(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([
        "SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'",
        f"CREATE TABLE `{db}`.tt (id INT PRIMARY KEY, d0 DATETIME, d3 DATETIME(3), "
        "d6 DATETIME(6), t0 TIMESTAMP NULL, t2 TIMESTAMP(2) NULL, tm0 TIME, tm1 TIME(1), "
        "tm6 TIME(6))",
        f"INSERT INTO `{db}`.tt VALUES (1, '2024-02-29 23:59:59', '2024-02-29 23:59:59.125', "
        "'2024-02-29 23:59:59.000001', '2024-01-01 00:00:01', '2024-01-01 00:00:01.5', "
        "'-838:59:59', '12:00:00.5', '00:00:00.000001')",
        # Zero dates, as the server keeps them: the same pattern, zero fields.
        f"INSERT INTO `{db}`.tt VALUES (2, '0000-00-00 00:00:00', '0000-00-00 00:00:00', "
        "'0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '00:00:00', "
        "'00:00:00', '00:00:00')",
        f"INSERT INTO `{db}`.tt VALUES (3, '2024-01-01', '2024-01-01', '2024-01-01', "
        "'2024-01-01', '2024-01-01', '-00:00:01', '-00:00:00.1', '838:59:59')",
    ])
    records = _records(server, db, start, tmp_path / "out.jsonl", workers)
    assert len(records) == 3
    for column, shape in _SHAPES.items():
        for r in records:
            assert re.fullmatch(shape, r["after"][column]), (column, r["after"][column])
    first, zero, third = (r["after"] for r in records)
    assert first == {"id": 1, "d0": "2024-02-29T23:59:59", "d3": "2024-02-29T23:59:59.125",
                     "d6": "2024-02-29T23:59:59.000001", "t0": "2024-01-01T00:00:01+00:00",
                     "t2": "2024-01-01T00:00:01.50+00:00", "tm0": "-838:59:59",
                     "tm1": "12:00:00.5", "tm6": "00:00:00.000001"}
    assert zero == {"id": 2, "d0": "0000-00-00T00:00:00", "d3": "0000-00-00T00:00:00.000",
                    "d6": "0000-00-00T00:00:00.000000", "t0": "0000-00-00T00:00:00+00:00",
                    "t2": "0000-00-00T00:00:00.00+00:00", "tm0": "00:00:00",
                    "tm1": "00:00:00.0", "tm6": "00:00:00.000000"}
    assert third["tm0"] == "-00:00:01" and third["tm1"] == "-00:00:00.1"
    assert third["tm6"] == "838:59:59.000000"


@WORKERS
def test_json_null_and_sql_null_stay_apart(server: Any, fresh_database: str, tmp_path: Path,
                                           workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([
        f"CREATE TABLE `{db}`.j (id INT PRIMARY KEY, doc JSON)",
        f"INSERT INTO `{db}`.j VALUES (1, 'null'), (2, NULL), (3, '[null]'), "
        "(4, '{\"a\": null}')",
    ])
    docs = [r["after"]["doc"] for r in _records(server, db, start, tmp_path / "out.jsonl",
                                                workers)]
    if server.flavor == "mariadb":  # JSON is LONGTEXT there: the text tells them apart
        assert docs == ["null", None, "[null]", '{"a": null}']
    else:
        assert docs == [{"$json": None}, None, [None], {"a": None}]


def _image_workload(server: Any, db: str, image: str) -> None:
    server.execute([
        f"SET SESSION binlog_row_image = '{image}'",
        f"CREATE TABLE `{db}`.m (id INT PRIMARY KEY, a TEXT, b TEXT, bl BLOB)",
        f"CREATE TABLE `{db}`.k (x INT, y INT, PRIMARY KEY (x, y), note VARCHAR(10))",
        f"INSERT INTO `{db}`.m VALUES (1, 'a1', 'b1', X'01')",
        f"INSERT INTO `{db}`.m VALUES (2, 'a2', 'b2', X'02')",
        f"UPDATE `{db}`.m SET b = 'bb' WHERE id = 2",
        f"UPDATE `{db}`.m SET bl = X'FF' WHERE id = 1",
        f"UPDATE `{db}`.m SET id = 3 WHERE id = 1",
        f"DELETE FROM `{db}`.m WHERE id = 2",
        f"INSERT INTO `{db}`.k VALUES (1, 2, 'n')",
        f"UPDATE `{db}`.k SET note = 'm' WHERE x = 1",
        f"DELETE FROM `{db}`.k WHERE x = 1",
    ])


_FULL_KEYS = [{"id": 1}, {"id": 2}, {"id": 2}, {"id": 1}, {"id": 3}, {"id": 2},
              {"x": 1, "y": 2}, {"x": 1, "y": 2}, {"x": 1, "y": 2}]
_OPS = ["insert", "insert", "update", "update", "update", "delete", "insert", "update",
        "delete"]


@WORKERS
@pytest.mark.parametrize("image", ["full", "minimal", "noblob"])
def test_every_record_field_is_right_under_each_row_image(
        server: Any, fresh_database: str, tmp_path: Path, image: str, workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    _image_workload(server, db, image)
    records = _records(server, db, start, tmp_path / "out.jsonl", workers)
    assert [r["op"] for r in records] == _OPS
    # The key of the row changed: never null, from the before image where the after image
    # leaves the key out (MINIMAL), the new key where an update changes it.
    keys = [r["primary_key"] for r in records]
    assert keys == [_FULL_KEYS[0], _FULL_KEYS[1], {"id": 2}, {"id": 1}, {"id": 3}, {"id": 2},
                    *_FULL_KEYS[6:]]
    for r in records:
        assert r["database"] == db and r["table"] in ("m", "k")
        assert (r["before"] is None) == (r["op"] == "insert")
        assert (r["after"] is None) == (r["op"] == "delete")
        t = r["transaction"]
        assert t["size"] == 1 and t["seq"] == 0 and t["last"] is True
        assert t["commit_ts"] and r["position"]["file"] and r["position"]["pos"] > 0
    ins1, ins2, upd_b, upd_bl, upd_id, dele, k_ins, k_upd, k_del = records
    assert ins1["after"] == {"id": 1, "a": "a1", "b": "b1", "bl": "AQ=="}
    if image == "full":
        assert upd_b["before"] == {"id": 2, "a": "a2", "b": "b2", "bl": "Ag=="}
        assert upd_b["after"] == {"id": 2, "a": "a2", "b": "bb", "bl": "Ag=="}
        assert dele["before"] == {"id": 2, "a": "a2", "b": "bb", "bl": "Ag=="}
        assert k_upd["after"] == {"x": 1, "y": 2, "note": "m"}
    elif image == "minimal":
        # Before images: the key only; after images: what the statement set.
        assert upd_b["before"] == {"id": 2} and upd_b["after"] == {"b": "bb"}
        assert upd_bl["before"] == {"id": 1} and upd_bl["after"] == {"bl": "/w=="}
        assert upd_id["before"] == {"id": 1} and upd_id["after"] == {"id": 3}
        assert dele["before"] == {"id": 2}
        assert k_upd["before"] == {"x": 1, "y": 2} and k_upd["after"] == {"note": "m"}
        assert k_del["before"] == {"x": 1, "y": 2}
    else:  # noblob: every column but BLOB/TEXT ones the statement did not change
        assert upd_b["before"] == {"id": 2} and upd_b["after"] == {"id": 2, "b": "bb"}
        assert upd_bl["after"] == {"id": 1, "bl": "/w=="}
        assert dele["before"] == {"id": 2}
        assert k_upd["after"] == {"x": 1, "y": 2, "note": "m"}
    assert ins2["after"]["id"] == 2 and k_ins["after"] == {"x": 1, "y": 2, "note": "n"}


@WORKERS
def test_binary_keeps_its_zero_padding_as_the_server_stores_it(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, bn BINARY(10))",
                    f"INSERT INTO `{db}`.b VALUES (1, 'abc')"])
    (record,) = _records(server, db, start, tmp_path / "out.jsonl", workers)
    stored = server.execute(f"SELECT HEX(bn) FROM `{db}`.b")[0][0]
    assert bytes.fromhex(stored) == b"abc" + b"\0" * 7
    assert base64.b64decode(record["after"]["bn"]) == bytes.fromhex(stored)
