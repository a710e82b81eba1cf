"""A private MySQL 8.0+ server (``mysqld``), set up for change capture, its data directory
copied from a template initialised once per ``mysqld`` build."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from changestream.devserver.base import EmbeddedServer
from changestream.devserver.errors import ServerNotAvailableError, ServerStartError
from changestream.devserver.options import ServerOptions
from changestream.devserver.process import log_tail
from changestream.devserver.programs import find_program, install_prefix
from changestream.devserver.templates import data_template

__all__ = ["EmbeddedMySQL"]


# Options used both to initialise MySQL's template data directory and to run from it.
_MYSQL_INIT_ARGS = ["--innodb-redo-log-capacity=16M"]
# Run once while initialising: root must be able to log in over TCP from anywhere.
_MYSQL_INIT_SQL = """\
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
"""


class EmbeddedMySQL(EmbeddedServer):
    """A private MySQL 8.0+ server with ROW binlogs, full row metadata and GTIDs on.

    Same interface as :class:`EmbeddedMariaDB`. Data directories are copied from a template
    that ``mysqld --initialize-insecure`` makes once per ``mysqld`` build (an initialisation
    saved per start), kept in ``~/.cache/changestream/mysql-templates``.
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
        binlog: bool = True,
        dies_with_parent: bool = False,
        mysqld: str | os.PathLike[str] | None = None,
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
        self.mysqld = find_program(mysqld, "mysqld", "/usr/sbin/mysqld",
                                   "install MySQL 8.0 or later, or give its mysqld")
        self.launcher = list(launcher)
        if "mariadb" in self.version().lower():  # Debian's mariadb-server has a mysqld too
            raise ServerNotAvailableError(f"{self.mysqld} is MariaDB's, not MySQL's mysqld")
        self.prefix = install_prefix(self.mysqld)

    def _base_args(self) -> list[str]:
        prefix = self.prefix or Path("/usr")
        share = prefix / "share/mysql"
        paths = [
            f"--basedir={prefix}",
            f"--lc-messages-dir={share}",
            f"--character-sets-dir={share / 'charsets'}",
            f"--plugin-dir={prefix / 'lib/mysql/plugin'}",
        ] if self.prefix else []
        return ["--no-defaults", *paths, "--secure-file-priv=", *self._user_args(),
                *_MYSQL_INIT_ARGS]

    def version(self) -> str:
        """The server's ``--version`` line, e.g. ``... Ver 9.7.4-2 for Linux on x86_64 ...``."""
        return subprocess.run([*self.launcher, self.mysqld, "--version"],
                              capture_output=True, text=True, check=True).stdout.strip()

    def _template(self) -> Path:
        """An initialised data directory to copy, made once per mysqld build."""
        stat = Path(self.mysqld).stat()
        return data_template("mysql-templates", (
            self.mysqld, stat.st_size, stat.st_mtime_ns, _MYSQL_INIT_ARGS, _MYSQL_INIT_SQL),
            "auto.cnf", self._initialize_template)

    def _initialize_template(self, data_dir: Path, scratch: Path) -> None:
        init_file = scratch / "init.sql"
        init_file.write_text(_MYSQL_INIT_SQL)
        command = [*self.launcher, self.mysqld, *self._base_args(), "--initialize-insecure",
                   f"--datadir={data_dir}", f"--init-file={init_file}",
                   f"--log-error={scratch / 'init.log'}"]
        result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                text=True, check=False)
        if result.returncode != 0 or not (data_dir / "auto.cnf").exists():
            log = log_tail(scratch / "init.log")
            tail = "\n".join((result.stdout + result.stderr + log).splitlines()[-25:])
            raise ServerStartError(
                f"mysqld --initialize-insecure failed ({result.returncode}):\n{tail}")

    def _initialize(self) -> None:
        shutil.copytree(self._template(), self.data_dir, symlinks=True)
        # Each server needs its own server_uuid (it names the GTIDs); a missing auto.cnf
        # makes mysqld generate a fresh one.
        (self.data_dir / "auto.cnf").unlink()

    def _command(self) -> list[str]:
        binlog = [
            f"--log-bin={self.binlog_dir / self.binlog_basename}",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
        ] if self.binlog else ["--disable-log-bin"]
        return [
            *self.launcher,
            self.mysqld,
            *self._base_args(),
            f"--datadir={self.data_dir}",
            f"--tmpdir={self.tmp_dir}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            "--mysqlx=OFF",
            f"--socket={self.socket_path}",
            f"--pid-file={self.base_dir / 'server.pid'}",
            f"--log-error={self.error_log}",
            *binlog,
            "--server-id=1",
            *self.extra_args,
        ]
