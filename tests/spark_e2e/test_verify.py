"""``changestream verify``: a mirror compared with its source while the router lands a live
workload into it. A clean mirror gives no difference; rows changed, removed and added by
hand behind the router's back are found, and only they (also by the command, exit 1)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import generate_latest

from changestream.actors.batch_settings import BatchSettings
from changestream.delivery.plugins import make_sink
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.transactions.filters import ChangeFilter
from changestream.verify.verifier import Verifier
from tests.servers import shadow_command

pytestmark = [pytest.mark.integration, pytest.mark.spark]

DB, CATALOG = "verify_e2e", "verify"
TAMPERED = range(1, 11)  # rows the workload leaves alone, changed by hand in the mirror


class Workload:
    """Inserts, updates and deletes on both tables until stopped (not on TAMPERED ids)."""

    next_id = 5000  # across workloads: new keys

    def __init__(self, server: Any):
        self.server = server
        self.stop = threading.Event()
        self.statements = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(Workload.next_id)
        conn = self.server.connect(autocommit=True)
        with conn.cursor() as cur:
            while not self.stop.is_set():
                i = rng.randrange(11, 3000)
                kind = rng.random()
                if kind < 0.4:
                    cur.execute(f"UPDATE {DB}.t SET a = a + 1, note = 'u{i}', "
                                f"at = NOW(6) WHERE id = {i}")
                elif kind < 0.6:
                    cur.execute(f"DELETE FROM {DB}.t WHERE id = {i}")
                elif kind < 0.8:
                    Workload.next_id += 1
                    cur.execute(f"INSERT INTO {DB}.t VALUES ({Workload.next_id}, {i}, 'n', "
                                f"{i}.25, NOW(6))")
                else:
                    cur.execute(f"UPDATE {DB}.pair SET v = v + 1 WHERE k = 'k{i % 50}'")
                self.statements += 1
                self.stop.wait(0.005)  # a busy server, not one the router cannot follow
        conn.close()

    def __enter__(self) -> Workload:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(30)


def _exists(spark: Any, name: str) -> bool:
    """Whether table ``name`` is there (``False`` also before the router's sink has set its
    catalog up in the session)."""
    try:
        return bool(spark.catalog.tableExists(name))
    except Exception:  # AnalysisException: no such catalog yet
        return False


def _behind_the_routers_back(spark: Any, statement: str) -> None:
    """Run ``statement`` on a mirror the router also commits to (again when Iceberg refuses
    it for a commit of the router's in between)."""
    for attempt in range(10):
        try:
            spark.sql(statement)
            return
        except Exception as exc:
            if "ValidationException" not in str(exc) or attempt == 9:
                raise


def test_verify_finds_only_the_rows_changed_behind_the_routers_back(
        mariadb: Any, spark: Any, tmp_path: Path) -> None:
    server = mariadb
    server.execute([f"DROP DATABASE IF EXISTS {DB}", f"CREATE DATABASE {DB}",
                    f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, a INT, note VARCHAR(20), "
                    "price DECIMAL(10,2), at DATETIME(6))",
                    f"CREATE TABLE {DB}.pair (k VARCHAR(10), n INT, v INT, "
                    "PRIMARY KEY (n, k))"])  # a key in another order than its columns
    values = ", ".join(f"({i}, {i}, 'r{i}', {i}.5, '2024-01-01 00:00:00.{i:06d}')"
                       for i in range(1, 3001))
    server.execute(f"INSERT INTO {DB}.t VALUES {values}")
    server.execute(f"INSERT INTO {DB}.pair VALUES " + ", ".join(
        f"('k{i % 50}', {i}, {i})" for i in range(400)))
    warehouse = tmp_path / "warehouse"
    options = {"warehouse": str(warehouse), "spark": spark, "catalog": CATALOG}
    settings = RouterSettings(source=server.url, filter=ChangeFilter(include=[DB]),
                              batch=BatchSettings(max_changes=500, max_seconds=0.3),
                              schema=HistorySettings("auto", shadow_command(server)))
    router = Router(settings, make_sink("spark:iceberg", **options))
    router.start()
    target_sink = make_sink("spark:iceberg", **options)
    try:
        from changestream.sinks.spark.iceberg.verify_target import IcebergMirrors

        deadline = time.monotonic() + 180  # the snapshot landed: the warehouse is there
        while not all(_exists(spark, f"{CATALOG}.{DB}.{t}") for t in ("t", "pair")):
            assert time.monotonic() < deadline and not router.wait(0.2)
        target_sink.open()
        verifier = Verifier(settings, IcebergMirrors(target_sink), chunk_rows=400,
                            timeout=120)
        with Workload(server) as work:
            clean = [verifier.verify(f"{DB}.t"), verifier.verify(f"{DB}.pair")]
        assert work.statements > 50
        assert [r.differences for r in clean] == [[], []], [r.as_dict() for r in clean]
        assert clean[0].rows > 2000 and clean[0].chunks >= 5
        assert clean[1].rows + clean[1].left_out == 400

        mirror = f"{CATALOG}.{DB}.t"
        for statement in (f"UPDATE {mirror} SET note = 'tampered' WHERE id = 3",
                          f"DELETE FROM {mirror} WHERE id = 7",
                          f"INSERT INTO {mirror} VALUES (99999, 1, 'ghost', 1.00, "
                          "TIMESTAMP_NTZ '2024-01-01 00:00:00')"):
            _behind_the_routers_back(spark, statement)
        with Workload(server):
            found = verifier.verify(f"{DB}.t")
        assert sorted((d.key, d.kind, d.columns) for d in found.differences) == [
            ((3,), "differs", ("note",)), ((7,), "missing", ()), ((99999,), "extra", ())]
    finally:
        router.stop()
        router.wait(60)
        target_sink.close()

    # On a schedule in the router (sink options), seen in /status and /metrics.
    scheduled = Router(settings, make_sink("spark:iceberg", **options, verify_every="1s",
                                           verify_tables=f"{DB}.t,{DB}.nothing*"))
    scheduled.start()
    try:
        deadline = time.monotonic() + 180
        while not ((scheduled.status()["verify"] or {}).get("tables") or {}):
            assert time.monotonic() < deadline and not scheduled.wait(0.5)
        last = scheduled.status()["verify"]["tables"][f"{DB}.t"]
        assert (last["differences"], sorted(k["kind"] for k in last["keys"])) == \
            (3, ["differs", "extra", "missing"])
        metrics = generate_latest(scheduled.metrics_registry).decode()
        assert f'changestream_verify_differences{{table="{DB}.t"}} 3.0' in metrics
    finally:
        scheduled.stop()
        scheduled.wait(60)

    # The command, in a process of its own, with the router stopped: the same three keys.
    done = subprocess.run(
        [sys.executable, "-m", "changestream.cli", "verify", f"{DB}.t", "--source",
         server.url, "--sink", "spark:iceberg", "--sink-option", f"warehouse={warehouse}",
         "--sink-option", f"catalog={CATALOG}", "--sink-option", "master=local[1]",
         "--sink-option", "conf.spark.ui.enabled=false", "--output", "json",
         "--timeout", "60"],
        capture_output=True, text=True, timeout=600, env={**os.environ})
    assert done.returncode == 1, done.stderr[-3000:]
    report = orjson.loads(done.stdout.splitlines()[-1])
    assert sorted((tuple(k["key"]), k["kind"]) for k in report["keys"]) == [
        ((3,), "differs"), ((7,), "missing"), ((99999,), "extra")]
