"""A TCP proxy of the tests' own on 127.0.0.1, between the router and a server, that fails
on demand: it freezes the connections it has (they stay open, nothing passes), trickles
the server's bytes, or resets every connection (RST) once a number of the server's bytes
has passed, in the middle of an event."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Any


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket):
        self.client, self.server = client, server
        self.frozen = threading.Event()
        self.closed = False

    def reset(self) -> None:
        """Close both sides with an RST (SO_LINGER 0)."""
        self.closed = True
        for s in (self.client, self.server):
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                s.close()


class FaultyProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target``; see the module docstring."""

    def __init__(self, target: int):
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self.connections = 0
        self.server_bytes = 0  # from the server to the router, in total
        self.trickle = False
        self._reset_at: int | None = None
        self.resets = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def url(self, server_url: str) -> str:
        """``server_url`` through the proxy."""
        head, _, _ = server_url.rpartition(":")
        return f"{head}:{self.port}"

    # -- faults ---------------------------------------------------------------------------

    def freeze(self) -> None:
        """Nothing passes on the connections open now (new ones pass)."""
        with self._lock:
            for pair in self._pairs:
                pair.frozen.set()

    def reset_after(self, server_bytes: int) -> None:
        """Reset every connection once ``server_bytes`` more of the server's bytes passed."""
        with self._lock:
            self._reset_at = self.server_bytes + server_bytes

    # -- forwarding -----------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
                self.connections += 1
            threading.Thread(target=self._pump, args=(pair, client, server, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, server, client, True),
                             daemon=True).start()

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket,
              from_server: bool) -> None:
        try:
            while not pair.closed:
                data = source.recv(65536)
                if not data:
                    break
                while pair.frozen.is_set() and not pair.closed:
                    time.sleep(0.05)
                if pair.closed:
                    break
                if from_server:
                    data = self._count(pair, data)
                    if data is None:
                        return
                if from_server and self.trickle:
                    for i in range(0, len(data), 512):
                        sink.sendall(data[i:i + 512])
                        time.sleep(0.002)
                else:
                    sink.sendall(data)
        except OSError:
            pass
        finally:
            if not pair.closed:
                pair.closed = True
                for s in (source, sink):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

    def _count(self, pair: _Pair, data: bytes) -> bytes | None:
        """``data`` to pass on; ``None`` when a reset is due inside it (half of it is
        passed first, so the router gets part of an event)."""
        with self._lock:
            self.server_bytes += len(data)
            due = self._reset_at is not None and self.server_bytes >= self._reset_at
            if due:
                self._reset_at = None
                self.resets += 1
                pairs = list(self._pairs)
        if not due:
            return data
        with contextlib.suppress(OSError):
            pair.client.sendall(data[:max(1, len(data) // 2)])
        for other in pairs:
            other.reset()
        return None

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.reset()

    def __enter__(self) -> FaultyProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
