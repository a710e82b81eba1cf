"""Functions the helper-process tests start in children (``start_python``'s targets)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

from changestream.parallel.channel import Channel


def report(fd: int) -> None:
    """Send what the child has (its pid, parent, open file descriptors, SIGTERM handler,
    a module the parent imported), then wait for the channel to close."""
    channel = Channel.of_fd(fd)
    fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
    channel.send({"pid": os.getpid(), "ppid": os.getppid(), "fds": fds, "channel": fd,
                  "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
                  "parent_module": "tests.helper_parent_marker" in sys.modules,
                  "stdin": os.readlink("/proc/self/fd/0")})
    with contextlib.suppress(EOFError):
        channel.recv()


def fail(fd: int) -> None:
    """Fail at once (the parent sees the channel close and exit status 1)."""
    raise RuntimeError("the helper failed")


def block(fd: int) -> None:
    """Say it started, then sleep past any test's patience."""
    Channel.of_fd(fd).send("started")
    time.sleep(120)


def arrow(fd: int) -> None:
    """Build and sum an Arrow array (the allocator the parent's pyarrow started), send it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    channel = Channel.of_fd(fd)
    channel.send(pc.sum(pa.array(range(1_000_000), pa.int64())).as_py())
    with contextlib.suppress(EOFError):
        channel.recv()
