"""Private MySQL 9.x and MariaDB 11.8 servers for the tests, each run from a Debian sid root.

MySQL is not packaged for bookworm, MariaDB 11.8 only in sid, and sid's servers need a newer
C library than the host's; sid's two server packages conflict. So
``scripts/setup-mysql-root.sh`` unpacks sid with MySQL into one directory (the "MySQL
root") and sid with MariaDB into another (the "MariaDB root"). A server runs from its
root through the root's own dynamic loader::

    ROOT/lib64/ld-linux-x86-64.so.2 --library-path ROOT/usr/lib/<triplet>:ROOT/lib/<triplet> \\
        ROOT/usr/sbin/mysqld --no-defaults --basedir=ROOT/usr --plugin-dir=... ...

so no chroot is needed and every path (data directory, binlogs, socket) is a host path.
MySQL's data directories are copied from a template made once by ``mysqld
--initialize-insecure`` and cached in ``~/.cache/changestream/mysql-templates`` (about 2.5s
saved per start); MariaDB's ``mariadb-install-db`` takes under a second, so it runs each time.
"""

from __future__ import annotations

import logging
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from changestream.devserver import (
    EmbeddedMariaDB,
    EmbeddedMySQL,
    EmbeddedServer,
    ServerNotAvailableError,
)

__all__ = [
    "MARIADB_ROOT",
    "MYSQL_ROOT",
    "PrivateMariaDB11",
    "PrivateMySQL",
    "SidRoot",
    "SidRootServer",
    "mysql_root",
    "require_server",
    "shadow_command",
    "sid_root",
    "skip_or_fail",
]

REQUIRE_ENV = "CHANGESTREAM_REQUIRE_SERVERS"
#: Seconds to wait for a sid root that is still being built (default: do not wait).
ROOT_WAIT_ENV = "CHANGESTREAM_MYSQL_ROOT_WAIT"
COMPLETE_MARKER = ".changestream-complete"
CACHE_DIR = Path.home() / ".cache" / "changestream"


@dataclass(frozen=True)
class SidRoot:
    """A Debian sid root that ``scripts/setup-mysql-root.sh`` builds for one server."""

    label: str  #: what it holds, for messages
    env: str  #: variable that points at another directory
    directory: str  #: default directory under ``~/.cache/changestream``
    program: str  #: the server program, relative to the root

    def default(self) -> Path:
        return Path(os.environ.get(self.env) or CACHE_DIR / self.directory)


MYSQL_ROOT = SidRoot("MySQL", "CHANGESTREAM_MYSQL_ROOT", "mysql-sid-root", "usr/sbin/mysqld")
MARIADB_ROOT = SidRoot(
    "MariaDB 11.8", "CHANGESTREAM_MARIADB_ROOT", "mariadb-sid-root", "usr/sbin/mariadbd"
)
ROOT_ENV = MYSQL_ROOT.env

logger = logging.getLogger("changestream")



def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test, or fail it when ``CHANGESTREAM_REQUIRE_SERVERS`` is set (CI)."""
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set, so this is an error)", pytrace=False)
    pytest.skip(f"{reason} (set {REQUIRE_ENV}=1 to make this an error)")


def sid_root(kind: SidRoot, root: Path | None = None, wait: float | None = None) -> Path:
    """The complete root of ``kind``, waiting up to ``wait`` seconds
    (``CHANGESTREAM_MYSQL_ROOT_WAIT``) for one still being built. Raises
    :class:`ServerNotAvailableError` with what to do."""
    root = root or kind.default()
    if wait is None:
        wait = float(os.environ.get(ROOT_WAIT_ENV) or 0)
    deadline = time.monotonic() + wait
    while not (root / COMPLETE_MARKER).exists():
        if not root.exists() or time.monotonic() >= deadline:
            state = "is incomplete (still being built?)" if root.exists() else "does not exist"
            raise ServerNotAvailableError(
                f"{kind.label} root {root} {state}; build it with scripts/setup-mysql-root.sh "
                f"(as root, about a minute) or point {kind.env} at one"
            )
        time.sleep(2.0)
    if not os.access(root / kind.program, os.X_OK):
        raise ServerNotAvailableError(f"{kind.label} root {root} has no {kind.program}")
    return root


def mysql_root(root: Path | None = None, wait: float | None = None) -> Path:
    """The complete MySQL root (see :func:`sid_root`)."""
    return sid_root(MYSQL_ROOT, root, wait)


def root_launcher(root: Path, program: str) -> list[str]:
    """``[loader, --library-path, dirs, program]``: a sid program under sid's own libc."""
    loaders = sorted(root.glob("lib64/ld-linux*.so.*")) or sorted(
        root.glob("usr/lib/*-linux-gnu/ld-linux*.so.*")
    )
    if not loaders:
        raise ServerNotAvailableError(f"sid root {root} has no dynamic loader")
    lib_dirs = [
        str(path)
        for pattern in ("usr/lib/*-linux-gnu", "lib/*-linux-gnu")
        for path in sorted(root.glob(pattern))
        if path.is_dir()
    ]
    return [str(loaders[0]), "--library-path", ":".join(lib_dirs), str(root / program)]


def require_server(server: EmbeddedServer) -> EmbeddedServer:
    """Start ``server``, turning a missing server program into a skip (or a failure)."""
    try:
        return server.start()
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))


class SidRootServer:
    """What a server run from a sid root adds: the root, and its other programs."""

    root: Path

    def tool(self, name: str) -> list[str]:
        """The command that runs the root's ``usr/bin/NAME`` (e.g. ``mysqlbinlog``)."""
        return root_launcher(self.root, f"usr/bin/{name}")


def _root_command(kind: SidRoot, root: str | os.PathLike[str] | None) -> tuple[Path, list[str]]:
    """The root of ``kind`` and its server program under the root's loader."""
    found = sid_root(kind, Path(root) if root else None)
    return found, root_launcher(found, kind.program)


class PrivateMySQL(SidRootServer, EmbeddedMySQL):
    """A private MySQL 9.x server from the MySQL sid root, with ROW binlogs, full row
    metadata and GTIDs on (see :class:`~changestream.devserver.EmbeddedMySQL`).
    Raises :class:`ServerNotAvailableError` when there is no MySQL root."""

    def __init__(self, *, root: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        self.root, command = _root_command(MYSQL_ROOT, root)
        super().__init__(mysqld=command[-1], launcher=command[:-1], **kwargs)


class PrivateMariaDB11(SidRootServer, EmbeddedMariaDB):
    """A private MariaDB 11.8 server from the MariaDB sid root, set up as
    :class:`~changestream.devserver.EmbeddedMariaDB` sets up Debian's own (ROW binlog, full
    row images and metadata, annotated row events; MariaDB's GTIDs are always on).
    Raises :class:`ServerNotAvailableError` when there is no MariaDB root."""

    def __init__(self, *, root: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        self.root, command = _root_command(MARIADB_ROOT, root)
        super().__init__(mariadbd=command[-1], launcher=command[:-1], **kwargs)


def private_server(flavor: str) -> EmbeddedServer:
    """A private server of ``flavor``, as the benches take it: ``mariadb`` (Debian's) or
    ``mysql`` (MySQL 9 from its sid root)."""
    return PrivateMySQL() if flavor == "mysql" else EmbeddedMariaDB()


def server_version(server: EmbeddedServer) -> tuple[int, int]:
    """The running server's major and minor version (``SELECT VERSION()``)."""
    text = str(server.execute("SELECT VERSION()")[0][0])
    major, minor = text.split("-")[0].split(".")[:2]
    return int(major), int(minor)


def shadow_command(server: EmbeddedServer) -> str | None:
    """The ``schema.shadow_server`` command that runs the same build as ``server`` (None:
    the host's own, found on the PATH)."""
    if isinstance(server, PrivateMySQL):
        return shlex.join([*server.launcher, server.mysqld])
    if isinstance(server, PrivateMariaDB11):
        return shlex.join([*server.launcher, server.mariadbd])
    return None
