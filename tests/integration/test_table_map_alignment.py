"""The TABLE_MAP's optional metadata lists signedness, character sets, ENUM/SET labels,
geometry types and the primary key per column of a kind, not per column: each list must be
counted over exactly the columns the server counts. Every column type is put in turn before
probe columns of each counted kind (signed and unsigned integers alternating, character
sets alternating, ENUM and SET labels, a POINT, the key last), on each server, under FULL
and MINIMAL metadata, with and without decode workers; a type counted wrongly shifts the
lists after it and a probe comes out wrong (a negative TINYINT after a YEAR read as 251 was
such a defect)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import server_version, shadow_command

pytestmark = pytest.mark.integration

# (column definition, a value literal) of every type put before the probes.
_LEADING = [
    ("YEAR", "2000"), ("TINYINT", "-1"), ("TINYINT UNSIGNED", "255"), ("SMALLINT", "-2"),
    ("SMALLINT UNSIGNED", "65535"), ("MEDIUMINT", "-3"), ("MEDIUMINT UNSIGNED", "16777215"),
    ("INT", "-4"), ("INT UNSIGNED", "4294967295"), ("BIGINT", "-5"),
    ("BIGINT UNSIGNED", "18446744073709551615"), ("DECIMAL(10,2)", "-1.5"),
    ("DECIMAL(10,2) UNSIGNED", "1.5"), ("FLOAT", "-1.5"), ("DOUBLE", "-2.5"),
    ("BIT(5)", "b'10101'"), ("BOOLEAN", "1"), ("DATE", "'2024-01-02'"),
    ("TIME(3)", "'-01:02:03.5'"), ("DATETIME(6)", "'2024-01-02 03:04:05.000006'"),
    ("TIMESTAMP(2) NULL", "'2024-01-02 03:04:05.5'"),
    ("CHAR(3) CHARACTER SET latin1", "'é'"), ("CHAR(3) CHARACTER SET utf8mb4", "'€'"),
    ("VARCHAR(10) CHARACTER SET cp1251", "'Ж'"), ("VARCHAR(300) CHARACTER SET utf8mb4", "'ü'"),
    ("BINARY(4)", "'ab'"), ("VARBINARY(4)", "'ab'"), ("TINYTEXT", "'t'"),
    ("TEXT CHARACTER SET latin1", "'é'"), ("MEDIUMTEXT", "'m'"), ("LONGTEXT", "'l'"),
    ("TINYBLOB", "'b'"), ("BLOB", "'b'"), ("MEDIUMBLOB", "'b'"), ("LONGBLOB", "'b'"),
    ("ENUM('a','b') CHARACTER SET latin1", "'b'"), ("SET('a','b','c')", "'a,c'"),
    ("JSON", "'{\"k\": 1}'"), ("GEOMETRY", "ST_GeomFromText('POINT(1 2)')"),
    ("POINT", "ST_GeomFromText('POINT(1 2)')"),
    ("LINESTRING", "ST_GeomFromText('LINESTRING(0 0, 1 1)')"),
]
_MARIADB_ONLY = [("UUID", "'123e4567-e89b-12d3-a456-426614174000'"),
                 ("INET6", "'::1'"), ("INET4", "'10.0.0.1'")]
_MYSQL_ONLY = [("VECTOR(2)", "TO_VECTOR('[1,2]')")]

# The probes: each counted kind, its neighbours differing in what a shift would swap.
_PROBES = (
    "ts TINYINT, tu TINYINT UNSIGNED, ms MEDIUMINT, su SMALLINT UNSIGNED, bs BIGINT, "
    "du DECIMAL(4,1) UNSIGNED, ds DECIMAL(4,1), "
    "cl VARCHAR(5) CHARACTER SET latin1, cu CHAR(4) CHARACTER SET utf8mb4, "
    "cc TEXT CHARACTER SET cp1251, e1 ENUM('x','y','z'), s1 SET('p','q','r'), "
    "e2 ENUM('k','l') CHARACTER SET latin1, pt POINT, el VARCHAR(5) CHARACTER SET latin1, "
    "id INT NOT NULL, PRIMARY KEY (id)"
)
_PROBE_VALUES = ("-5, 250, -70000, 65000, -1, 99.5, -99.5, 'é', '€ü', 'Жж', 'z', 'p,r', 'l', "
                 "ST_GeomFromText('POINT(3 4)'), 'àé'")
_EXPECTED = {"ts": -5, "tu": 250, "ms": -70000, "su": 65000, "bs": -1, "du": "99.5",
             "ds": "-99.5", "cl": "é", "cu": "€ü", "cc": "Жж", "e1": "z", "s1": ["p", "r"],
             "e2": "l", "el": "àé"}


def _leading(server: Any) -> list[tuple[str, str]]:
    if server.flavor == "mysql":
        return _LEADING + _MYSQL_ONLY
    version = server_version(server)
    return _LEADING + (_MARIADB_ONLY if version >= (10, 10) else []) + (
        [("VECTOR(2)", "VEC_FromText('[1,2]')")] if version >= (11, 7) else [])


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
def test_probes_after_every_column_type_keep_their_own_metadata(
        server: Any, fresh_database: str, row_metadata: str, tmp_path: Path,
        workers: int) -> None:
    db = fresh_database
    leading = _leading(server)
    server.execute("SET SESSION sql_mode = ''")
    for n, (definition, _) in enumerate(leading):
        server.execute(f"CREATE TABLE `{db}`.t{n} (lc {definition}, {_PROBES})")
    start = server.binlog_position()
    # With MINIMAL metadata the names and signedness come from the schema history: it is
    # seeded at the start, after the CREATEs.
    server.execute([f"INSERT INTO `{db}`.t{n} VALUES ({value}, {_PROBE_VALUES}, {n})"
                    for n, (_, value) in enumerate(leading)])
    out = tmp_path / "out.jsonl"
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[db]),
                          decode_workers=workers, decode_workers_wait=True,
                          schema=HistorySettings("on", shadow_command(server))),
           JsonLinesSink(out)).run()
    records = {r["table"]: r for r in map(orjson.loads, out.read_bytes().splitlines())}
    wrong = {}
    for n, (definition, _) in enumerate(leading):
        record = records.get(f"t{n}")
        if record is None:
            wrong[definition] = "no record"
            continue
        after = record["after"]
        got = {k: after[k] for k in _EXPECTED}
        if got != _EXPECTED or record["primary_key"] != {"id": n} or after["id"] != n:
            wrong[definition] = {k: v for k, v in got.items() if v != _EXPECTED[k]} or record
        elif not isinstance(after["pt"], str) or not after["pt"]:
            wrong[definition] = {"pt": after["pt"]}
    assert not wrong, f"probes read wrongly after these leading columns: {wrong}"
