"""Logging to stderr, as text or as one JSON object per line (stdout stays for records)."""

from __future__ import annotations

import datetime as dt
import logging
import sys

import orjson


class JsonLogFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message"}`` (and ``error`` with an exception)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return orjson.dumps(data).decode()


def configure_logging(level: str = "warning", *, json_lines: bool = False) -> None:
    """Send changestream's logs to stderr at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if json_lines else
                         logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("changestream")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(level.upper())
    # Actor failures are reported by the router; pykka's own log of them (a traceback)
    # only when debugging.
    logging.getLogger("pykka").setLevel("DEBUG" if level.upper() == "DEBUG" else "CRITICAL")
