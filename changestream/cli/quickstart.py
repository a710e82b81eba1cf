"""``changestream quickstart``: the main job on an embedded default.

Starts a private MariaDB with binlogs on, loads a sample shop into it and resets the binlog
(as on a server whose old binlogs were purged), runs the router from it into local Spark as
Iceberg tables (a changelog and a mirror per table): a snapshot, then the changes made
meanwhile (inserts, updates, deletes, a schema change, a rollback, a table without a
primary key), and shows the tables, each mirror checked against the source. Like the
Router, this module wires a source and a sink together, so it may import the Spark sink."""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from changestream.devserver import EmbeddedMariaDB
from changestream.model.changes import binlog_order
from changestream.runtime.router import Router, RouterSettings
from changestream.snapshot.settings import SnapshotSettings
from changestream.transactions.filters import ChangeFilter

TABLES = ("customers", "orders", "order_notes")


def load_shop(server: EmbeddedMariaDB, rng: random.Random, customers: int = 40,
              orders: int = 200) -> None:
    """A small shop with rows already in it: customers, orders, and notes kept in a table
    without a primary key."""
    statements = [
        "CREATE DATABASE shop",
        "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(40), "
        "email VARCHAR(80), created DATETIME(6))",
        "CREATE TABLE shop.orders (id BIGINT UNSIGNED PRIMARY KEY, customer_id INT, "
        "total DECIMAL(10,2), status ENUM('new','paid','shipped'), tags SET('gift','rush'), "
        "placed TIMESTAMP(3))",
        "CREATE TABLE shop.order_notes (order_id BIGINT UNSIGNED, note VARCHAR(80))",
    ]
    names = ["Ada", "Grace", "Linus", "Edsger", "Barbara", "Ken", "Margaret", "Dennis"]
    base = dt.datetime(2026, 1, 1, 9, 0, 0)
    for i in range(1, customers + 1):
        name = f"{rng.choice(names)} {i}"
        created = base + dt.timedelta(minutes=17 * i, microseconds=i)
        statements.append(f"INSERT INTO shop.customers VALUES ({i}, '{name}', "
                          f"'c{i}@example.com', '{created.isoformat(' ')}')")
    for start in range(1, orders + 1, 10):
        statements.append("BEGIN")
        for i in range(start, min(start + 10, orders + 1)):
            total = Decimal(rng.randint(100, 99_999)) / 100
            tags = rng.choice(["", "gift", "rush", "gift,rush"])
            statements.append(f"INSERT INTO shop.orders VALUES ({i}, {rng.randint(1, customers)}, "
                              f"{total}, 'new', '{tags}', '2026-02-01 10:00:00.{i % 1000:03d}')")
        statements.append("COMMIT")
    statements.append("INSERT INTO shop.order_notes VALUES (1, 'call before delivery'), "
                      "(2, 'gift wrap'), (2, 'gift wrap')")
    server.execute(statements)


def change_shop(server: EmbeddedMariaDB, rng: random.Random, customers: int = 40,
                orders: int = 200) -> None:
    """What happens next: new orders, updates, deletes, a schema change, a rolled-back
    transaction, a note deleted."""
    statements = ["BEGIN"]
    for i in range(orders + 1, orders + 21):
        statements.append(f"INSERT INTO shop.orders VALUES ({i}, {rng.randint(1, customers)}, "
                          f"{Decimal(rng.randint(100, 9_999)) / 100}, 'new', 'rush', "
                          f"'2026-02-02 11:00:00.{i % 1000:03d}')")
    statements.append("COMMIT")
    for i in range(1, orders + 1, 3):
        statements.append(f"UPDATE shop.orders SET status = 'paid' WHERE id = {i}")
    statements += [
        "BEGIN",
        "UPDATE shop.orders SET status = 'shipped', total = total * 2",
        "ROLLBACK",  # never happened: the router drops it
        "ALTER TABLE shop.customers ADD COLUMN vip BOOLEAN NOT NULL DEFAULT FALSE",
        "UPDATE shop.customers SET vip = TRUE WHERE id % 7 = 0",
        "DELETE FROM shop.orders WHERE id % 25 = 0",
        "DELETE FROM shop.order_notes WHERE order_id = 1",
    ]
    server.execute(statements)


def _normal(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, set | frozenset | list | tuple):
        return tuple(sorted(value))
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal) and value == value.to_integral_value() and \
            value.as_tuple().exponent == 0:
        return int(value)  # BIGINT UNSIGNED is decimal(20,0) in Spark
    return value


def source_rows(server: EmbeddedMariaDB, table: str) -> list[tuple[Any, ...]]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(f"SELECT * FROM shop.{table}")
            rows = cur.fetchall()
    finally:
        conn.close()
    out = []
    for row in rows:
        values = list(row)
        if table == "orders":  # the SET column comes as 'a,b' text; Spark has array<string>
            values[4] = tuple(sorted(filter(None, values[4].split(","))))
        out.append(tuple(_normal(v) for v in values))
    return sorted(out, key=repr)


def mirror_rows(spark: Any, table: str) -> list[tuple[Any, ...]]:
    frame = spark.sql(f"SELECT * FROM changestream.shop.{table}")
    return sorted((tuple(_normal(v) for v in row) for row in frame.collect()), key=repr)


def run_quickstart(folder: Path, *, rows: int = 200) -> bool:
    """The whole quick start in ``folder`` (emptied first; the warehouse stays there
    afterwards); True when every mirror table equals its source table."""
    from changestream.sinks.spark.jvm.class_sharing import default_folder
    from changestream.sinks.spark.jvm.jars import iceberg_jars
    from changestream.sinks.spark.jvm.stop import stop_session
    from changestream.sinks.spark.session import iceberg_conf, start_session
    from changestream.sinks.spark.sink import SparkSink

    if folder.exists():
        shutil.rmtree(folder)
    warehouse = folder / "warehouse"
    say = print
    say(f"changestream quick start in {folder}")
    with EmbeddedMariaDB(base_dir=folder / "mariadb") as server:
        say(f"1. private MariaDB started on {server.url} (binlogs in {server.binlog_dir})")
        rng = random.Random(7)
        load_shop(server, rng, orders=rows)
        server.execute("RESET MASTER")
        say(f"2. shop loaded: shop.customers, shop.orders ({rows} orders), shop.order_notes "
            "(no primary key); then RESET MASTER: no binlog holds these rows")
        began = time.monotonic()
        # The class-data archive the install script wrote (docs/sinks.md).
        spark = start_session(conf=iceberg_conf("changestream", warehouse),
                              jars=iceberg_jars(None), app_name="changestream-quickstart",
                              quiet=True, class_cache=default_folder())
        say(f"3. local Spark {spark.version} started ({time.monotonic() - began:.1f}s)")
        sink = SparkSink("iceberg", warehouse=warehouse, spark=spark)
        router = Router(RouterSettings(source=server.url,
                                       position_file=str(folder / "position.json"),
                                       filter=ChangeFilter(include=["shop"]),
                                       snapshot=SnapshotSettings("initial", chunk_rows=50)),
                        sink)
        began = time.monotonic()
        router.start()
        _until(router, lambda status: (status.get("snapshot") or {}).get("finished"))
        say("4. router started: a snapshot of the shop's tables (chunks of 50 rows, no "
            "lock) landed; it goes on streaming")
        change_shop(server, rng, orders=rows)
        say("5. more changes written while it runs: new orders, updates, deletes, an ALTER, "
            "a rolled-back transaction")
        _until_caught_up(router, server)
        router.stop()
        router.wait(60)
        st, snap = router.stats.delivery, router.status()["snapshot"] or {}
        say(f"6. router delivered {snap.get('rows', 0)} snapshot rows of "
            f"{snap.get('tables_total', 0)} tables in {snap.get('chunks', 0)} chunks and "
            f"{st.changes_delivered - snap.get('rows', 0)} changes, "
            f"in {st.batches_delivered} batches ({time.monotonic() - began:.1f}s) into Iceberg "
            f"tables in {warehouse}")
        all_equal = True
        for table in TABLES:
            source, mirror = source_rows(server, table), mirror_rows(spark, table)
            equal = source == mirror
            all_equal &= equal
            changes = spark.sql(f"SELECT _op, count(*) AS n FROM "
                                f"changestream.shop.{table}__changelog GROUP BY _op "
                                "ORDER BY _op").collect()
            summary = ", ".join(f"{r['_op']} {r['n']}" for r in changes)
            say(f"\n   changestream.shop.{table}: {len(mirror)} rows, "
                f"{'equal to' if equal else 'DIFFERENT FROM'} shop.{table} on MariaDB; "
                f"changelog: {summary}")
        say("\n   SELECT id, name, vip FROM changestream.shop.customers ORDER BY id LIMIT 5")
        spark.sql("SELECT id, name, vip FROM changestream.shop.customers ORDER BY id "
                  "LIMIT 5").show(truncate=False)
        say("   SELECT _op, _transaction_id, _commit_ts, id, status FROM "
            "changestream.shop.orders__changelog WHERE id = 1 ORDER BY _binlog_file, _binlog_pos, "
            "_seq")
        spark.sql("SELECT _op, _transaction_id, _commit_ts, id, status FROM "
                  "changestream.shop.orders__changelog WHERE id = 1 "
                  "ORDER BY _binlog_file, _binlog_pos, _seq").show(truncate=False)
        stop_session(spark)
    say(f"Done: every mirror table equals its source table: {'yes' if all_equal else 'NO'}.")
    say(f"Look again with Spark at the Iceberg warehouse {warehouse} (catalog type 'hadoop').")
    return all_equal


def _until(router: Router, done: Callable[[dict[str, Any]], Any],
           timeout: float = 300) -> None:
    """Until ``done(router.status())`` says so (the router failing raises its error)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if router.wait(0.2):
            return
        if done(router.status()):
            return
    raise TimeoutError(f"the router did not get there within {timeout:.0f}s")


def _until_caught_up(router: Router, server: EmbeddedMariaDB) -> None:
    """Until everything the server has now is delivered."""
    head = binlog_order(*server.binlog_position())

    def caught_up(status: dict[str, Any]) -> bool:
        delivered = status.get("delivered_position") or {}
        return bool(delivered.get("file")) and binlog_order(
            delivered["file"], int(delivered["pos"])) >= head

    _until(router, caught_up)


def main(args: argparse.Namespace) -> int:
    """Exit 0 when every mirror equals its source."""
    return 0 if run_quickstart(Path(args.dir).absolute(), rows=args.rows) else 1
