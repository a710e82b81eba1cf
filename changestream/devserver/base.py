"""The process handling every private server shares: data directory, start, stop and
cleanup, connections; a flavour subclass says how to initialise and run its server."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

import pymysql

from changestream.devserver.errors import ServerStartError
from changestream.devserver.options import ServerOptions, option_args
from changestream.devserver.process import (
    die_with_parent,
    free_port,
    kill_and_clean_up,
    log_tail,
)

__all__ = ["EmbeddedServer"]

logger = logging.getLogger("changestream")

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin


class EmbeddedServer:
    """A private MySQL-family server process; subclasses supply the flavour specifics.

    Files live under ``base_dir`` (a new temporary directory unless given): ``data/``,
    ``binlog/``, ``error.log`` and the socket. A temporary base directory is removed by
    :meth:`close` (and by leaving the ``with`` block) unless ``keep_files`` is set;
    :meth:`stop` only stops the process, so :meth:`start` can bring it back on the same data.
    """

    flavor: ClassVar[str] = ""
    binlog_basename: ClassVar[str] = "binlog"
    #: Statement that reports the current binlog file and position.
    binlog_status_sql: ClassVar[str] = "SHOW MASTER STATUS"

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
    ) -> None:
        self.host = "127.0.0.1"
        self.user = "root"
        self.password = ""
        self._port = port
        self._auto_port = port is None
        self._given_base = Path(base_dir) if base_dir is not None else None
        self._base: Path | None = self._given_base
        self._owned_dir: str | None = None
        self.extra_args = option_args(options)
        self.startup_timeout = startup_timeout
        self.keep_files = keep_files
        self.binlog = binlog
        # Killed by the kernel when the process that started it dies, even by SIGKILL (a
        # helper server such as the schema history's shadow must not outlive its router).
        self.dies_with_parent = dies_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- flavour hooks ---------------------------------------------------------------

    def _initialize(self) -> None:
        """Create a fresh data directory at :attr:`data_dir`."""
        raise NotImplementedError

    def _command(self) -> list[str]:
        """The command line that runs the server in the foreground."""
        raise NotImplementedError

    def _after_first_start(self, connection: pymysql.Connection[Any]) -> None:
        """Adjust a freshly initialised server (runs once, right after its first start)."""

    # -- paths and addresses -------------------------------------------------------------

    @property
    def base_dir(self) -> Path:
        """Directory holding the data directory, binlogs, logs and socket."""
        if self._base is None:
            self._owned_dir = tempfile.mkdtemp(prefix=f"changestream-{self.flavor}-")
            self._base = Path(self._owned_dir)
        return self._base

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def binlog_dir(self) -> Path:
        """Directory where the server writes its binlog files and their index."""
        return self.base_dir / "binlog"

    @property
    def tmp_dir(self) -> Path:
        """The server's own temporary directory (made when first asked for): a MariaDB
        server that starts removes every ``#sql*`` file in its tmpdir, which in a shared
        ``/tmp`` are other servers' temporary tables in use."""
        path = self.base_dir / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def error_log(self) -> Path:
        return self.base_dir / "error.log"

    @property
    def socket_path(self) -> Path:
        path = self.base_dir / "server.sock"
        if len(str(path)) > _SOCKET_PATH_MAX:  # a deep base_dir: fall back to a short path
            path = Path(tempfile.gettempdir()) / f"cs-{self.flavor}-{os.getpid()}-{id(self)}.sock"
        return path

    @property
    def port(self) -> int:
        """TCP port on 127.0.0.1 (chosen when first asked for, unless given)."""
        if self._port is None:
            self._port = free_port(self.host)
        return self._port

    @property
    def url(self) -> str:
        """Connection URL, e.g. ``mariadb://root@127.0.0.1:3306``."""
        password = f":{self.password}" if self.password else ""
        return f"{self.flavor}://{self.user}{password}@{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _user_args(self) -> list[str]:
        # The server refuses to run as root unless told to; as anyone else --user only warns.
        return ["--user=root"] if os.geteuid() == 0 else []

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Initialise the data directory if needed, start the server and wait until it
        accepts connections. Raises :class:`ServerStartError` with the error log's tail."""
        if self.running:
            return self
        if not self.data_dir.exists():
            started = time.monotonic()
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self._initialize()
            logger.debug(
                "%s data directory initialised in %.2fs", self.flavor, time.monotonic() - started
            )
        self.binlog_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                self._launch()
                break
            except ServerStartError as error:
                # An automatically chosen port may have been taken in the meantime.
                if not (self._auto_port and "already in use" in str(error)) or attempt == 2:
                    raise
                logger.info("%s port %d was taken, trying another", self.flavor, self.port)
                self._port = None
        marker = self.base_dir / "setup-done"
        if not marker.exists():
            with self.connect() as connection:
                self._after_first_start(connection)
            marker.touch()
        return self

    def _launch(self) -> None:
        command = self._command()
        logger.debug("starting %s: %s", self.flavor, " ".join(command))
        started = time.monotonic()
        out = self.base_dir / "server.out"
        with out.open("ab") as out_file:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C in the terminal must not kill it mid-test
                preexec_fn=die_with_parent if self.dies_with_parent else None,
            )
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, kill_and_clean_up, self._process, None if self.keep_files else self._owned_dir
        )
        deadline = started + self.startup_timeout
        while True:
            if self._process.poll() is not None:
                self._process = None
                raise ServerStartError(self._failure(f"exited during startup (see {out})"))
            try:
                pymysql.connect(
                    host=self.host,
                    port=self.port,
                    user=self.user,
                    password=self.password,
                    connect_timeout=2,
                    read_timeout=5,  # something else answering on the port must not hang us
                ).close()
                break
            except pymysql.err.OperationalError as error:
                if error.args and error.args[0] == 1045:  # up, but root cannot log in
                    self._abort()
                    raise ServerStartError(self._failure(f"refused root login: {error}")) from None
                if time.monotonic() > deadline:
                    self._abort()
                    raise ServerStartError(
                        self._failure(
                            f"did not accept connections within {self.startup_timeout:.0f}s"
                        )
                    ) from None
                time.sleep(0.01)  # a refused connection costs little; a start is ~0.2 s
        logger.info(
            "%s server started on %s:%d in %.2fs (%s)",
            self.flavor,
            self.host,
            self.port,
            time.monotonic() - started,
            self.base_dir,
        )

    def _abort(self) -> None:
        assert self._process is not None
        self._process.terminate()
        self._terminate(10.0)
        self._process = None

    def _failure(self, what: str) -> str:
        tail = log_tail(self.error_log) or log_tail(self.base_dir / "server.out")
        return f"{self.flavor} server on port {self.port} {what}; error log tail:\n{tail}"

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down cleanly (SQL ``SHUTDOWN``, then SIGTERM, then SIGKILL).
        Its files stay, so :meth:`start` can run it again."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            try:
                with pymysql.connect(
                    host=self.host,
                    port=self.port,
                    user=self.user,
                    password=self.password,
                    connect_timeout=2,
                    read_timeout=5,
                ) as conn:
                    conn.cursor().execute("SHUTDOWN")
            except pymysql.MySQLError as error:
                logger.debug("SQL shutdown of %s failed (%s), sending SIGTERM", self.flavor, error)
                process.send_signal(signal.SIGTERM)
            self._terminate(timeout)
        self._process = None
        logger.info("%s server on port %d stopped", self.flavor, self.port)

    def _terminate(self, timeout: float) -> None:
        assert self._process is not None
        try:
            self._process.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        logger.warning("%s server did not stop in %.0fs, sending SIGTERM", self.flavor, timeout)
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("%s server ignored SIGTERM, killing it", self.flavor)
            self._process.kill()
            self._process.wait()

    def discard(self) -> None:
        """Kill the server (SIGKILL: no clean shutdown, which takes a fifth of a second or
        more) and remove its temporary base directory: for a server whose files nobody
        reads again (a schema history's shadow server)."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
            logger.debug("%s server on port %d killed (its files are not kept)", self.flavor,
                         self.port)
        self._process = None
        self.close()

    def close(self) -> None:
        """Stop the server and remove its temporary base directory (unless ``keep_files``)."""
        self.stop()
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._owned_dir and not self.keep_files:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None
            self._base = self._given_base

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- using it --------------------------------------------------------------------

    def connect(self, **kwargs: Any) -> pymysql.Connection[Any]:
        """A new PyMySQL connection as root (autocommit on, utf8mb4, no TLS unless ``kwargs``
        ask for it); ``kwargs`` override."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "charset": "utf8mb4",
            "autocommit": True,
        }
        if not any(key.startswith("ssl") for key in kwargs):
            # PyMySQL's default tries TLS and builds a context with the system's CA
            # certificates for each connection, most of a short connection's time: a
            # private server on the loopback has no use for it.
            params["ssl_disabled"] = True
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, sql: str | Sequence[str]) -> list[tuple[Any, ...]]:
        """Run one statement or a list of them on a new connection; returns the rows of
        the last one (empty for statements without a result)."""
        statements = [sql] if isinstance(sql, str) else list(sql)
        rows: list[tuple[Any, ...]] = []
        with self.connect() as connection, connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
                rows = list(cursor.fetchall())
        return rows

    def binlog_position(self) -> tuple[str, int]:
        """Current binlog file name and position (the end of the last written event)."""
        rows = self.execute(self.binlog_status_sql)
        if not rows:
            raise RuntimeError(f"{self.binlog_status_sql} returned nothing: is binlog enabled?")
        return str(rows[0][0]), int(rows[0][1])

    def binlog_files(self) -> list[Path]:
        """Binlog files in the order of the server's index file (oldest first)."""
        index = self.binlog_dir / f"{self.binlog_basename}.index"
        try:
            lines = index.read_text().splitlines()
        except FileNotFoundError:
            return []
        files = []
        for line in filter(None, (line.strip() for line in lines)):
            path = Path(line)
            if not path.is_absolute():  # relative entries are relative to the data directory
                path = self.data_dir / path
            if not path.exists():  # e.g. a path as seen from inside a chroot
                path = self.binlog_dir / path.name
            files.append(path)
        return files

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.url} {state} base_dir={self._base}>"
