"""Helper processes started on a function, each with a
:class:`~changestream.parallel.channel.Channel` to it, and their ending.

A process with one thread (jemalloc's aside) forks them: a child has the parent's modules
already (a new interpreter spent ~0.18 s of CPU on its imports, twice on two CPUs, while
the router started). Once the process has other threads (a fork would copy locks they
hold) or ``CHANGESTREAM_SPAWN_HELPERS`` is set, each is a plain new interpreter.

Not multiprocessing's processes: those start its resource tracker beside them (another
interpreter) and import the parent's main module into each child, which runs a script
that lacks an ``if __name__ == "__main__"`` guard again in every child."""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from typing import Protocol

from changestream.parallel.channel import Channel


class HelperProcess(Protocol):
    """What the parent does with a helper process (a ``subprocess.Popen`` has it)."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


class ForkedProcess:
    """A forked helper, waited for like a ``subprocess.Popen``."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it has exited (negative: the signal that ended it)."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code, waited for up to ``timeout`` seconds (``TimeoutExpired``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"helper process {self.pid}", timeout or 0.0)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def _signal(self, number: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)


#: The signals whose handlers a forked child drops: SIGINT it ignores (an interrupt of the
#: whole process group is the parent's to handle, which then closes the channel), the
#: others end it.
_RESET_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                  signal.SIGUSR2}


#: Threads a fork leaves behind safely: jemalloc's (pyarrow's allocator) takes its locks
#: around a fork and starts its background thread again in the child when needed.
_FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})


def _one_thread() -> bool:
    """Whether this process runs one thread (of any kind: the JVM's gateway and native
    libraries start threads Python's ``threading`` does not list) besides those in
    :data:`_FORK_SAFE_THREADS`."""
    try:
        tasks = os.listdir("/proc/self/task")
        others = 0
        for task in tasks:
            with open(f"/proc/self/task/{task}/comm") as f:
                others += f.read().strip() not in _FORK_SAFE_THREADS
        return others == 1
    except OSError:  # no /proc, or a thread gone meanwhile: not known, so not
        return False


def _forks() -> bool:
    return hasattr(os, "fork") and not os.environ.get("CHANGESTREAM_SPAWN_HELPERS") \
        and _one_thread()


def _close_all_but(kept: int) -> None:
    """Close every file descriptor above 2 but ``kept`` (those /proc lists: a range up
    to the limit of open files can be a million calls)."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 4096))
    for number in open_fds:
        if number > 2 and number != kept:
            with contextlib.suppress(OSError):
                os.close(number)


def _run_forked(ours: socket.socket, theirs: socket.socket, module: str,
                function: str, mask: set[int | signal.Signals]) -> None:
    """In the forked child: let go of everything the parent's work holds open, run
    ``module.function(fd)`` and exit, never returning into the parent's code (``mask``:
    the signals blocked before the fork's)."""
    status = 0
    try:
        for number in _RESET_SIGNALS:
            signal.signal(number, signal.SIG_IGN if number == signal.SIGINT
                          else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        # The parent's objects are never freed here: one with a file descriptor would
        # close it, and the number may by then be one of this child's own files.
        gc.freeze()
        ours.close()
        fd = theirs.detach()
        # Nothing of the parent's stays open here: a lock on its lease (flock goes with
        # the open file), its server connections, its output files.
        _close_all_but(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
        # As a new interpreter would: no handlers of the parent's (their files are closed).
        for logger in [logging.getLogger(), *(v for v in logging.root.manager.loggerDict
                                               .values() if isinstance(v, logging.Logger))]:
            logger.handlers.clear()
        getattr(importlib.import_module(module), function)(fd)
    except BaseException:
        status = 1
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def start_python(module: str, function: str, name: str) -> tuple[Channel, HelperProcess]:
    """A Python process that runs ``module.function(fd)``, ``fd`` the other end of the
    channel returned: forked from this one while it has one thread, else a new
    interpreter (``name`` then shows in its command line; the parent's import path goes
    with it, as multiprocessing would hand it on)."""
    ours, theirs = socket.socketpair()
    if _forks():
        # What this process has buffered would be written again by the child.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        # Held back across the fork: a signal the child got before it dropped the parent's
        # handlers would run them there (a SIGTERM from reap: the router's graceful stop).
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _RESET_SIGNALS)
        try:
            pid = os.fork()
            if pid == 0:
                _run_forked(ours, theirs, module, function, mask)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        theirs.close()
        return Channel(ours), ForkedProcess(pid)
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


def reap(processes: list[HelperProcess]) -> None:
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
