"""The Prometheus metrics a router serves on ``GET /metrics``: histograms of batch duration
and of commit-to-delivered lag, changes counted per table and op (on both decode paths),
and every metric the shipped Grafana dashboard names."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from changestream.runtime.control import ControlServer
from changestream.runtime.router import Router, RouterSettings
from changestream.sinks.jsonl import JsonLinesSink
from changestream.transactions.filters import ChangeFilter
from tests.workloads import wait_for

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).parents[2] / "config" / "grafana" / "changestream-dashboard.json"


def _scrape(port: int) -> dict[str, Any]:
    """Every sample of the endpoint by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


#: Dashboard metrics a router serves only while the feature is in use (a standby pair, a
#: snapshot, scheduled verification): the run above uses none of them.
SERVED_WHEN_IN_USE = {"changestream_standby_writer", "changestream_lease_epoch",
                      "changestream_snapshot_rows", "changestream_snapshot_rows_estimated",
                      "changestream_verify_differences"}


def _dashboard_metrics() -> set[str]:
    """The metric names in the dashboard's queries (histograms by their family name)."""
    exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"]
             for t in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {re.sub(r"_(bucket|sum|count)$", "", name)
            for expr in exprs for name in re.findall(r"\bchangestream_\w+", expr)}


@pytest.mark.parametrize("decode_workers", [0, 2])
def test_metrics_count_per_table_and_time_each_batch(
        server: Any, fresh_database: str, tmp_path: Path, decode_workers: int) -> None:
    db = fresh_database
    server.execute([f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
                    f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY)"])
    start = server.binlog_position()
    router = Router(RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                                   filter=ChangeFilter(include=[db]),
                                   decode_workers=decode_workers, decode_workers_wait=True),
                    JsonLinesSink(tmp_path / "out.jsonl"))
    control = ControlServer(router, port=0)
    control.start()
    router.start()
    try:
        server.execute([f"INSERT INTO `{db}`.a VALUES (1, 1), (2, 2), (3, 3)",
                        f"UPDATE `{db}`.a SET v = v + 1 WHERE id < 3",
                        f"DELETE FROM `{db}`.a WHERE id = 3",
                        *[f"INSERT INTO `{db}`.b VALUES ({i})" for i in range(1, 8)]])
        wait_for(lambda: router.status()["changes_delivered"] == 3 + 2 + 1 + 7)
        time.sleep(0.2)  # the sink observes its metrics right after counting the batch
        samples = _scrape(control.port)
    finally:
        router.stop()
        router.wait(30)
        control.stop()

    def changes(table: str, op: str) -> float:
        key = (("database", db), ("op", op), ("table", table))
        return samples.get(("changestream_table_changes_delivered_total", key), 0.0)

    assert (changes("a", "insert"), changes("a", "update"), changes("a", "delete"),
            changes("b", "insert")) == (3, 2, 1, 7)
    batches = samples[("changestream_batches_delivered_total", ())]
    assert samples[("changestream_batch_duration_seconds_count", ())] == batches >= 1
    assert samples[("changestream_batch_duration_seconds_sum", ())] > 0
    # Every batch held a commit time: one lag observation each, none negative or absurd.
    assert samples[("changestream_delivery_lag_seconds_count", ())] == batches
    assert 0 <= samples[("changestream_delivery_lag_seconds_sum", ())] < 60 * batches
    assert samples[("changestream_delivery_lag_seconds_bucket", (("le", "+Inf"),))] == batches
    assert samples[("changestream_worker_segments_total", ())] > 0 or decode_workers == 0

    names = {name for name, _ in samples}
    families = names | {re.sub(r"_(bucket|sum|count|total|created)$", "", n) for n in names}
    missing = sorted(_dashboard_metrics() - families - names - SERVED_WHEN_IN_USE)
    assert missing == [], "the Grafana dashboard names metrics the router does not serve"
    assert samples[("changestream_source_server", (("server", f"{server.host}:{server.port}"),
                                                   ))] == 1
    assert samples[("changestream_tables_paused", ())] == 0


def test_two_routers_in_one_process_keep_their_own_metrics(server: Any, tmp_path: Path) -> None:
    """Each router has a registry of its own (nothing in prometheus_client's global one)."""
    first, second = (Router(RouterSettings(source=server.url), JsonLinesSink(tmp_path / n))
                     for n in ("1.jsonl", "2.jsonl"))
    first.stats.metrics.batch_delivered(0.5, 1.0, {("d", "t", "insert"): 4})
    assert b'database="d"' in first.stats.metrics.text()
    assert b'database="d"' not in second.stats.metrics.text()
    assert first.metrics_registry is not second.metrics_registry
