"""The schema history's pure parts: session variables of a QUERY event, the history's
states over positions, their storage, and definitions as table shapes."""

from __future__ import annotations

import struct
from pathlib import Path

import orjson
import pytest

from changestream.decoding import field_types as ft
from changestream.decoding.query_status import QueryStatus, parse_query_status
from changestream.decoding.row_values import address_text
from changestream.delivery.position_store import PositionStore
from changestream.model.changes import Position, binlog_order
from changestream.model.errors import ConfigError
from changestream.schema.definition import (
    ColumnDefinition,
    TableDefinition,
    definition_schema,
)
from changestream.schema.history import (
    SchemaChangeSet,
    SchemaHistory,
    SchemaState,
)
from changestream.schema.store import SchemaHistoryStore


def _table(name: str, *columns: str) -> TableDefinition:
    return TableDefinition("d", name, tuple(ColumnDefinition(c, "int", "int(11)")
                                            for c in columns), (columns[0],),
                           f"CREATE TABLE `{name}` (...)")


def test_status_variables_give_the_session_a_ddl_ran_under() -> None:
    status = (bytes([0]) + struct.pack("<I", 0)  # flags2
              + bytes([1]) + struct.pack("<Q", (1 << 2) | (1 << 21) | (1 << 30))  # sql_mode
              + bytes([4]) + struct.pack("<HHH", 33, 45, 255)  # charsets
              + bytes([5, 6]) + b"+00:00"  # time zone
              + bytes([16, 1])  # explicit_defaults_for_timestamp
              + bytes([18]) + struct.pack("<H", 255)  # default_collation_for_utf8mb4
              + bytes([200, 1, 2, 3]))  # a code it does not know: it stops there
    parsed = parse_query_status(status)
    assert parsed == QueryStatus(sql_mode=(1 << 2) | (1 << 21) | (1 << 30), client_charset=33,
                                 connection_collation=45, server_collation=255,
                                 time_zone="+00:00", explicit_defaults_for_timestamp=True,
                                 default_collation_for_utf8mb4=255)
    assert parsed.sql_mode_names("mysql") == ["ANSI_QUOTES", "STRICT_TRANS_TABLES",
                                              "NO_ENGINE_SUBSTITUTION"]
    assert parse_query_status(b"") == QueryStatus()


def test_binlog_positions_order_by_file_number_past_its_padding() -> None:
    assert binlog_order("mysql-bin.999999", 900) < binlog_order("mysql-bin.1000000", 4)
    assert binlog_order("mysql-bin.000002", 4) > binlog_order("mysql-bin.000001", 99999)


def test_the_state_saved_with_a_position_is_the_one_at_that_position() -> None:
    history = SchemaHistory("mariadb", SchemaState({"d": "CREATE DATABASE d"},
                                                   {("d", "t"): _table("t", "id", "a")}))
    history.record(SchemaChangeSet("bin.000001", 500, "ALTER TABLE t ADD b INT",
                                   tables={("d", "t"): _table("t", "id", "a", "b")}))
    history.record(SchemaChangeSet("bin.000002", 300, "DROP TABLE t",
                                   tables={("d", "t"): None}))
    assert history.table("d", "t") is None  # the reader is past both
    first, data = history.stored_at("bin.000001", 400)  # before the ALTER
    assert [c["name"] for c in orjson.loads(data)["tables"]["d"]["t"]["columns"]] == ["id", "a"]
    assert history.stored_at("bin.000001", 400)[0] == first  # nothing folded: same state
    second, data = history.stored_at("bin.000002", 4)
    assert second != first and "b" in data.decode()
    assert history.pending == 1
    _, data = history.stored_at("bin.000002", 300)
    assert orjson.loads(data)["tables"] == {} and history.pending == 0


def test_states_are_stored_once_and_only_the_named_one_is_kept(tmp_path: Path) -> None:
    history = SchemaHistory("mysql", SchemaState({}, {("d", "t"): _table("t", "id")}))
    store = PositionStore(tmp_path / "position.json")
    store.keep_history(history)
    store.save(Position("bin.000001", 100))
    history.record(SchemaChangeSet("bin.000001", 200, "ALTER", tables={
        ("d", "t"): _table("t", "id", "x")}))
    store.save(Position("bin.000001", 150))  # before the ALTER: the same state
    assert len(list(tmp_path.glob("position.json.schema-*.json"))) == 1
    store.save(Position("bin.000001", 250))
    files = list(tmp_path.glob("position.json.schema-*.json"))
    assert len(files) == 1
    saved = PositionStore(tmp_path / "position.json").load()
    assert saved is not None and saved.schema_history is not None
    flavor, state = SchemaHistoryStore(tmp_path / "position.json").load(saved.schema_history)
    assert flavor == "mysql"
    assert [c.name for c in state.tables[("d", "t")].columns] == ["id", "x"]
    files[0].unlink()
    with pytest.raises(ConfigError, match="missing"):
        SchemaHistoryStore(tmp_path / "position.json").load(saved.schema_history)


def test_a_definition_gives_the_shape_sinks_build_tables_from() -> None:
    definition = TableDefinition("d", "t", (
        ColumnDefinition("id", "bigint", "bigint(20) unsigned"),
        ColumnDefinition("price", "decimal", "decimal(10,2)"),
        ColumnDefinition("at", "datetime", "datetime(3)"),
        ColumnDefinition("state", "enum", "enum('a','b''c')", 45),
        ColumnDefinition("raw", "varbinary", "varbinary(16)"),
        ColumnDefinition("u", "uuid", "uuid"),
        ColumnDefinition("note", "varchar", "varchar(20)", 8, invisible=True),
    ), ("id",), "CREATE TABLE t (...)")
    schema = definition_schema(definition)
    c = {col.name: col for col in schema.columns}
    assert (c["id"].type_code, c["id"].unsigned) == (ft.LONGLONG, True)
    assert (c["price"].precision, c["price"].scale) == (10, 2)
    assert (c["at"].type_code, c["at"].fsp) == (ft.DATETIME2, 3)
    assert c["state"].enum_values == ("a", "b'c")
    assert c["raw"].collation == 63 and c["u"].text_type == "uuid"
    assert (c["note"].collation, c["note"].visible, c["note"].max_length) == (8, False, 20)
    assert schema.primary_key == (0,) and schema.names_logged


def test_mariadb_address_types_print_as_the_server_does() -> None:
    raw = bytes.fromhex("6ccd780cbaba102695645b8c656024db")
    assert address_text("uuid", raw) == "6ccd780c-baba-1026-9564-5b8c656024db"
    assert address_text("inet6", bytes(10) + b"\xff\xff" + bytes([192, 168, 0, 1])) == \
        "::ffff:192.168.0.1"
    assert address_text("inet4", bytes([10, 0, 0, 1])) == "10.0.0.1"
