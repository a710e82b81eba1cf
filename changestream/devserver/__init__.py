"""Private database servers started on demand: for the quick-start demo and the tests.

An embedded server is a real ``mariadbd`` or ``mysqld`` process with its own data
directory, port and socket under a temporary base directory, configured for
change-data-capture: ROW binlog format, full row images and full row metadata (or, with
``binlog=False``, no binlog at all: the schema history's shadow server). It binds to
127.0.0.1 only and its ``root`` user has an empty password, so it is for local use only.

A server program from another root (e.g. a newer distribution unpacked in a directory)
runs through a ``launcher``: the words put before the program, such as that root's
dynamic loader and its ``--library-path``. Its share and plugin directories are found
next to the program (``<prefix>/sbin/mysqld`` -> ``<prefix>/share/mysql``).

    with EmbeddedMariaDB() as server:
        server.execute(["CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY)"])
        print(server.url, server.binlog_files())

:class:`EmbeddedServer` holds the process handling shared by every flavour; a subclass
says how to initialise a data directory and which command line starts the server.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

import pymysql

__all__ = [
    "EmbeddedMariaDB",
    "EmbeddedMySQL",
    "EmbeddedServer",
    "ServerNotAvailableError",
    "ServerOptions",
    "ServerStartError",
]

logger = logging.getLogger("changestream")

#: Extra server options: ``["--binlog-checksum=NONE"]`` or ``{"binlog_checksum": "NONE"}``.
#: In a mapping, ``True``/``False`` become ``ON``/``OFF`` and ``None`` a bare ``--flag``.
ServerOptions = Mapping[str, str | int | bool | None] | Sequence[str]

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin


class ServerNotAvailableError(RuntimeError):
    """The server program is not installed (or not where it was said to be)."""


class ServerStartError(RuntimeError):
    """The server could not be initialised or did not start accepting connections."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def option_args(options: ServerOptions | None) -> list[str]:
    """Turn extra server options into command-line arguments (given order kept)."""
    if not options:
        return []
    if isinstance(options, str):
        raise TypeError("server options must be a sequence or mapping, not a single string")
    if not isinstance(options, Mapping):
        return [str(option) for option in options]
    args = []
    for key, value in options.items():
        flag = "--" + key.lstrip("-").replace("_", "-")
        if value is None:
            args.append(flag)
        elif isinstance(value, bool):
            args.append(f"{flag}={'ON' if value else 'OFF'}")
        else:
            args.append(f"{flag}={value}")
    return args


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGKILL when the parent dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the finalizer is all there is
        pass


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _kill(process: subprocess.Popen[bytes], owned_dir: str | None) -> None:
    """Last-resort cleanup at garbage collection or interpreter exit."""
    if process.poll() is None:
        process.kill()
        process.wait()
    if owned_dir:
        shutil.rmtree(owned_dir, ignore_errors=True)


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
                preexec_fn=_die_with_parent if self.dies_with_parent else None,
            )
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _kill, self._process, None if self.keep_files else self._owned_dir
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
                time.sleep(0.05)
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
        tail = _tail(self.error_log) or _tail(self.base_dir / "server.out")
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
        """A new PyMySQL connection as root (autocommit on, utf8mb4); ``kwargs`` override."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "charset": "utf8mb4",
            "autocommit": True,
        }
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


def _program(given: str | os.PathLike[str] | None, name: str, default: str,
             install: str) -> str:
    candidate = str(given) if given else shutil.which(name) or default
    if not os.access(candidate, os.X_OK):
        raise ServerNotAvailableError(
            f"server program {name!r} not found (looked for {candidate}); {install}")
    return candidate


def _prefix_of(program: str) -> Path | None:
    """``<prefix>`` of ``<prefix>/sbin/<program>`` when that is not the host's ``/usr``
    (its share and plugin directories are then given to the server explicitly)."""
    prefix = Path(program).parents[1]
    return None if prefix == Path("/usr") else prefix


class EmbeddedMariaDB(EmbeddedServer):
    """A private MariaDB server (Debian's ``mariadb-server``), set up for change capture.

    Runs ``mariadbd`` with ROW binlogs, full row images, full row metadata and annotated
    row events. ``options`` are appended to the command line, so they override these
    defaults, e.g. ``{"binlog_row_metadata": "MINIMAL", "binlog_checksum": "NONE"}``.
    ``mariadbd`` and ``launcher`` run another build (see the module docstring); its
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
        self.mariadbd = _program(mariadbd, "mariadbd", "/usr/sbin/mariadbd", install)
        self.launcher = list(launcher)
        self.prefix = _prefix_of(self.mariadbd)
        beside = self.prefix / "bin/mariadb-install-db" if self.prefix else None
        self.install_db = _program(
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
            f"--datadir={self.data_dir}",
            *self._user_args(),
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
            shutil.rmtree(self.data_dir, ignore_errors=True)
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
    that ``mysqld --initialize-insecure`` makes once per ``mysqld`` build (about 2.5 s
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
        self.mysqld = _program(mysqld, "mysqld", "/usr/sbin/mysqld",
                               "install MySQL 8.0 or later, or give its mysqld")
        self.launcher = list(launcher)
        if "mariadb" in self.version().lower():  # Debian's mariadb-server has a mysqld too
            raise ServerNotAvailableError(f"{self.mysqld} is MariaDB's, not MySQL's mysqld")
        self.prefix = _prefix_of(self.mysqld)

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
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        templates = cache / "changestream" / "mysql-templates"
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
                log = _tail(work / "init.log")
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
