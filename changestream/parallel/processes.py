"""Helper processes: plain interpreters started on a function, each with a
:class:`~changestream.parallel.channel.Channel` to it, and their ending.

Not multiprocessing's processes: those start its resource tracker beside them (another
interpreter) and import the parent's main module into each child, which runs a script
that lacks an ``if __name__ == "__main__"`` guard again in every child."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys

from changestream.parallel.channel import Channel


def start_python(module: str, function: str, name: str) -> tuple[Channel, subprocess.Popen[bytes]]:
    """A Python process that runs ``module.function(fd)``, ``fd`` the other end of the
    channel returned; ``name`` shows in its command line. The parent's import path goes with
    it, as multiprocessing would hand it on."""
    ours, theirs = socket.socketpair()
    code = (f"import sys; sys.path[:] = {sys.path!r}; from {module} import {function}; "
            f"{function}({theirs.fileno()})")
    try:
        process = subprocess.Popen([sys.executable, "-c", code, name],
                                   pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return Channel(ours), process


def reap(processes: list[subprocess.Popen[bytes]]) -> None:
    """End helper processes whose channels were closed at once, and wait for them. They
    hold nothing that outlives the channel, and one still starting would otherwise finish
    importing its modules before it saw the channel closed."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(OSError):
                process.terminate()
    for process in processes:
        try:
            process.wait(5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(2.0)
