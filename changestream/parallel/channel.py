"""Python objects between the router and a decode worker over a stream socket: each one
pickled behind its length.

What ``multiprocessing.connection.Connection`` does on a socket, without its imports (the
``multiprocessing`` package, read at every start of the router and of each worker); a
message is read into one buffer of its size. Data wrapped by :func:`beside_the_pickle`
travels after the pickle, not in it (pickle's protocol 5 out-of-band buffers): the
receiver gets a read-only ``memoryview`` of the buffer it read it into, where unpickling
bytes would copy them once more with the interpreter lock held (about 30 ms for 60 MB of
a decode worker's records, on the router's side)."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

_LENGTH = struct.Struct("!Q")
_HEADER = struct.Struct("!QQ")  # the pickle's length, how many buffers follow it
#: Smaller data goes inside the pickle even when wrapped (a buffer of its own costs a
#: system call each way).
_BESIDE_FROM = 64 << 10
# Below this a message goes in one write, with its length; above it the copy would cost
# more than a second system call.
_JOINED = 64 << 10


class Channel:
    """One end of a socket pair carrying pickled objects. ``recv`` raises ``EOFError``
    once the other end is closed."""

    def __init__(self, sock: socket.socket):
        self.sock = sock

    @classmethod
    def of_fd(cls, fd: int) -> Channel:
        """The channel on an inherited stream socket's file descriptor."""
        return cls(socket.socket(fileno=fd))

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj: Any) -> None:
        buffers: list[pickle.PickleBuffer] = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        raws = [buffer.raw() for buffer in buffers]
        header = _HEADER.pack(len(data), len(raws)) + b"".join(
            _LENGTH.pack(raw.nbytes) for raw in raws)
        if len(data) < _JOINED:
            self.sock.sendall(header + data)
        else:
            self.sock.sendall(header)
            self.sock.sendall(data)
        for raw in raws:
            self.sock.sendall(raw)

    def recv(self) -> Any:
        length, count = _HEADER.unpack(self._read(_HEADER.size))
        sizes = struct.unpack(f"!{count}Q", self._read(_LENGTH.size * count)) if count else ()
        data = self._read(length)
        return pickle.loads(data, buffers=[self._read(size) for size in sizes])

    def _read(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = self.sock.recv_into(view[got:], size - got)
            if n == 0:
                raise EOFError("the other end closed the channel")
            got += n
        return buffer

    def shutdown(self) -> None:
        """End both directions at once: a thread blocked in :meth:`recv` gets ``EOFError``
        (a close alone would not wake it)."""
        self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()


def beside_the_pickle(data: bytes) -> Any:
    """``data`` to be sent by :meth:`Channel.send` after the pickle rather than in it
    (when it is big enough to pay): the receiver gets a read-only ``memoryview``."""
    return pickle.PickleBuffer(data) if len(data) >= _BESIDE_FROM else data
