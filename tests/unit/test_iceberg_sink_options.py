"""The Iceberg sink's options checked when it is made (before any Spark starts)."""
import pytest

from changestream.delivery.plugins import make_sink
from changestream.model.errors import ConfigError


def test_control_namespace_is_kept_and_a_bad_one_is_refused_by_its_option_name() -> None:
    pytest.importorskip("pyarrow")  # the unit tier runs without the [spark] extra too
    sink = make_sink("spark:iceberg", warehouse="/tmp/wh", control_namespace="_cs_orders")
    assert sink.control_namespace == "_cs_orders"
    assert make_sink("spark:iceberg", warehouse="/tmp/wh").control_namespace == "_changestream"
    with pytest.raises(ConfigError, match=r"control_namespace='a\.b'"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", control_namespace="a.b")
