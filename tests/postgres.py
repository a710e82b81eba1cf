"""A private PostgreSQL server for the tests that keep an Iceberg catalog in it (JDBC).

Debian's ``postgresql`` (15), started in a folder of its own on a free port, as the
``postgres`` user when the tests run as root (PostgreSQL refuses to run as root), with a
password (``scram-sha-256``), no fsync (a test's data need not survive a crash of the
machine) and one database.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from tests.servers import skip_or_fail


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """One PostgreSQL server and database ``database`` (user ``postgres``,
    ``password``)."""

    def __init__(self, database: str = "lake", password: str = "lake-secret"):
        self.database = database
        self.user = "postgres"
        self.password = password
        self.port = 0
        self.folder: Path | None = None
        self._bin: Path | None = None

    def _run(self, *command: str) -> None:
        assert self._bin is not None
        argv = [str(self._bin / command[0]), *command[1:]]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL, env={**os.environ, "PGPASSWORD": self.password})

    def start(self) -> PrivatePostgres:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            skip_or_fail("no PostgreSQL (Debian's postgresql package): scripts/install.sh "
                         "--test installs it")
        self._bin = Path(found[-1]).parent
        if os.geteuid() == 0 and shutil.which("runuser") is None:
            skip_or_fail("running as root without runuser: cannot start PostgreSQL")
        self.folder = Path(tempfile.mkdtemp(prefix="changestream-postgres-"))
        password_file = self.folder / "password"
        password_file.write_text(self.password + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            shutil.chown(password_file, "postgres", "postgres")
        data = self.folder / "data"
        self.port = _free_port()
        try:
            self._run("initdb", "-D", str(data), "-U", self.user, "--pwfile",
                      str(password_file), "-A", "scram-sha-256", "--no-sync", "-E", "UTF8")
            self._run("pg_ctl", "-D", str(data), "-w", "-l", str(self.folder / "log"), "-o",
                      f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                      "-c fsync=off -c synchronous_commit=off", "start")
            self._run("createdb", "-w", "-h", str(self.folder), "-p", str(self.port), "-U",
                      self.user, self.database)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            log = (self.folder / "log").read_text() if (self.folder / "log").exists() else ""
            self.stop()
            skip_or_fail(f"PostgreSQL did not start: {str(exc.stderr or '').strip()} "
                         f"{log[-500:]}")
        return self

    @property
    def jdbc_uri(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{self.database}"

    @property
    def sqlalchemy_uri(self) -> str:
        return (f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/"
                f"{self.database}")

    def stop(self) -> None:
        if self.folder is None:
            return
        data = self.folder / "data"
        if (data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError,
                                     subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None
