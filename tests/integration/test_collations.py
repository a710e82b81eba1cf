"""Every collation the server has, through the router: one column per collation, holding
ASCII and characters of its character set, must come out as the server converts it to
utf8mb4 (``SELECT CONVERT(col USING utf8mb4)``). None may stop the router."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter

pytestmark = pytest.mark.integration

COLUMNS_PER_TABLE = 100  # InnoDB keeps a row under 8,126 bytes: 100 x 12 characters fits
LENGTH = 12
ASCII = "Ab1"
# Characters some character set has; each column gets those its character set holds (the
# server's round trip decides), at most LENGTH - 3. Some are where a Python codec is wrong
# or lacks them (big5's 碁, eucjpms' U+FF5E, gb18030's ḿ, euckr's 갂, ujis' user-defined area).
CANDIDATES = (
    "é€ß\u0165\u10d0\u0531\u2022\u203e\u02bd\u207fÄ\u0416\u05d0\u0639\u0e01\u03a9čőł"
    "碁\uff5e\u1e3f갂\ue000中日한ｱ\\\U0001f600"
)


def _collations(server: Any) -> list[tuple[int, str, str]]:
    """``(id, collation, charset)`` of every collation the server has."""
    columns = {r[0] for r in server.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
        "'information_schema' AND TABLE_NAME = 'COLLATION_CHARACTER_SET_APPLICABILITY'")}
    if "ID" in columns:  # MariaDB 10.10+: the UCA-14.0 collations' ids are only here
        sql = ("SELECT ID, FULL_COLLATION_NAME, CHARACTER_SET_NAME FROM "
               "information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL")
    else:
        sql = "SELECT ID, COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS"
    return sorted((int(i), name, charset) for i, name, charset in server.execute(sql))


def _sample_texts(server: Any, charsets: set[str]) -> dict[str, str]:
    """Per character set: ASCII and the candidates it holds, by the server's round trip."""
    texts = {}
    for charset in sorted(charsets - {"binary"}):
        trips = server.execute("SELECT " + ", ".join(
            f"CONVERT(CONVERT(_utf8mb4 X'{ch.encode().hex()}' USING {charset}) USING utf8mb4)"
            for ch in CANDIDATES))[0]
        held = [ch for ch, back in zip(CANDIDATES, trips) if back == ch]
        texts[charset] = ASCII + "".join(held[:LENGTH - len(ASCII)])
    return texts


def _column(collation_id: int, collation: str, charset: str) -> str:
    if charset == "binary":
        return f"c{collation_id} VARBINARY({LENGTH})"
    return f"c{collation_id} VARCHAR({LENGTH}) CHARACTER SET {charset} COLLATE {collation}"


@pytest.mark.parametrize("workers", [0, 2], ids=["in-process", "decode-workers"])
def test_every_collation_decodes_as_the_server_converts_it(
        server: Any, fresh_database: str, tmp_path: Path, workers: int) -> None:
    db = fresh_database
    collations = _collations(server)
    texts = _sample_texts(server, {charset for _, _, charset in collations})
    start = server.binlog_position()
    tables = [collations[i:i + COLUMNS_PER_TABLE]
              for i in range(0, len(collations), COLUMNS_PER_TABLE)]
    expected: dict[str, Any] = {}
    for n, table in enumerate(tables):
        columns = ", ".join(_column(*c) for c in table)
        values = ", ".join("_binary 'Ab1'" if cs == "binary" else
                           f"CONVERT(_utf8mb4 X'{texts[cs].encode().hex()}' USING {cs})"
                           for _, _, cs in table)
        server.execute([f"CREATE TABLE `{db}`.t{n} (id INT PRIMARY KEY, {columns})",
                        f"INSERT INTO `{db}`.t{n} VALUES ({n}, {values})"])
        selected = server.execute("SELECT " + ", ".join(
            f"CONVERT(c{i} USING utf8mb4)" if cs != "binary" else f"c{i}"
            for i, _, cs in table) + f" FROM `{db}`.t{n}")[0]
        for (i, _, cs), value in zip(table, selected):
            expected[f"t{n}.c{i}"] = (base64.b64encode(value).decode() if cs == "binary"
                                      else value)
    out = tmp_path / "out.jsonl"
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                          until="caught-up", filter=ChangeFilter(include=[db]),
                          decode_workers=workers, decode_workers_wait=True),
           JsonLinesSink(out)).run()
    got = {f"{r['table']}.{column}": value
           for r in map(orjson.loads, out.read_bytes().splitlines()) if r["op"] == "insert"
           for column, value in r["after"].items() if column != "id"}
    wrong = {key: (got.get(key), want) for key, want in expected.items() if got.get(key) != want}
    non_ascii = sum(1 for _, _, cs in collations if cs != "binary" and texts[cs] != ASCII)
    print(f"{server.flavor} ({workers} decode workers): {len(collations)} collations, "
          f"{len(expected) - len(wrong)} decoded as the server converts them "
          f"({non_ascii} with non-ASCII text), "
          f"{len(wrong)} wrong, 0 stopped the router")
    assert len(expected) == len(collations)
    assert wrong == {}
    # Every character set but ascii and swe7 (7 bits) held some non-ASCII text.
    assert {cs for cs, text in texts.items() if text == ASCII} <= {"ascii", "swe7"}
