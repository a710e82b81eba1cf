"""The schema history's shadow server started at its first use, with the history's tables
created on it first (a recording stand-in for the server)."""

from __future__ import annotations

from typing import Any

import pytest

from changestream.devserver.errors import ServerStartError
from changestream.model.errors import ConfigError
from changestream.schema.deferred_shadow import DeferredShadow
from changestream.schema.definition import TableDefinition
from changestream.schema.history import SchemaState
from changestream.schema.shadow import ShadowError, ShadowSettings

SETTINGS = ShadowSettings("mariadb", None, 0, None)


class _Recorded:
    """Stands in for a started ShadowServer: keeps the statements run on it."""

    flavor = "mariadb"

    def __init__(self, refuse: str = "") -> None:
        self.statements: list[str] = []
        self.refuse = refuse
        self.closed = False

    def run(self, sql: str) -> None:
        if self.refuse and self.refuse in sql:
            raise ShadowError("Unknown storage engine", 1286)
        self.statements.append(sql)

    def replay(self, statement: bytes, database: str, status: Any) -> None:
        self.statements.append(statement.decode())

    def close(self) -> None:
        self.closed = True


def _state() -> SchemaState:
    return SchemaState(
        {"shop": "CREATE DATABASE `shop`"},
        {("shop", "a"): TableDefinition("shop", "a", (), (), "CREATE TABLE `a` (id INT)"),
         ("shop", "b"): TableDefinition("shop", "b", (), (), "CREATE TABLE `b` (id INT) "
                                        "ENGINE=Odd")})


def test_nothing_starts_until_first_used_then_the_state_is_created_first() -> None:
    started: list[_Recorded] = []

    def start(settings: ShadowSettings) -> Any:
        started.append(_Recorded())
        return started[-1]

    shadow = DeferredShadow(SETTINGS, start, _state)
    assert not shadow.started and not started
    shadow.replay(b"ALTER TABLE a ADD COLUMN v INT", "shop", None)  # type: ignore[arg-type]
    shadow.run("SELECT 1")
    assert len(started) == 1 and shadow.started
    assert started[0].statements == [
        "CREATE DATABASE `shop`", "USE `shop`", "CREATE TABLE `a` (id INT)", "USE `shop`",
        "CREATE TABLE `b` (id INT) ENGINE=Odd", "ALTER TABLE a ADD COLUMN v INT", "SELECT 1"]
    shadow.close()
    assert started[0].closed and not shadow.started


def test_a_table_the_shadow_cannot_create_is_left_off_it(caplog: Any) -> None:
    recorded = _Recorded(refuse="ENGINE=Odd")

    def start(settings: ShadowSettings) -> Any:
        return recorded

    shadow = DeferredShadow(SETTINGS, start, _state)
    shadow.run("SELECT 1")
    assert "CREATE TABLE `a` (id INT)" in recorded.statements
    assert not any("ENGINE=Odd" in s for s in recorded.statements)
    assert "cannot create shop.b" in caplog.text


def test_a_shadow_that_cannot_start_is_a_config_error_naming_the_setting() -> None:
    def start(settings: ShadowSettings) -> Any:
        raise ServerStartError("mariadbd exited with 1")

    shadow = DeferredShadow(SETTINGS, start, _state)
    with pytest.raises(ConfigError, match=r"schema\.shadow_server.*binlog_row_metadata=FULL"):
        shadow.run("SELECT 1")
    assert not shadow.started
