"""Stopping the sink's own Spark session: PySpark's accumulator server stopped without
waiting for its poll (sinks/spark/jvm/stop.py)."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

import pytest

accumulators = pytest.importorskip("pyspark.accumulators")

from changestream.sinks.spark.jvm.stop import _stop_accumulator_server  # noqa: E402


def _server(poll_seconds: float) -> tuple[object, threading.Thread]:
    """PySpark's accumulator server, its thread polling every ``poll_seconds``."""
    server = accumulators.AccumulatorServer(("localhost", 0),
                                            accumulators._UpdateRequestHandler, "token")
    thread = threading.Thread(target=server.serve_forever, args=(poll_seconds,), daemon=True)
    thread.start()
    return server, thread


def test_the_accumulator_server_stops_without_waiting_for_its_poll() -> None:
    # A minute's poll: without the wake the stop would wait for it.
    server, thread = _server(60.0)
    _stop_accumulator_server(SimpleNamespace(_accumulatorServer=server))
    thread.join(5)
    assert not thread.is_alive()
    server.shutdown()  # what SparkContext.stop then does: at once, and no error
    with pytest.raises(OSError):
        socket.create_connection(server.server_address[:2], timeout=1)


def test_a_connection_seen_before_the_shutdown_is_handled_quietly(
        capsys: pytest.CaptureFixture[str]) -> None:
    server, thread = _server(60.0)
    server.server_shutdown = True
    # The poll takes this one first: its handler returns at once on server_shutdown.
    socket.create_connection(server.server_address[:2], timeout=1).close()
    _stop_accumulator_server(SimpleNamespace(_accumulatorServer=server))
    thread.join(5)
    assert not thread.is_alive()
    assert "Traceback" not in capsys.readouterr().err


def test_no_server_or_another_object_is_left_alone() -> None:
    _stop_accumulator_server(SimpleNamespace(_accumulatorServer=None))
    _stop_accumulator_server(SimpleNamespace())
