"""A private MariaDB server (``mariadbd``), set up for change capture."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymysql

from changestream.devserver.base import EmbeddedServer
from changestream.devserver.errors import ServerStartError
from changestream.devserver.options import ServerOptions
from changestream.devserver.programs import find_program, install_prefix
from changestream.devserver.templates import data_template

#: Options that shape the data files: ``mariadb-install-db`` is given them too.
FILE_SHAPING_OPTIONS = ("--innodb-log-file-size=", "--innodb-page-size=",
                        "--innodb-data-file-path=")

__all__ = ["EmbeddedMariaDB"]


class EmbeddedMariaDB(EmbeddedServer):
    """A private MariaDB server (Debian's ``mariadb-server``), set up for change capture.

    Runs ``mariadbd`` with ROW binlogs, full row images, full row metadata and annotated
    row events. ``options`` are appended to the command line, so they override these
    defaults, e.g. ``{"binlog_row_metadata": "MINIMAL", "binlog_checksum": "NONE"}``.
    ``mariadbd`` and ``launcher`` run another build (see :mod:`changestream.devserver`); its
    ``mariadb-install-db`` is taken from beside it.
    """

    flavor = "mariadb"
    binlog_basename = "mariadb-bin"
    binlog_status_sql = "SHOW MASTER STATUS"

    def __init__(
        self,
        *,
        port: int | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        options: ServerOptions | None = None,
        startup_timeout: float = 60.0,
        keep_files: bool = False,
        binlog: bool = True,
        dies_with_parent: bool = False,
        mariadbd: str | os.PathLike[str] | None = None,
        install_db: str | os.PathLike[str] | None = None,
        launcher: Sequence[str] = (),
    ) -> None:
        super().__init__(
            port=port,
            base_dir=base_dir,
            options=options,
            startup_timeout=startup_timeout,
            keep_files=keep_files,
            binlog=binlog,
            dies_with_parent=dies_with_parent,
        )
        install = "install it with: apt-get install mariadb-server"
        self.mariadbd = find_program(mariadbd, "mariadbd", "/usr/sbin/mariadbd", install)
        self.launcher = list(launcher)
        self.prefix = install_prefix(self.mariadbd)
        beside = self.prefix / "bin/mariadb-install-db" if self.prefix else None
        self.install_db = find_program(
            install_db or (beside if beside and beside.exists() else None),
            "mariadb-install-db", "/usr/bin/mariadb-install-db", install)

    def _prefix_paths(self) -> list[str]:
        """Where a server from another prefix finds its files (the compiled-in ones are
        the host's /usr)."""
        if self.prefix is None:
            return []
        share = self.prefix / "share/mariadb"
        return [
            f"--basedir={self.prefix}",
            f"--lc-messages-dir={share}",
            f"--character-sets-dir={share / 'charsets'}",
            f"--plugin-dir={self.prefix / 'lib/mysql/plugin'}",
        ]

    def _initialize(self) -> None:
        # A data directory is copied from one made once per build (mariadb-install-db runs
        # a bootstrap server: it was most of a private server's start, and a schema
        # history's shadow server starts with every new router).
        shutil.copytree(self._template(), self.data_dir, symlinks=True)

    def _template(self) -> Path:
        """An initialised data directory to copy, made once per ``mariadbd`` build."""
        stat = Path(self.mariadbd).stat()
        return data_template("mariadb-templates", (
            self.mariadbd, stat.st_size, stat.st_mtime_ns, self.install_db, self.launcher,
            self._user_args(), self._prefix_paths(), self._file_args()), "mysql",
            lambda data_dir, scratch: self._install_db(data_dir, scratch / "tmp"))

    def _file_args(self) -> list[str]:
        """The server options that shape the files ``mariadb-install-db`` makes: it makes
        them so (and each set has a template of its own), and the server takes the copy as
        it is (a shadow server's 16 MB redo log was copied as the default 96 MB one and
        resized at its start: 0.2 s of it)."""
        return [arg for arg in self.extra_args
                if arg.replace("_", "-").startswith(FILE_SHAPING_OPTIONS)]

    def _install_db(self, data_dir: Path, tmp_dir: Path) -> None:
        tmp_dir.mkdir(parents=True, exist_ok=True)
        extra_options: list[str] = []
        env = None
        if self.launcher:
            # mariadb-install-db runs $MYSQLD_BOOTSTRAP (one program) for its bootstrap
            # server, so the launcher goes into a small script. --force skips its host name
            # check, which would run the other build's resolveip under the host's C library.
            bootstrap = self.base_dir / "mariadbd-bootstrap"
            bootstrap.write_text("#!/bin/sh\nexec " + " ".join(
                map(shlex.quote, [*self.launcher, self.mariadbd])) + ' "$@"\n')
            bootstrap.chmod(0o755)
            extra_options = ["--force"]
            env = {**os.environ, "MYSQLD_BOOTSTRAP": str(bootstrap)}
        extra_options += [o for o in self._prefix_paths() if not o.startswith("--basedir=")]
        command = [
            self.install_db,
            "--no-defaults",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            f"--datadir={data_dir}",
            f"--tmpdir={tmp_dir}",
            *self._user_args(),
            *self._file_args(),
            *extra_options,
        ]
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        if result.returncode != 0:
            output = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
            raise ServerStartError(f"mariadb-install-db failed ({result.returncode}):\n{output}")

    def _command(self) -> list[str]:
        binlog = [
            f"--log-bin={self.binlog_dir / self.binlog_basename}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--binlog-annotate-row-events=ON",
        ] if self.binlog else []
        return [
            *self.launcher,
            self.mariadbd,
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--tmpdir={self.tmp_dir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--socket={self.socket_path}",
            f"--pid-file={self.base_dir / 'server.pid'}",
            f"--log-error={self.error_log}",
            *binlog,
            "--server-id=1",
            "--character-set-server=utf8mb4",
            *self._user_args(),
            *self._prefix_paths(),
            *self.extra_args,
        ]

    def _after_first_start(self, connection: pymysql.Connection[Any]) -> None:
        # mariadb-install-db creates anonymous users; ''@'localhost' would shadow any
        # 'user'@'%' a test creates and then connects with from 127.0.0.1.
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION sql_log_bin = 0")
            cursor.execute("SELECT host FROM mysql.user WHERE user = ''")
            for (host,) in cursor.fetchall():
                cursor.execute("DROP USER ''@%s", (host,))

    def version(self) -> str:
        """The server's ``--version`` line."""
        return subprocess.run([*self.launcher, self.mariadbd, "--version"],
                              capture_output=True, text=True, check=True).stdout.strip()
