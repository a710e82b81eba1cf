"""The command line's allocator setting."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Eight threads allocate after the setting (or none); glibc's malloc_info then lists the
# arenas in use, one <heap nr=...> each.
_ARENAS = """
import ctypes, sys, tempfile, threading
from changestream.runtime.memory import fewer_malloc_arenas
if sys.argv[1] == "limited":
    fewer_malloc_arenas()
hold, ready = [], threading.Barrier(8)
def grab():
    ready.wait()
    hold.append([bytes(200_000) for _ in range(20)])
threads = [threading.Thread(target=grab) for _ in range(8)]
[t.start() for t in threads]; [t.join() for t in threads]
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as out:
    f = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(f))
    libc.fclose(ctypes.c_void_p(f))
    print(open(out.name).read().count("<heap nr="))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_command_line_limits_malloc_arenas_on_glibc() -> None:
    def arenas(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _ARENAS, mode], capture_output=True,
                              text=True, check=True)
        return int(done.stdout)

    assert arenas("limited") <= 2 < arenas("free")
