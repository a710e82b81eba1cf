"""Reading DDL from QUERY events: the kind of statement and the tables (or database) it
changes, on statements written the way servers and tools log them."""

from __future__ import annotations

import pytest

from changestream.decoding.ddl import DdlStatement, TableName, parse_ddl, strip_comments

T = TableName


def parsed(sql: str, default_db: str | None = "app") -> DdlStatement:
    statement = parse_ddl(sql, default_db)
    assert statement is not None, f"{sql!r} was not recognised as DDL"
    return statement


# -- strip_comments ----------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "expected"), [
    ("a /* block */ b", "a   b"),
    ("a /* over\nseveral\nlines */ b", "a   b"),
    ("a -- to the end of the line\nb", "a \nb"),
    ("a # hash to the end of the line\nb", "a \nb"),
    ("a -- comment at the very end", "a "),
    ("a /* never closed", "a  "),
])
def test_strip_comments_removes_block_dash_and_hash_comments(sql: str, expected: str) -> None:
    assert strip_comments(sql) == expected


def test_double_dash_without_a_following_space_is_not_a_comment() -> None:
    # MySQL: "--" starts a comment only when followed by whitespace (5--1 is 5 minus -1).
    assert strip_comments("SELECT 5--1") == "SELECT 5--1"


@pytest.mark.parametrize(("sql", "kept"), [
    ("a /*!50100 PARTITION BY HASH (id) */ b", "PARTITION BY HASH (id)"),
    ("a /*!80016 DEFAULT ENCRYPTION='N' */ b", "DEFAULT ENCRYPTION='N'"),
    ("a /*M!100100 IF EXISTS */ b", "IF EXISTS"),
    ("a /*! NO VERSION */ b", "NO VERSION"),
])
def test_versioned_comments_are_kept_as_code_without_their_version(sql: str, kept: str) -> None:
    out = strip_comments(sql)
    assert kept in out
    assert "/*" not in out and "*/" not in out
    assert "50100" not in out and "100100" not in out and "80016" not in out


@pytest.mark.parametrize("sql", [
    "COMMENT '/* not a comment */'",
    "COMMENT 'it''s -- not a comment'",
    "COMMENT 'a \\' # still inside'",
    "`col#1` INT",
    "`a``b /* c */` INT",
    '"ansi -- name" INT',
])
def test_comment_markers_inside_quotes_are_left_alone(sql: str) -> None:
    assert strip_comments(sql) == sql


# -- tables: CREATE / ALTER / DROP / TRUNCATE ----------------------------------------------


def test_create_table_names_the_table_in_the_default_database() -> None:
    s = parsed("CREATE TABLE orders (id INT PRIMARY KEY)")
    assert s.kind == "create_table"
    assert s.tables == [T("app", "orders")]
    assert s.renames == []
    assert s.changes_tables


def test_qualified_name_wins_over_the_default_database() -> None:
    assert parsed("CREATE TABLE shop.orders (id INT)").tables == [T("shop", "orders")]


def test_without_a_default_database_an_unqualified_table_has_none() -> None:
    assert parsed("CREATE TABLE orders (id INT)", None).tables == [T(None, "orders")]
    assert parsed("CREATE TABLE orders (id INT)", "").tables == [T(None, "orders")]


@pytest.mark.parametrize("sql", [
    "CREATE TABLE IF NOT EXISTS orders (id INT)",
    "CREATE TEMPORARY TABLE orders (id INT)",
    "CREATE TEMPORARY TABLE IF NOT EXISTS orders (id INT)",
    "CREATE OR REPLACE TABLE orders (id INT)",
    "create table orders (id int)",
    "CREATE TABLE orders LIKE templates",
    "CREATE TABLE orders AS SELECT * FROM staging",
    "CREATE /*!32312 TEMPORARY */ TABLE orders (id INT)",
    "CREATE TABLE\n  orders\n(\n  id INT -- the key\n)",
])
def test_create_table_forms(sql: str) -> None:
    s = parsed(sql)
    assert (s.kind, s.tables) == ("create_table", [T("app", "orders")])


@pytest.mark.parametrize(("sql", "name"), [
    ("CREATE TABLE `order items` (id INT)", T("app", "order items")),
    ("CREATE TABLE `a``b` (id INT)", T("app", "a`b")),
    ("CREATE TABLE `my``db`.`t``1` (id INT)", T("my`db", "t`1")),
    ('CREATE TABLE "ansi"."quoted" (id INT)', T("ansi", "quoted")),
    ('CREATE TABLE "x""y" (id INT)', T("app", 'x"y')),
    ("CREATE TABLE `shop` . `orders` (id INT)", T("shop", "orders")),
    ("CREATE TABLE `dotted.name` (id INT)", T("app", "dotted.name")),
    ("CREATE TABLE café (id INT)", T("app", "café")),
])
def test_quoted_and_qualified_names_are_unquoted(sql: str, name: TableName) -> None:
    assert parsed(sql).tables == [name]


@pytest.mark.parametrize("keyword", ["IF", "EXISTS", "TABLE", "TO", "RENAME", "ON"])
def test_a_quoted_name_spelled_like_a_keyword_is_a_name(keyword: str) -> None:
    assert parsed(f"CREATE TABLE `{keyword}` (id INT)").tables == [T("app", keyword)]
    assert parsed(f"DROP TABLE IF EXISTS `{keyword}`").tables == [T("app", keyword)]


def test_alter_table() -> None:
    s = parsed("ALTER TABLE shop.orders ADD COLUMN note TEXT, DROP COLUMN old")
    assert (s.kind, s.tables, s.renames) == ("alter_table", [T("shop", "orders")], [])


@pytest.mark.parametrize("sql", [
    "ALTER ONLINE TABLE orders ADD COLUMN x INT",
    "ALTER IGNORE TABLE orders ADD UNIQUE (x)",
    "ALTER TABLE IF EXISTS orders ADD COLUMN x INT",
    "/*!40000 ALTER TABLE `orders` DISABLE KEYS */",
])
def test_alter_table_forms(sql: str) -> None:
    s = parsed(sql)
    assert (s.kind, s.tables) == ("alter_table", [T("app", "orders")])


@pytest.mark.parametrize(("sql", "new"), [
    ("ALTER TABLE orders RENAME TO orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders RENAME AS orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders RENAME orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders RENAME TO archive.orders", T("archive", "orders")),
    ("ALTER TABLE orders ADD COLUMN x INT, RENAME TO orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders RENAME COLUMN a TO b, RENAME TO orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders ADD COLUMN `RENAME` INT, RENAME TO orders_2023", T("app", "orders_2023")),
    ("ALTER TABLE orders RENAME TO `TO`", T("app", "TO")),
])
def test_alter_table_rename_to_is_a_rename(sql: str, new: TableName) -> None:
    s = parsed(sql)
    assert s.kind == "alter_table"
    assert s.renames == [(T("app", "orders"), new)]
    assert s.tables == [T("app", "orders"), new]


def test_alter_table_rename_without_any_database_keeps_the_old_tables_database() -> None:
    s = parsed("ALTER TABLE shop.orders RENAME TO orders_old", None)
    assert s.renames == [(T("shop", "orders"), T("shop", "orders_old"))]


@pytest.mark.parametrize("sql", [
    "ALTER TABLE orders RENAME COLUMN total TO amount",
    "ALTER TABLE orders RENAME INDEX idx_a TO idx_b",
    "ALTER TABLE orders RENAME KEY idx_a TO idx_b",
    "ALTER TABLE orders CHANGE COLUMN total amount DECIMAL(10,2)",
    "ALTER TABLE orders COMMENT 'rename to x'",
    "ALTER TABLE orders ADD COLUMN note TEXT /* RENAME TO x */",
    "ALTER TABLE orders ADD COLUMN `rename` INT",
    "ALTER TABLE orders ADD CHECK (status IN ('rename'))",
])
def test_renaming_a_column_or_index_is_not_a_table_rename(sql: str) -> None:
    s = parsed(sql)
    assert s.kind == "alter_table"
    assert s.tables == [T("app", "orders")]
    assert s.renames == []


@pytest.mark.parametrize(("sql", "tables"), [
    ("DROP TABLE orders", [T("app", "orders")]),
    ("DROP TABLE IF EXISTS orders", [T("app", "orders")]),
    ("DROP TEMPORARY TABLE IF EXISTS orders", [T("app", "orders")]),
    ("DROP TABLES a, shop.b", [T("app", "a"), T("shop", "b")]),
    ("DROP TABLE a, b CASCADE", [T("app", "a"), T("app", "b")]),
    # What MySQL itself logs for DROP TABLE (and for each table of DROP DATABASE).
    ("DROP TABLE `t1` /* generated by server */", [T("app", "t1")]),
    ("DROP TABLE IF EXISTS `shop`.`t1`,`t2` /* generated by server */",
     [T("shop", "t1"), T("app", "t2")]),
])
def test_drop_table_lists_every_table(sql: str, tables: list[TableName]) -> None:
    s = parsed(sql)
    assert (s.kind, s.tables) == ("drop_table", tables)


@pytest.mark.parametrize("sql", ["TRUNCATE orders", "TRUNCATE TABLE orders",
                                 "truncate table `orders`"])
def test_truncate(sql: str) -> None:
    s = parsed(sql)
    assert (s.kind, s.tables) == ("truncate_table", [T("app", "orders")])


def test_truncate_of_a_qualified_table() -> None:
    assert parsed("TRUNCATE TABLE shop.orders").tables == [T("shop", "orders")]


# -- RENAME TABLE --------------------------------------------------------------------------


def test_rename_table() -> None:
    s = parsed("RENAME TABLE orders TO orders_old")
    assert s.kind == "rename_table"
    assert s.renames == [(T("app", "orders"), T("app", "orders_old"))]
    assert s.tables == [T("app", "orders"), T("app", "orders_old")]


def test_online_schema_change_cut_over_is_two_renames_in_one_statement() -> None:
    s = parsed("RENAME TABLE `shop`.`orders` TO `shop`.`_orders_old`, "
               "`shop`.`_orders_gho` TO `shop`.`orders`", "other")
    assert s.kind == "rename_table"
    assert s.renames == [(T("shop", "orders"), T("shop", "_orders_old")),
                         (T("shop", "_orders_gho"), T("shop", "orders"))]
    assert set(s.tables) == {T("shop", "orders"), T("shop", "_orders_old"),
                             T("shop", "_orders_gho")}


def test_rename_tables_across_databases_and_lines() -> None:
    s = parsed("RENAME TABLES\n  a TO archive.a, -- first\n  b TO c /* second */")
    assert s.renames == [(T("app", "a"), T("archive", "a")), (T("app", "b"), T("app", "c"))]


# -- indexes, databases, other objects -------------------------------------------------------


@pytest.mark.parametrize(("sql", "kind", "table"), [
    ("CREATE INDEX idx_total ON orders (total)", "create_index", T("app", "orders")),
    ("CREATE UNIQUE INDEX idx ON shop.orders (a, b)", "create_index", T("shop", "orders")),
    ("CREATE INDEX idx USING BTREE ON orders (a)", "create_index", T("app", "orders")),
    ("CREATE INDEX IF NOT EXISTS idx ON orders (a)", "create_index", T("app", "orders")),
    ("CREATE INDEX `ON` ON orders (a)", "create_index", T("app", "orders")),
    ("CREATE FULLTEXT INDEX ft ON orders (note)", "create_index", T("app", "orders")),
    ("DROP INDEX idx ON orders", "drop_index", T("app", "orders")),
    ("DROP INDEX `PRIMARY` ON `shop`.`orders`", "drop_index", T("shop", "orders")),
])
def test_index_statements_name_their_table(sql: str, kind: str, table: TableName) -> None:
    s = parsed(sql)
    assert (s.kind, s.tables) == (kind, [table])


@pytest.mark.parametrize(("sql", "kind", "database"), [
    ("CREATE DATABASE shop", "create_database", "shop"),
    ("CREATE DATABASE IF NOT EXISTS `shop`", "create_database", "shop"),
    ("CREATE SCHEMA shop DEFAULT CHARACTER SET utf8mb4", "create_database", "shop"),
    ("CREATE DATABASE shop /*!40100 DEFAULT CHARACTER SET latin1 */", "create_database", "shop"),
    ("DROP DATABASE shop", "drop_database", "shop"),
    ("DROP SCHEMA IF EXISTS `shop`", "drop_database", "shop"),
    ("ALTER DATABASE shop CHARACTER SET utf8mb4", "alter_database", "shop"),
    # Without a name ALTER DATABASE changes the default database.
    ("ALTER DATABASE CHARACTER SET utf8mb4", "alter_database", "app"),
    ("ALTER DATABASE DEFAULT COLLATE utf8mb4_bin", "alter_database", "app"),
    ("ALTER SCHEMA `DEFAULT` COLLATE utf8mb4_bin", "alter_database", "DEFAULT"),
])
def test_database_statements_name_their_database(sql: str, kind: str, database: str) -> None:
    s = parsed(sql)
    assert (s.kind, s.database, s.tables) == (kind, database, [])


def test_create_and_drop_database_change_tables() -> None:
    assert parsed("CREATE DATABASE shop").changes_tables
    assert parsed("DROP DATABASE shop").changes_tables
    assert not parsed("ALTER DATABASE shop CHARACTER SET utf8mb4").changes_tables


@pytest.mark.parametrize("sql", [
    "CREATE VIEW v AS SELECT 1",
    "CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW v AS "
    "SELECT 1",
    "DROP VIEW IF EXISTS v",
    "CREATE DEFINER=`root`@`localhost` TRIGGER trg BEFORE INSERT ON orders FOR EACH ROW "
    "SET NEW.a = 1",
    "CREATE PROCEDURE p() BEGIN SELECT 1; END",
    "DROP FUNCTION IF EXISTS f",
    "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO DELETE FROM orders",
])
def test_views_routines_triggers_and_events_are_other_ddl(sql: str) -> None:
    s = parsed(sql)
    assert s.kind == "other"
    assert not s.changes_tables


@pytest.mark.parametrize("sql", [
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT sp1",
    "XA START 'x'",
    "GRANT SELECT ON shop.* TO 'reader'@'%'",
    "REVOKE ALL ON *.* FROM 'x'@'%'",
    "CREATE USER 'reader'@'%' IDENTIFIED BY 'secret'",
    "ALTER USER 'reader'@'%' IDENTIFIED BY 'other'",
    "DROP USER IF EXISTS 'reader'@'%'",
    "RENAME USER 'a'@'%' TO 'b'@'%'",
    "CREATE ROLE analyst",
    "FLUSH PRIVILEGES",
    "INSERT INTO orders VALUES (1)",
    "SET @@session.sql_mode = ''",
    "/* only a comment */",
    "",
])
def test_statements_that_are_not_ddl_give_none(sql: str) -> None:
    assert parse_ddl(sql, "app") is None


def test_leading_comments_do_not_hide_the_verb() -> None:
    s = parsed("/* gh-ost */ -- cut-over\n# by tool\n  RENAME TABLE a TO b")
    assert s.kind == "rename_table"


def test_table_name_renders_qualified_only_with_a_database() -> None:
    assert str(T("shop", "orders")) == "shop.orders"
    assert str(T(None, "orders")) == "orders"
