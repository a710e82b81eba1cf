"""How the router's process asks glibc's allocator to keep its memory."""

from __future__ import annotations

import ctypes

_M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)


def fewer_malloc_arenas(arenas: int = 2) -> bool:
    """Let glibc's malloc use at most ``arenas`` arenas (where the C library is glibc);
    whether it was set.

    glibc gives every thread that allocates its own arena, up to eight per CPU, and gives
    little of them back: the router's threads (reader, workers' answer readers, actors)
    each hold the buffers of a batch of events or records for a moment, and each arena
    keeps its high-water mark; two arenas lowered the router's peak memory at the same speed
    (bench/throughput.py prints the process tree's peak). Call it before threads start (the
    command line does; an application embedding the router decides for its process).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # none that has it
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))
