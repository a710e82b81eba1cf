"""The Iceberg sink's options checked when it is made (before any Spark starts)."""
import pytest

from changestream.delivery.plugins import make_sink
from changestream.model.errors import ConfigError


def test_control_namespace_is_kept_and_a_bad_one_is_refused_by_its_option_name() -> None:
    pytest.importorskip("pyarrow")  # the unit tier runs without the [spark] extra too
    sink = make_sink("spark:iceberg", warehouse="/tmp/wh", control_namespace="_cs_orders")
    assert sink.options.control_namespace == "_cs_orders"
    assert make_sink("spark:iceberg", warehouse="/tmp/wh").options.control_namespace == \
        "_changestream"
    with pytest.raises(ConfigError, match=r"control_namespace='a\.b'"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", control_namespace="a.b")


def test_the_options_are_one_object_parsed_by_the_shared_rules() -> None:
    pytest.importorskip("pyarrow")
    from changestream.sinks.spark.iceberg.options import IcebergOptions

    sink = make_sink("spark:iceberg", warehouse="/tmp/wh", mirror_deletes="equality",
                     arrow_appends="off", maintain_every="10m", verify_every="1h",
                     verify_tables="shop.*, crm.users", master="local[1]")
    assert sink.options == IcebergOptions(
        arrow_appends=False, position_deletes=False, maintain_every=600.0,
        verify_every=3600.0, verify_tables=("shop.*", "crm.users"))
    assert sink.master == "local[1]"  # a session keyword, left to the session
    assert sink.upkeep is not None and sink.verify_schedule() == (3600.0, ("shop.*",
                                                                           "crm.users"))
    given = IcebergOptions(append_new_keys=False)
    assert make_sink("spark:iceberg", warehouse="/tmp/wh", options=given).options is given
    with pytest.raises(ConfigError, match="mirror_deletes='both'"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", mirror_deletes="both")
    with pytest.raises(ConfigError, match="arrow_appends='maybe'"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", arrow_appends="maybe")
    with pytest.raises(ConfigError, match="verify_tables names no table"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", verify_every=60, verify_tables=" ,")
    with pytest.raises(ConfigError, match="given together"):
        make_sink("spark:iceberg", warehouse="/tmp/wh", options=given, arrow_appends=True)
