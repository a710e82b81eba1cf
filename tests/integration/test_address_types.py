"""MariaDB's UUID, INET6 and INET4 columns are logged as BINARY(16)/BINARY(4); the schema
history knows their type, and their values come out as the server prints them, with full
and minimal row metadata, with and without decode workers. A plain BINARY(16) stays bytes."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command

pytestmark = pytest.mark.integration

UUIDS = ["6ccd780c-baba-1026-9564-5b8c656024db", "00000000-0000-0000-0000-000000000000",
         "ffffffff-ffff-4fff-bfff-ffffffffffff", "123e4567-e89b-12d3-a456-426614174000",
         "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000100"]
INET6 = ["::", "::1", "::ffff:192.168.0.1", "2001:db8::", "fe80::1:2:3:4", "1:2:3:4:5:6:7:8",
         "::192.168.0.1", "2001:db8:0:0:1::1"]
INET4 = ["0.0.0.0", "192.168.0.1", "255.255.255.255", "10.0.0.0", "1.2.3.0", "127.0.0.1"]


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
@pytest.mark.parametrize("decode_workers", [0, 2])
def test_uuid_and_inet_values_come_out_as_the_server_prints_them(
        server: Any, fresh_database: str, tmp_path: Path, metadata: str,
        decode_workers: int) -> None:
    if server.flavor != "mariadb":
        pytest.skip("UUID, INET6 and INET4 are MariaDB's types")
    db = fresh_database
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4, "
                    "b BINARY(16))", f"SET GLOBAL binlog_row_metadata = {metadata}"])
    try:
        start = server.binlog_position()
        rows = list(zip(UUIDS, INET6, INET4, strict=False))
        server.execute([f"INSERT INTO `{db}`.t VALUES ({i}, '{u}', '{a}', '{b}', "
                        f"UNHEX(REPLACE('{u}', '-', '')))" for i, (u, a, b) in enumerate(rows)])
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = FULL")
    printed = server.execute(f"SELECT id, CAST(u AS CHAR), CAST(i6 AS CHAR), CAST(i4 AS CHAR), "
                             f"HEX(b) FROM `{db}`.t ORDER BY id")
    out = tmp_path / "out.jsonl"
    Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}", until="caught-up",
                          filter=ChangeFilter(include=[db]), decode_workers=decode_workers,
                          decode_workers_wait=True,
                          schema=HistorySettings("auto", shadow_command(server))),
           JsonLinesSink(out)).run()
    after = [orjson.loads(line)["after"] for line in out.read_bytes().splitlines()]
    assert [(a["id"], a["u"], a["i6"], a["i4"], base64.b64decode(a["b"]).hex().upper())
            for a in after] == [tuple(row) for row in printed]
