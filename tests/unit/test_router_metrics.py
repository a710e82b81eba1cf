"""The router's metrics: histograms kept as Prometheus keeps them, the registry made only
when asked for."""

import subprocess
import sys

from changestream.observe.metrics import RouterMetrics


def _samples(metrics: RouterMetrics) -> dict[str, float]:
    lines = metrics.text().decode().splitlines()
    return {name: float(value) for name, value in
            (line.rsplit(" ", 1) for line in lines if not line.startswith("#"))}


def test_a_value_on_a_bound_counts_in_that_bucket_and_buckets_are_cumulative() -> None:
    metrics = RouterMetrics()
    metrics.batch_delivered(1.0, 2.0, {("d", "t", "insert"): 4})
    metrics.batch_delivered(0.003, None, {("d", "t", "insert"): 1, ("d", "u", "delete"): 2})
    samples = _samples(metrics)
    assert samples['changestream_batch_duration_seconds_bucket{le="0.0025"}'] == 0
    assert samples['changestream_batch_duration_seconds_bucket{le="0.005"}'] == 1
    assert samples['changestream_batch_duration_seconds_bucket{le="0.5"}'] == 1
    assert samples['changestream_batch_duration_seconds_bucket{le="1.0"}'] == 2
    assert samples['changestream_batch_duration_seconds_bucket{le="+Inf"}'] == 2
    assert samples["changestream_batch_duration_seconds_sum"] == 1.003
    assert samples["changestream_delivery_lag_seconds_count"] == 1
    assert samples['changestream_delivery_lag_seconds_bucket{le="1.0"}'] == 0
    assert samples['changestream_delivery_lag_seconds_bucket{le="2.0"}'] == 1
    key = 'changestream_table_changes_delivered_total{database="d",op="insert",table="t"}'
    assert samples[key] == 5
    key = 'changestream_table_changes_delivered_total{database="d",op="delete",table="u"}'
    assert samples[key] == 2


def test_a_negative_lag_is_no_lag_and_status_is_collected_once_given() -> None:
    metrics = RouterMetrics()
    metrics.batch_delivered(0.1, -3.0, {})
    assert _samples(metrics)['changestream_delivery_lag_seconds_bucket{le="0.1"}'] == 1
    metrics.expose_status(lambda: {"connected": 1})  # after the registry was made
    assert _samples(metrics)["changestream_connected"] == 1


def test_prometheus_client_is_imported_only_when_the_registry_is_asked_for() -> None:
    code = ("import sys\nfrom changestream.observe.metrics import RouterMetrics\n"
            "m = RouterMetrics(); m.batch_delivered(0.1, 1.0, {('d', 't', 'insert'): 1})\n"
            "assert 'prometheus_client' not in sys.modules\n"
            "assert b'changestream_table_changes' in m.text()\n"
            "assert 'prometheus_client' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
