"""Python objects between the router and a decode worker over a stream socket: each one
pickled behind its length.

What ``multiprocessing.connection.Connection`` does on a socket, without its imports (the
``multiprocessing`` package, read at every start of the router and of each worker); a
message is read into one buffer of its size."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

_LENGTH = struct.Struct("!Q")
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
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        header = _LENGTH.pack(len(data))
        if len(data) < _JOINED:
            self.sock.sendall(header + data)
        else:
            self.sock.sendall(header)
            self.sock.sendall(data)

    def recv(self) -> Any:
        (length,) = _LENGTH.unpack(self._read(_LENGTH.size))
        return pickle.loads(self._read(length))

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
