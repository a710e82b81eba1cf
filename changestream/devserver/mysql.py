"""A private MySQL 8.0+ server (``mysqld``), set up for change capture, its data directory
copied from a template initialised once per ``mysqld`` build."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from changestream.cache import cache_folder
from changestream.devserver.base import EmbeddedServer
from changestream.devserver.errors import ServerNotAvailableError, ServerStartError
from changestream.devserver.options import ServerOptions
from changestream.devserver.process import log_tail
from changestream.devserver.programs import find_program, install_prefix

__all__ = ["EmbeddedMySQL"]

logger = logging.getLogger("changestream")


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
        key = hashlib.sha256(repr((self.mysqld, stat.st_size, stat.st_mtime_ns,
                                   _MYSQL_INIT_ARGS, _MYSQL_INIT_SQL)).encode()).hexdigest()[:16]
        templates = cache_folder("mysql-templates")
        template = templates / key
        if (template / "auto.cnf").exists():
            return template
        templates.mkdir(parents=True, exist_ok=True)
        with (templates / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # parallel processes build it once
            if not (template / "auto.cnf").exists():
                self._initialize_template(template)
        return template

    def _initialize_template(self, template: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix=f"{template.name}.", dir=template.parent))
        try:
            init_file = work / "init.sql"
            init_file.write_text(_MYSQL_INIT_SQL)
            command = [*self.launcher, self.mysqld, *self._base_args(), "--initialize-insecure",
                       f"--datadir={work / 'data'}", f"--init-file={init_file}",
                       f"--log-error={work / 'init.log'}"]
            started = time.monotonic()
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                    text=True, check=False)
            if result.returncode != 0 or not (work / "data/auto.cnf").exists():
                log = log_tail(work / "init.log")
                tail = "\n".join((result.stdout + result.stderr + log).splitlines()[-25:])
                raise ServerStartError(
                    f"mysqld --initialize-insecure failed ({result.returncode}):\n{tail}")
            (work / "data").rename(template)
            logger.info("MySQL template data directory %s initialised in %.2fs", template,
                        time.monotonic() - started)
        finally:
            shutil.rmtree(work, ignore_errors=True)

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
