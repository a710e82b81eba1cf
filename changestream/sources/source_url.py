"""Source URLs: ``mysql://user[:password]@host[:port]``, ``mariadb://...``, ``file:///path``.

A server URL may name several servers, a primary and its replicas, comma-separated:
``mariadb://user@db1:3306,db2:3306``; the router reads one of them and moves to another by
GTID when it is lost (:mod:`changestream.sources.failover`)."""

from __future__ import annotations

import os
from dataclasses import field
from typing import Any
from urllib.parse import unquote, urlsplit

from changestream.model.errors import ConfigError
from changestream.model.record import record


@record(frozen=True)
class SourceSpec:
    """Where the binlog comes from: a server (``connection`` for PyMySQL) or files.

    ``hosts`` are the servers of the set, in the URL's order (one for a plain URL);
    ``connection`` names the one read now (:func:`point_at` moves it)."""

    kind: str  # "server" or "files"
    flavor: str | None = None  # "mysql", "mariadb" or None (find out)
    connection: dict[str, Any] = field(default_factory=dict)
    paths: tuple[str, ...] = ()
    hosts: tuple[tuple[str, int], ...] = ()

    def describe(self) -> str:
        """The source without its password, for logs and status."""
        if self.kind == "files":
            return "file://" + ",".join(self.paths)
        c = self.connection
        hosts = ",".join(f"{h}:{p}" for h, p in self.hosts) if len(self.hosts) > 1 \
            else f"{c.get('host')}:{c.get('port')}"
        return f"{self.flavor or 'mysql'}://{c.get('user', '')}@{hosts}"

    @property
    def server(self) -> str:
        """The server read now, ``host:port``."""
        return f"{self.connection.get('host')}:{self.connection.get('port')}"


def point_at(spec: SourceSpec, host: str, port: int) -> None:
    """Make ``spec``'s connection name another server of its set (its other settings stay)."""
    spec.connection.update(host=host, port=port)


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
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    if "," not in hostlist:
        return _server_spec(url, scheme, parts.netloc, password)
    if parts.path not in ("", "/"):
        raise ConfigError(f"source {url!r}: several servers take no path after the hosts")
    specs = []
    for one in hostlist.split(","):
        if not one.strip():
            raise ConfigError(f"source {url!r}: an empty host in the list of servers")
        specs.append(_server_spec(url, scheme, f"{userinfo}{at}{one.strip()}", password))
    hosts = tuple(h for spec in specs for h in spec.hosts)
    if len(set(hosts)) < len(hosts):
        raise ConfigError(f"source {url!r}: a server is named twice")
    return SourceSpec("server", scheme, specs[0].connection, hosts=hosts)


def _server_spec(url: str, scheme: str, netloc: str, password: str | None) -> SourceSpec:
    """One server of a URL (``netloc``: ``user[:password]@host[:port]``)."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
    except ValueError as exc:
        raise ConfigError(f"source: not a URL: {exc}") from None
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
    return SourceSpec("server", scheme, connection, hosts=((parts.hostname, port),))
