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

import fcntl
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from changestream.embedded import (
    EmbeddedMariaDB,
    EmbeddedServer,
    ServerNotAvailableError,
    ServerOptions,
    ServerStartError,
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

# Options used both to initialise the template and to run from it.
_INIT_ARGS = ["--innodb-redo-log-capacity=16M"]
# Run once while initialising: root must be able to log in over TCP from anywhere.
_INIT_SQL = """\
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
"""


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
    """What a server run from a sid root adds: its root's programs under the root's loader."""

    root: Path
    _launcher: list[str]  # the server program under the root's loader

    def _use_root(self, kind: SidRoot, root: str | os.PathLike[str] | None) -> None:
        self.root = sid_root(kind, Path(root) if root else None)
        self._launcher = root_launcher(self.root, kind.program)

    def tool(self, name: str) -> list[str]:
        """The command that runs the root's ``usr/bin/NAME`` (e.g. ``mysqlbinlog``)."""
        return root_launcher(self.root, f"usr/bin/{name}")

    def version(self) -> str:
        """The server's ``--version`` line, e.g. ``... Ver 9.7.4-2 for Linux on x86_64 ...``."""
        return subprocess.run(
            [*self._launcher, "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()


class PrivateMySQL(SidRootServer, EmbeddedServer):
    """A private MySQL 9.x server with ROW binlogs, full row metadata and GTIDs on.

    Same interface as :class:`changestream.embedded.EmbeddedMariaDB`; ``options`` are
    appended to the command line (e.g. ``["--binlog-transaction-compression=ON"]``).
    Raises :class:`ServerNotAvailableError` when there is no MySQL root.
    """

    flavor = "mysql"
    binlog_basename = "binlog"
    binlog_status_sql = "SHOW BINARY LOG STATUS"

    def __init__(
        self,
        *,
        port: int | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        options: ServerOptions | None = None,
        startup_timeout: float = 60.0,
        keep_files: bool = False,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(
            port=port,
            base_dir=base_dir,
            options=options,
            startup_timeout=startup_timeout,
            keep_files=keep_files,
        )
        self._use_root(MYSQL_ROOT, root)

    def _base_args(self) -> list[str]:
        share = self.root / "usr/share/mysql"
        return [
            "--no-defaults",
            f"--basedir={self.root / 'usr'}",
            f"--lc-messages-dir={share}",
            f"--character-sets-dir={share / 'charsets'}",
            f"--plugin-dir={self.root / 'usr/lib/mysql/plugin'}",
            "--secure-file-priv=",
            *self._user_args(),
            *_INIT_ARGS,
        ]

    def _template(self) -> Path:
        """An initialised data directory to copy, made once per mysqld build and init options."""
        mysqld = self.root / "usr/sbin/mysqld"
        stat = mysqld.stat()
        key = hashlib.sha256(
            repr((str(mysqld), stat.st_size, stat.st_mtime_ns, _INIT_ARGS, _INIT_SQL)).encode()
        ).hexdigest()[:16]
        templates = CACHE_DIR / "mysql-templates"
        template = templates / key
        if (template / "auto.cnf").exists():
            return template
        templates.mkdir(parents=True, exist_ok=True)
        with (templates / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test processes build it once
            if not (template / "auto.cnf").exists():
                self._initialize_template(template)
        return template

    def _initialize_template(self, template: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix=f"{template.name}.", dir=template.parent))
        try:
            init_file = work / "init.sql"
            init_file.write_text(_INIT_SQL)
            command = [
                *self._launcher,
                *self._base_args(),
                "--initialize-insecure",
                f"--datadir={work / 'data'}",
                f"--init-file={init_file}",
                f"--log-error={work / 'init.log'}",
            ]
            started = time.monotonic()
            result = subprocess.run(
                command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
            )
            if result.returncode != 0 or not (work / "data/auto.cnf").exists():
                log = (
                    (work / "init.log").read_text(errors="replace")
                    if (work / "init.log").exists()
                    else ""
                )
                tail = "\n".join((result.stdout + result.stderr + log).splitlines()[-25:])
                raise ServerStartError(
                    f"mysqld --initialize-insecure failed ({result.returncode}):\n{tail}"
                )
            (work / "data").rename(template)
            logger.info(
                "MySQL template data directory %s initialised in %.2fs",
                template,
                time.monotonic() - started,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _initialize(self) -> None:
        shutil.copytree(self._template(), self.data_dir, symlinks=True)
        # Each server needs its own server_uuid (it names the GTIDs); a missing
        # auto.cnf makes mysqld generate a fresh one.
        (self.data_dir / "auto.cnf").unlink()

    def _command(self) -> list[str]:
        return [
            *self._launcher,
            *self._base_args(),
            f"--datadir={self.data_dir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            "--mysqlx=OFF",
            f"--socket={self.socket_path}",
            f"--pid-file={self.base_dir / 'server.pid'}",
            f"--log-error={self.error_log}",
            f"--log-bin={self.binlog_dir / self.binlog_basename}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
            "--server-id=1",
            *self.extra_args,
        ]


class PrivateMariaDB11(SidRootServer, EmbeddedMariaDB):
    """A private MariaDB 11.8 server from the MariaDB sid root, set up as
    :class:`~changestream.embedded.EmbeddedMariaDB` sets up Debian's own (ROW binlog, full
    row images and metadata, annotated row events; MariaDB's GTIDs are always on).

    The data directory is made by the root's ``mariadb-install-db`` (a shell script, run by
    the host's shell) with its bootstrap server run through the root's loader. Raises
    :class:`ServerNotAvailableError` when there is no MariaDB root.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        options: ServerOptions | None = None,
        startup_timeout: float = 60.0,
        keep_files: bool = False,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        self._use_root(MARIADB_ROOT, root)
        super().__init__(
            port=port,
            base_dir=base_dir,
            options=options,
            startup_timeout=startup_timeout,
            keep_files=keep_files,
            mariadbd=self.root / MARIADB_ROOT.program,
            install_db=self.root / "usr/bin/mariadb-install-db",
        )
        # The server's compiled-in paths are the host's /usr (MariaDB 10.11's files).
        self.extra_args = [*self._root_paths(), *self.extra_args]

    def _root_paths(self) -> list[str]:
        share = self.root / "usr/share/mariadb"
        return [
            f"--basedir={self.root / 'usr'}",
            f"--lc-messages-dir={share}",
            f"--character-sets-dir={share / 'charsets'}",
            f"--plugin-dir={self.root / 'usr/lib/mysql/plugin'}",
        ]

    def _mariadbd_command(self) -> list[str]:
        return self._launcher

    def _install_db_extras(self) -> tuple[list[str], dict[str, str]]:
        # mariadb-install-db runs $MYSQLD_BOOTSTRAP (one program) for its bootstrap server,
        # so the loader goes into a small script. --force skips its host name check, which
        # would run the root's resolveip under the host's C library.
        bootstrap = self.base_dir / "mariadbd-bootstrap"
        bootstrap.write_text('#!/bin/sh\nexec ' + " ".join(map(shlex.quote, self._launcher))
                             + ' "$@"\n')
        bootstrap.chmod(0o755)
        options = [opt for opt in self._root_paths() if not opt.startswith("--basedir=")]
        return ["--force", *options], {"MYSQLD_BOOTSTRAP": str(bootstrap)}
