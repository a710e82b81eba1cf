"""Verifying mirrors on a schedule inside ``changestream run`` (a sink's ``verify_every``
and ``verify_tables`` options): a thread that verifies each table in turn, then waits, and
keeps the last report of each for ``/status`` and ``/metrics``."""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql

from changestream.runtime.settings import RouterSettings
from changestream.verify.verifier import MirrorTarget, Verifier, VerifyReport

log = logging.getLogger("changestream")


class VerifySchedule:
    """Verifies the tables matching ``patterns`` (``db.table``, ``*`` allowed) every
    ``every`` seconds, the first time ``every`` seconds after the start."""

    def __init__(self, settings: RouterSettings, target: MirrorTarget, every: float,
                 patterns: tuple[str, ...], in_scope: Callable[[str, str], bool],
                 connect: Callable[[], pymysql.Connection[Any]]):
        self.settings = settings
        self.target = target
        self.every = every
        self.patterns = patterns
        self.in_scope = in_scope
        self.connect = connect
        self.reports: dict[str, VerifyReport] = {}
        self.checked_at: dict[str, float] = {}
        self.runs = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="changestream-verify",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def tables(self) -> list[str]:
        """The source's tables in the router's scope that the patterns match."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                            "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY 1, 2")
                rows = [(str(d), str(t)) for d, t in cur.fetchall()]
        finally:
            conn.close()
        return [f"{d}.{t}" for d, t in rows if self.in_scope(d, t) and any(
            fnmatch.fnmatchcase(f"{d}.{t}", p) for p in self.patterns)]

    def _run(self) -> None:
        verifier = Verifier(self.settings, self.target, stopping=self._stop.is_set)
        while not self._stop.wait(self.every):
            try:
                names = self.tables()
            except Exception as exc:
                log.warning("verify: cannot list the tables to verify: %s", exc)
                continue
            for name in names:
                if self._stop.is_set():
                    return
                try:
                    report = verifier.verify(name)
                except Exception as exc:
                    self.failures += 1
                    log.warning("verify: %s: %s", name, exc)
                    continue
                if self._stop.is_set():
                    return  # cut short: not a finding
                self.reports[name] = report
                self.checked_at[name] = time.time()
                self.runs += 1
                if report.differences:
                    log.warning("verify: %s: %d rows differ from the source (first: %s)",
                                name, len(report.differences),
                                ", ".join(f"{d.kind} {list(d.key)}"
                                          for d in report.differences[:5]))
                else:
                    log.info("verify: %s: %d rows equal the source (%d left out)", name,
                             report.rows, report.left_out)

    def status(self) -> dict[str, Any]:
        """The last report of each table verified, and the counts."""
        return {"every_seconds": self.every, "runs": self.runs, "failures": self.failures,
                "tables": {name: {**r.as_dict(), "keys": r.as_dict()["keys"][:10],
                                  "checked_at": self.checked_at.get(name)}
                           for name, r in sorted(self.reports.items())}}
