"""Stopping a Spark session the sink started, without two waits of PySpark's and HotSpot's.

- ``SparkSession.stop()`` shuts PySpark's accumulator server down, whose thread polls for
  that every half second (``socketserver``'s ``serve_forever``): a stop took 0.05 or 0.5 s
  depending on where in the poll it came. A connection to the server wakes the poll.
- When the driver JVM exits (PySpark's gateway sees its stdin close as the Python process
  ends), HotSpot waits up to 300 ms for threads in native code, and Py4J's threads sit in
  socket reads until their Python end goes: a JVM took 0.36 s to exit after its stdin
  closed, 0.06 s once the gateway was shut down first. So at the interpreter's exit the
  gateway of a JVM the sink started is shut down before the JVM's stdin closes. (A
  session stopped earlier keeps its JVM: a later session in the same process uses it.)
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How long the stop waits for the accumulator server's thread before leaving it to
#: PySpark's own shutdown (a handler still reading the JVM's updates polls every second).
WAKE_SECONDS = 2.0


def stop_session(spark: SparkSession) -> None:
    """``spark.stop()``, with the accumulator server's poll woken (module docstring), and
    the JVM's gateway shut down at the interpreter's exit."""
    _stop_accumulator_server(spark.sparkContext)
    spark.stop()
    atexit.unregister(shut_gateway_down)  # registered once, however many stops
    atexit.register(shut_gateway_down)


def _stop_accumulator_server(context: Any) -> None:
    """Shut PySpark's accumulator server down now, waking its poll with connections, so
    that ``SparkContext.stop`` finds it stopped."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None or not hasattr(server, "server_address"):
        return
    server.server_shutdown = True  # its request handler's polls end (PySpark's flag)
    stopper = threading.Thread(target=server.shutdown, name="changestream-accumulators-stop",
                               daemon=True)
    stopper.start()
    address = server.server_address[:2]
    deadline = time.monotonic() + WAKE_SECONDS
    while stopper.is_alive() and time.monotonic() < deadline:
        # A connection the poll sees before the shutdown's flag is handled at once (the
        # handler returns on server_shutdown); one it sees after ends the loop.
        with contextlib.suppress(OSError):
            socket.create_connection(address, timeout=0.5).close()
        stopper.join(0.02)


def shut_gateway_down() -> None:
    """Shut down the Py4J gateway of the JVM PySpark started in this process, and close the
    JVM's stdin so it exits (see the module docstring); nothing when there is none."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - only registered after a session was stopped
        return
    if SparkContext._active_spark_context is not None:
        return  # a session still in use (the caller's own): its JVM stays as PySpark keeps it
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return
    with contextlib.suppress(Exception):  # the JVM may be gone already
        gateway.shutdown()
    with contextlib.suppress(OSError, ValueError):
        if process.stdin is not None:
            process.stdin.close()
    SparkContext._gateway = None
    SparkContext._jvm = None
