"""Which databases, tables, columns and DDL statements reach the sinks."""

from __future__ import annotations

import pytest

from changestream.decoding.ddl import parse_ddl
from changestream.transactions.filters import ChangeFilter


def ddl_delivered(f: ChangeFilter, sql: str, default_db: str | None = None) -> bool:
    statement = parse_ddl(sql, default_db)
    assert statement is not None
    return f.ddl(statement, default_db)


# -- tables --------------------------------------------------------------------------------


def test_no_patterns_delivers_everything() -> None:
    f = ChangeFilter()
    assert f.everything
    assert f.table("shop", "orders") and f.table("mysql", "user")
    assert f.excluded_columns("shop", "orders", ("id", "total")) == frozenset()


@pytest.mark.parametrize("pattern", ["shop", "shop.*"])
def test_including_a_database_delivers_all_its_tables_and_nothing_else(pattern: str) -> None:
    f = ChangeFilter(include=[pattern])
    assert not f.everything
    assert f.table("shop", "orders") and f.table("shop", "customers")
    assert not f.table("shopping", "orders")
    assert not f.table("other", "shop")
    assert not f.table("Shop", "orders")  # matched case-sensitively


def test_including_one_table() -> None:
    f = ChangeFilter(include=["shop.orders"])
    assert f.table("shop", "orders")
    assert not f.table("shop", "orders_old")
    assert not f.table("shop", "customers")
    assert not f.table("other", "orders")


def test_include_patterns_with_wildcards() -> None:
    f = ChangeFilter(include=["*.orders", "shop_?.audit_[ab]"])
    assert f.table("shop", "orders") and f.table("other", "orders")
    assert f.table("shop_1", "audit_a") and f.table("shop_2", "audit_b")
    assert not f.table("shop_10", "audit_a")
    assert not f.table("shop_1", "audit_c")
    assert not f.table("shop", "customers")


def test_several_include_patterns_add_up() -> None:
    f = ChangeFilter(include=["shop.orders", "crm"])
    assert f.table("shop", "orders") and f.table("crm", "leads")
    assert not f.table("shop", "customers")


def test_exclude_alone_delivers_everything_else() -> None:
    f = ChangeFilter(exclude=["*.tmp_*", "audit"])
    assert f.table("shop", "orders")
    assert not f.table("shop", "tmp_import")
    assert not f.table("audit", "log")
    assert f.table("auditing", "log")


def test_exclude_wins_over_include() -> None:
    f = ChangeFilter(include=["shop"], exclude=["shop.secrets", "shop._*_gho"])
    assert f.table("shop", "orders")
    assert not f.table("shop", "secrets")
    assert not f.table("shop", "_orders_gho")
    assert f.table("shop", "secrets2")
    assert not f.table("other", "orders")


def test_the_answer_stays_the_same_when_asked_again() -> None:
    f = ChangeFilter(include=["shop"], exclude=["shop.x"])
    for _ in range(3):
        assert f.table("shop", "orders") and not f.table("shop", "x")


# -- columns -------------------------------------------------------------------------------


def test_excluded_columns_by_full_name_and_pattern() -> None:
    f = ChangeFilter(exclude_columns=["shop.customers.password", "*.*.ssn", "hr.*.salary_*"])
    assert not f.everything
    columns = ("id", "password", "ssn", "name")
    assert f.excluded_columns("shop", "customers", columns) == {"password", "ssn"}
    assert f.excluded_columns("shop", "orders", columns) == {"ssn"}
    assert f.excluded_columns("hr", "staff", ("id", "salary_base", "salary")) == {"salary_base"}
    assert f.excluded_columns("shop", "customers", ("id", "name")) == frozenset()


def test_excluding_columns_does_not_filter_tables() -> None:
    f = ChangeFilter(exclude_columns=["shop.customers.password"])
    assert f.table("shop", "customers") and f.table("other", "x")


# -- DDL -----------------------------------------------------------------------------------


def test_table_ddl_follows_its_table() -> None:
    f = ChangeFilter(include=["shop.orders"])
    assert ddl_delivered(f, "ALTER TABLE shop.orders ADD COLUMN x INT")
    assert ddl_delivered(f, "CREATE TABLE orders (id INT)", "shop")
    assert not ddl_delivered(f, "CREATE TABLE customers (id INT)", "shop")
    assert not ddl_delivered(f, "DROP TABLE other.orders")
    assert ddl_delivered(f, "CREATE INDEX i ON orders (a)", "shop")
    assert ddl_delivered(f, "TRUNCATE TABLE shop.orders")


def test_a_rename_is_delivered_when_either_name_is_included() -> None:
    f = ChangeFilter(include=["shop.orders"])
    cut_over = ("RENAME TABLE shop.orders TO shop._orders_old, "
                "shop._orders_gho TO shop.orders")
    assert ddl_delivered(f, cut_over)
    assert ddl_delivered(f, "RENAME TABLE shop.staging TO shop.orders")
    assert ddl_delivered(f, "ALTER TABLE shop.orders RENAME TO shop.orders_old")
    assert not ddl_delivered(f, "RENAME TABLE shop.a TO shop.b")


def test_drop_of_several_tables_is_delivered_when_one_is_included() -> None:
    f = ChangeFilter(include=["shop.orders"])
    assert ddl_delivered(f, "DROP TABLE shop.a, shop.orders")
    assert not ddl_delivered(f, "DROP TABLE shop.a, shop.b")


def test_excluded_table_ddl_is_not_delivered() -> None:
    f = ChangeFilter(exclude=["*.tmp_*"])
    assert not ddl_delivered(f, "CREATE TABLE tmp_x (id INT)", "shop")
    assert ddl_delivered(f, "CREATE TABLE x (id INT)", "shop")


def test_database_ddl_follows_the_database_of_the_include_patterns() -> None:
    f = ChangeFilter(include=["shop.orders", "crm"])
    assert ddl_delivered(f, "CREATE DATABASE shop")
    assert ddl_delivered(f, "DROP DATABASE crm")
    assert not ddl_delivered(f, "CREATE DATABASE other")
    assert not ddl_delivered(f, "DROP DATABASE shopping")


def test_database_ddl_with_a_wildcard_include() -> None:
    f = ChangeFilter(include=["shop_*", "*.orders"])
    assert ddl_delivered(f, "CREATE DATABASE shop_eu")
    assert ddl_delivered(f, "CREATE DATABASE anything")  # it may hold an "orders" table


@pytest.mark.parametrize("pattern", ["shop", "shop.*", "*", "sh*"])
def test_database_ddl_of_a_wholly_excluded_database_is_not_delivered(pattern: str) -> None:
    f = ChangeFilter(exclude=[pattern])
    assert not ddl_delivered(f, "DROP DATABASE shop")
    assert not ddl_delivered(f, "ALTER DATABASE CHARACTER SET utf8mb4", "shop")


@pytest.mark.parametrize("pattern", ["shop.orders", "shop.?", "shop.tmp_*", "*.tmp"])
def test_excluding_some_tables_keeps_the_database_ddl(pattern: str) -> None:
    f = ChangeFilter(exclude=[pattern])
    assert ddl_delivered(f, "CREATE DATABASE shop")
    assert ddl_delivered(f, "DROP DATABASE shop")


def test_ddl_without_tables_uses_the_default_database() -> None:
    f = ChangeFilter(include=["shop"])
    assert ddl_delivered(f, "CREATE VIEW v AS SELECT 1", "shop")
    assert not ddl_delivered(f, "CREATE VIEW v AS SELECT 1", "other")


def test_ddl_without_any_database_is_delivered_only_when_nothing_is_included() -> None:
    assert not ddl_delivered(ChangeFilter(include=["shop"]), "CREATE VIEW v AS SELECT 1")
    assert ddl_delivered(ChangeFilter(exclude=["shop"]), "CREATE VIEW v AS SELECT 1")


# -- tables added and paused while running -------------------------------------------------


def test_a_table_added_while_running_is_delivered_whatever_the_patterns_say() -> None:
    f = ChangeFilter(include=["shop.orders"], exclude=["shop.tmp_*"]).with_tables(
        ["shop.tmp_log", "crm.*"], [])
    assert f.table("shop", "orders")
    assert f.table("shop", "tmp_log") and f.table("crm", "leads")
    assert not f.table("shop", "tmp_other") and not f.table("billing", "x")
    assert f.database("crm") and f.database("shop") and not f.database("billing")


def test_a_paused_table_is_not_delivered_and_nothing_filtered_is_no_longer_everything() -> None:
    f = ChangeFilter().with_tables([], ["shop.orders"])
    assert not f.everything
    assert not f.table("shop", "orders") and f.table("shop", "lines")
    assert not ChangeFilter().with_tables(["shop.orders"], ["shop.*"]).table("shop", "orders")
    assert not ddl_delivered(f, "ALTER TABLE shop.orders ADD c INT")
    assert ChangeFilter().with_tables([], []).everything
