"""Source URLs: ``mysql://user[:password]@host[:port]``, ``mariadb://...``, ``file:///path``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from changestream.model.errors import ConfigError


@dataclass(slots=True, frozen=True)
class SourceSpec:
    """Where the binlog comes from: a server (``connection`` for PyMySQL) or files."""

    kind: str  # "server" or "files"
    flavor: str | None = None  # "mysql", "mariadb" or None (find out)
    connection: dict[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] = ()

    def describe(self) -> str:
        """The source without its password, for logs and status."""
        if self.kind == "files":
            return "file://" + ",".join(self.paths)
        c = self.connection
        return f"{self.flavor or 'mysql'}://{c.get('user', '')}@{c.get('host')}:{c.get('port')}"


def parse_source_url(url: str, *, password: str | None = None) -> SourceSpec:
    """Read a source URL; ``password`` (from the environment or a file) wins over one in
    the URL. Raises :class:`ConfigError` naming what is wrong."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracketed host that is no IPv6 address, ...
        raise ConfigError(f"source: not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme == "file":
        path = unquote(parts.path)
        if parts.netloc and parts.netloc not in ("", "localhost"):
            path = f"/{parts.netloc}{path}" if not path.startswith("/") else path
        if not path:
            raise ConfigError(f"source {url!r}: file:// needs a path to binlog files")
        if not os.path.exists(path):
            raise ConfigError(f"source {url!r}: {path} does not exist")
        return SourceSpec("files", paths=(path,))
    if scheme not in ("mysql", "mariadb"):
        raise ConfigError(f"source {url!r}: use mysql://, mariadb:// or file://")
    if not parts.hostname:
        raise ConfigError(f"source {url!r}: no host")
    try:
        port = parts.port or 3306
    except ValueError:
        raise ConfigError(f"source {url!r}: the port is not a number") from None
    connection: dict[str, Any] = {
        "host": parts.hostname,
        "port": port,
        "user": unquote(parts.username or "root"),
        "password": password if password is not None else unquote(parts.password or ""),
    }
    return SourceSpec("server", scheme, connection)
