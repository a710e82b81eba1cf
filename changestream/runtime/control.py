"""The control endpoint: a small HTTP server on 127.0.0.1 for status, metrics and pausing.

``GET /status`` (JSON), ``GET /metrics`` (Prometheus text format, the router's own registry:
see :mod:`changestream.observe.metrics`), ``POST /pause``, ``POST /resume``, ``POST /snapshot``
(body ``{"tables": ["db.table", ...], "where": "SQL condition"}``, ``where`` optional: a
snapshot of those tables while running; 202, or 409 while another runs, 400 for a request
it cannot take), ``POST /tables`` (body ``{"action": "add" | "pause" | "resume", "tables":
[...], "snapshot": true}``: tables added to or paused in the included set from the next
transaction boundary, see :mod:`changestream.runtime.router_tables`; 202, 409 or 400 as
for a snapshot). With a token, every request needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson
from prometheus_client import CONTENT_TYPE_LATEST

from changestream.observe.stats import RouterStats

log = logging.getLogger("changestream")


class Controllable(Protocol):
    """What the endpoint serves: a :class:`~changestream.runtime.router.Router`."""

    stats: RouterStats  # its ``metrics`` registry is what /metrics serves

    def status(self) -> dict[str, Any]: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def request_snapshot(self, tables: list[str], where: str | None = None
                         ) -> dict[str, Any]: ...

    def change_tables(self, action: str, tables: list[str], snapshot: bool = True
                      ) -> dict[str, Any]: ...


def _text(body: dict[str, Any], key: str) -> str | None:
    """``body[key]``: a string, or absent."""
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value or None


def _flag(body: dict[str, Any], key: str) -> bool:
    """``body[key]``: true or false, true when absent."""
    value = body.get(key, True)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false")
    return value


class ControlServer:
    """Serves the control endpoint for ``router`` in a background thread."""

    def __init__(self, router: Controllable, port: int = 8750, token: str | None = None,
                 host: str = "127.0.0.1"):
        self.router = router
        self.token = token
        handler = self._handler_class()
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="changestream-control")

    def start(self) -> None:
        self._thread.start()
        log.info("control endpoint on http://127.0.0.1:%d", self.port)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                log.debug("control: " + format, *args)

            def _authorised(self) -> bool:
                if not server.token:
                    return True
                given = self.headers.get("Authorization", "")
                if hmac.compare_digest(given.encode(), f"Bearer {server.token}".encode()):
                    return True
                self._send(401, {"error": "missing or wrong bearer token"},
                           {"WWW-Authenticate": "Bearer"})
                return False

            def _send(self, code: int, body: Any, headers: dict[str, str] | None = None,
                      content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else orjson.dumps(body)
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if not self._authorised():
                    return
                if self.path == "/status":
                    self._send(200, server.router.status())
                elif self.path == "/metrics":
                    self._send(200, server.router.stats.metrics.text(),
                               content_type=CONTENT_TYPE_LATEST)
                else:
                    self._send(404, {"error": f"no {self.path}: use /status or /metrics"})

            def do_POST(self) -> None:
                if not self._authorised():
                    return
                if self.path == "/pause":
                    server.router.pause()
                    self._send(200, {"paused": True})
                elif self.path == "/resume":
                    server.router.resume()
                    self._send(200, {"paused": False})
                elif self.path == "/snapshot":
                    self._call("snapshot", lambda body, tables: server.router.request_snapshot(
                        tables, _text(body, "where")))
                elif self.path == "/tables":
                    self._call("tables", lambda body, tables: server.router.change_tables(
                        str(body.get("action")), tables, _flag(body, "snapshot")))
                else:
                    self._send(404, {"error": f"no {self.path}: use /pause, /resume, "
                                              "/snapshot or /tables"})

            def _call(self, what: str,
                      call: Callable[[dict[str, Any], list[str]], dict[str, Any]]) -> None:
                """Answer a request whose JSON body names tables: 202 with what ``call``
                returns, 400 for a request it cannot take, 409 while a snapshot runs."""
                from changestream.model.errors import ConfigError
                from changestream.runtime.router_snapshots import SnapshotBusyError

                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = orjson.loads(self.rfile.read(length) if length else b"{}")
                    tables = body.get("tables") if isinstance(body, dict) else None
                    if not isinstance(tables, list) or not all(isinstance(t, str)
                                                               for t in tables):
                        raise ValueError('give {"tables": ["db.table", ...]}')
                    self._send(202, call(body, tables))
                except ValueError as exc:
                    self._send(400, {"error": f"{what}: {exc}"})
                except SnapshotBusyError as exc:
                    self._send(409, {"error": str(exc)})
                except ConfigError as exc:
                    self._send(400, {"error": str(exc)})

        return Handler
