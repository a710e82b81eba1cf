"""The control endpoint: a small HTTP server on 127.0.0.1 for status, metrics and pausing.

``GET /status`` (JSON), ``GET /metrics`` (Prometheus text format), ``POST /pause``,
``POST /resume``. With a token, every request needs ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import orjson

log = logging.getLogger("changestream")


class Controllable(Protocol):
    def status(self) -> dict[str, Any]: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


_METRICS = (
    ("changestream_connected", "gauge", "1 while connected to the source", "connected"),
    ("changestream_paused", "gauge", "1 while paused", "paused"),
    ("changestream_seconds_behind_source", "gauge",
     "seconds the reader is behind the server (0 when caught up)", "seconds_behind"),
    ("changestream_transactions_delivered_total", "counter",
     "committed transactions delivered to the sink", "transactions_delivered"),
    ("changestream_changes_delivered_total", "counter", "changes delivered to the sink",
     "changes_delivered"),
    ("changestream_batches_delivered_total", "counter", "batches the sink made durable",
     "batches_delivered"),
    ("changestream_batch_retries_total", "counter", "batches the sink failed and retried",
     "batch_retries"),
    ("changestream_reconnects_total", "counter", "reconnections to the source",
     "reconnects"),
    ("changestream_events_read_total", "counter", "binlog events read", "events_read"),
    ("changestream_worker_segments_total", "counter",
     "segments of transactions handed to decode workers", "worker_segments"),
    ("changestream_uptime_seconds", "gauge", "seconds since the router started",
     "uptime_seconds"),
)


def prometheus_text(status: dict[str, Any]) -> str:
    """``status`` in the Prometheus text exposition format."""
    lines = []
    for name, kind, help_text, key in _METRICS:
        value = status.get(key)
        if value is None:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                  f"{name} {float(value):g}"]
    lines += ["# HELP changestream_queue_depth messages in flight between the router's stages",
              "# TYPE changestream_queue_depth gauge"]
    for queue, depth in (status.get("queue_depths") or {}).items():
        lines.append(f'changestream_queue_depth{{queue="{queue}"}} {depth}')
    position = status.get("delivered_position")
    if position:
        lines += ["# HELP changestream_delivered_position_offset binlog offset after the last "
                  "delivered transaction", "# TYPE changestream_delivered_position_offset gauge",
                  f'changestream_delivered_position_offset{{file="{position["file"]}"}} '
                  f'{position["pos"]}']
    return "\n".join(lines) + "\n"


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
                data = body.encode() if isinstance(body, str) else orjson.dumps(body)
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
                    self._send(200, prometheus_text(server.router.status()),
                               content_type="text/plain; version=0.0.4")
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
                else:
                    self._send(404, {"error": f"no {self.path}: use /pause or /resume"})

        return Handler
