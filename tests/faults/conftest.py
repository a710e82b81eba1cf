"""The fault suite's parts: a private MariaDB per test (it is killed, stopped, filled), a
writer that keeps committing through server restarts, and the router as a process."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError
from tests.servers import skip_or_fail

TABLE = "CREATE TABLE faults.t (id INT PRIMARY KEY, tx INT, v VARCHAR(40))"


@pytest.fixture
def private_mariadb() -> Iterator[EmbeddedMariaDB]:
    """A MariaDB of this test's own, with database ``faults`` and table ``faults.t``."""
    try:
        server = EmbeddedMariaDB().start()
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))
    server.execute(["CREATE DATABASE faults", TABLE])
    yield server
    server.close()


class Writer(threading.Thread):
    """Commits ``transactions`` transactions of 1 to 10 rows into ``faults.t`` (some rows
    updated or deleted again) over about ``seconds``; when the server goes away it waits
    and reconnects (whether a transaction cut short committed, the binlog says)."""

    def __init__(self, server: Any, transactions: int, seconds: float, seed: int = 1,
                 first_id: int = 1):
        super().__init__(daemon=True)
        self.server, self.transactions, self.seconds = server, transactions, seconds
        self.rng = random.Random(seed)
        self.next_id = first_id
        self.failures = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self._connect()
            for tx in range(self.transactions):
                while True:
                    try:
                        self._commit(conn, tx)
                        break
                    except pymysql.err.OperationalError:
                        self.failures += 1
                        conn = self._connect()
                        self.next_id += 100  # new ids: a try cut short may have committed
                time.sleep(self.seconds / self.transactions)
            conn.close()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _connect(self) -> pymysql.Connection[Any]:
        deadline = time.monotonic() + 120
        while True:
            try:
                return self.server.connect()
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _commit(self, conn: pymysql.Connection[Any], tx: int) -> None:
        size = self.rng.randint(1, 10)
        rows = ", ".join(f"({i}, {tx}, 'row {i}')"
                         for i in range(self.next_id, self.next_id + size))
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO faults.t VALUES {rows}")
            if tx % 5 == 1:
                cur.execute(f"UPDATE faults.t SET v = 'updated' WHERE tx = {tx}")
            if tx % 9 == 4:
                cur.execute(f"DELETE FROM faults.t WHERE tx = {tx} AND id % 2 = 0")
            cur.execute("COMMIT")
        self.next_id += size


def router(url: str, out: Path, position: Path, *args: str,
           env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``changestream run`` from the binlog's start into ``out`` (JSON lines, exactly once
    with ``position``), following the server."""
    return subprocess.Popen(
        [sys.executable, "-m", "changestream.cli", "run", "--source", url, "--include",
         "faults", "--snapshot", "never", "--start", "earliest", "--sink", f"jsonl:{out}",
         "--position-file", str(position), "--batch-changes", "50", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})})


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> str:
    """SIGTERM (the router delivers what it read and saves its position); its stderr."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    return err.decode()
