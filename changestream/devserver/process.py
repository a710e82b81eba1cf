"""Operating-system plumbing for a server process: a free port, death with the parent,
the tail of its log, and the last-resort kill and cleanup."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

__all__ = ["alive", "die_with_parent", "free_port", "kill_and_clean_up", "log_tail"]


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited: :func:`alive`, but a zombie (an
    exited process its parent has not reaped yet; an orphan's waits for the init process,
    which in a container or a VM's own init can take seconds, or forever) counts as
    exited."""
    if not alive(pid):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc to tell: it exists
    return state not in ("Z", "X")


def die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGKILL when the parent dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the finalizer is all there is
        pass


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (empty if it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def kill_and_clean_up(process: subprocess.Popen[bytes], owned_dir: str | None) -> None:
    """Last-resort cleanup at garbage collection or interpreter exit."""
    if process.poll() is None:
        process.kill()
        process.wait()
    if owned_dir:
        shutil.rmtree(owned_dir, ignore_errors=True)
