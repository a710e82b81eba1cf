"""Failover between the servers of a source's set (a primary and its replicas): which one
the router reads from, at the start and after the one it read is lost.

A server may take over only when it has every transaction the router delivered, compared
by GTIDs (MySQL: ``@@gtid_executed`` holds the delivered set and ``@@gtid_purged`` nothing
undelivered; MariaDB: ``@@gtid_binlog_pos`` reaches each domain's delivered sequence
number), never by binlog offsets, which differ between servers. It also needs its binary
log on and, as it may be a replica, ``log_slave_updates``/``log_replica_updates`` on (else
its binlog lacks what it replicated). A server that lacks something is asked again every
``poll_seconds`` for up to ``wait_seconds`` (a lagging replica catching up); then the
router stops with one line naming each server and what it lacks. A server that stays up but
was demoted (``read_only`` ON while another server of the set is writable) is left the same
way, found while the router is caught up (:meth:`ServerSet.demoted`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql

from changestream.model.errors import ConnectionLostError, SourceError
from changestream.model.gtid_coverage import lacking
from changestream.sources.source_url import SourceSpec, point_at
from changestream.sources.tls import open_connection

log = logging.getLogger("changestream")

_VARIABLES = ("log_bin", "log_slave_updates", "log_replica_updates", "gtid_mode",
              "gtid_executed", "gtid_purged", "gtid_binlog_pos", "read_only")


class NoServerError(SourceError):
    """No server of the set has every transaction delivered (the message says which server
    lacks what)."""


class ServerDemotedError(ConnectionLostError):
    """The server read was demoted (``read_only`` ON) while another of the set is writable:
    the router leaves it for that one, as after a loss."""


class ServerSet:
    """The servers of ``spec`` (its ``hosts``) and the one read now (``spec.connection``,
    moved by :meth:`start` and :meth:`after_loss`)."""

    def __init__(self, spec: SourceSpec, wait_seconds: float = 30.0, *,
                 poll_seconds: float = 0.5, stopping: threading.Event | None = None,
                 connect_timeout: float = 5.0, check_seconds: float = 5.0):
        self.spec = spec
        self.wait_seconds = wait_seconds
        self.check_seconds = check_seconds  # how often a caught-up reader checks demotion
        self.poll_seconds = poll_seconds
        self.stopping = stopping or threading.Event()
        self.connect_timeout = connect_timeout

    @property
    def several(self) -> bool:
        """Whether the set has more than one server (failover is possible)."""
        return len(self.spec.hosts) > 1

    def start(self, delivered: str | None) -> None:
        """Point at the first server, in the set's order, that answers and has every GTID in
        ``delivered`` (``None``: nothing to compare, the first that answers). Raises
        :class:`ConnectionLostError` when none answers, :class:`NoServerError` when those
        that answer lack something after the wait."""
        if delivered is None:
            problems = {}
            for host in self.spec.hosts:
                try:
                    self._variables(host)
                except ConnectionLostError as exc:
                    problems[host] = str(exc)
                    continue
                self._move(host)
                return
            raise ConnectionLostError("no server of the set answers: " + "; ".join(
                problems.values()))
        if not delivered.strip():  # nothing to compare: only where the position came from
            first = self.spec.hosts[0]
            try:
                self._variables(first)
            except ConnectionLostError as exc:
                raise NoServerError(
                    f"cannot resume on another server of the set: the position has no GTIDs "
                    f"to compare (MySQL needs gtid_mode=ON), and {_name(first)} "
                    f"{_reason(exc)}") from None
            self._move(first)
            return
        self._choose(lambda: delivered, list(self.spec.hosts), stay=None)

    def after_loss(self, delivered: Callable[[], str]) -> bool:
        """After the server read was lost: ``False`` when it answers again (read on from it
        at its own position), ``True`` when another server of the set that has every GTID
        ``delivered()`` gives (asked only when needed) is pointed at (read on from it by
        GTID). Raises as :meth:`start`."""
        current = (str(self.spec.connection["host"]), int(self.spec.connection["port"]))
        others = [h for h in self.spec.hosts if h != current]
        return self._choose(delivered, others, stay=current) != current

    def demoted(self) -> str | None:
        """Why the router should leave the server it reads (demoted: ``read_only`` ON while
        another server of the set is writable), ``None`` when it should not (or a server
        does not answer now: a loss shows itself on the stream)."""
        current = (str(self.spec.connection["host"]), int(self.spec.connection["port"]))
        try:
            if not _read_only(self._variables(current)):
                return None
        except ConnectionLostError:
            return None
        for host in self.spec.hosts:
            if host == current:
                continue
            try:
                if not _read_only(self._variables(host)):
                    return (f"{_name(current)} was demoted (read_only is ON) and "
                            f"{_name(host)} is writable")
            except ConnectionLostError:
                continue
        return None

    def after_demotion(self, delivered: Callable[[], str]) -> bool:
        """After :meth:`demoted` said so: point at a writable server of the set that has
        every GTID ``delivered()`` gives, as :meth:`after_loss` does (the demoted one is
        not stayed on); ``True`` once one is."""
        current = (str(self.spec.connection["host"]), int(self.spec.connection["port"]))
        writable = []
        for host in self.spec.hosts:
            if host == current:
                continue
            try:
                if not _read_only(self._variables(host)):
                    writable.append(host)
            except ConnectionLostError:
                continue
        if not writable:  # promoted and demoted again since: read on where it was
            return False
        return self._choose(delivered, writable, stay=None) != current

    def _choose(self, gtids: Callable[[], str], candidates: list[tuple[str, int]],
                stay: tuple[str, int] | None) -> tuple[str, int]:
        """The server taken (``stay`` when it answers), polled until ``wait_seconds`` pass."""
        deadline = 0.0  # from when the GTIDs delivered are known
        delivered: str | None = None
        while True:
            problems: dict[tuple[str, int], str] = {}
            if stay is not None:
                try:
                    self._variables(stay)
                    return stay
                except ConnectionLostError as exc:
                    problems[stay] = f"{_name(stay)} {_reason(exc)}"
            if delivered is None:
                delivered = gtids()
                if not delivered.strip():
                    raise NoServerError(
                        f"cannot move from {self.spec.server} to another server of the set: "
                        "no GTIDs were delivered to compare (MySQL needs gtid_mode=ON)")
                deadline = time.monotonic() + self.wait_seconds
            answered = False
            for host in candidates:
                try:
                    variables = self._variables(host)
                except ConnectionLostError as exc:
                    problems[host] = f"{_name(host)} {_reason(exc)}"
                    continue
                answered = True
                problem = server_problem(variables, delivered)
                if not problem:
                    self._move(host)
                    return host
                problems[host] = f"{_name(host)} {problem}"
            if not answered:
                raise ConnectionLostError("no server of the set answers: " +
                                          "; ".join(problems.values()))
            if self.stopping.is_set():
                raise ConnectionLostError("stopped while looking for a server of the set")
            if time.monotonic() >= deadline:
                waited = f" after waiting {self.wait_seconds:g}s" if self.wait_seconds else ""
                raise NoServerError(
                    f"no server of the set has every transaction delivered{waited} "
                    f"(GTIDs {_short(delivered)}): " + "; ".join(problems.values()))
            log.info("waiting for a server of the set to have GTIDs %s: %s",
                     _short(delivered), "; ".join(problems.values()))
            self.stopping.wait(self.poll_seconds)

    def _move(self, host: tuple[str, int]) -> None:
        if (self.spec.connection.get("host"), self.spec.connection.get("port")) != host:
            log.warning("reading from %s now (was %s)", _name(host), self.spec.server)
            point_at(self.spec, *host)

    def _variables(self, host: tuple[str, int]) -> dict[str, str]:
        """The server's version and the variables failover compares."""
        settings: dict[str, Any] = {**self.spec.connection, "host": host[0], "port": host[1],
                                    "connect_timeout": self.connect_timeout}
        try:
            conn = open_connection(**settings)
        except pymysql.err.MySQLError as exc:
            raise ConnectionLostError(f"cannot connect to {_name(host)}: "
                                      f"{exc.args[-1] if exc.args else exc}") from None
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT VERSION()")
                found = {"version": str(cur.fetchone()[0])}
                names = ", ".join(f"'{n}'" for n in _VARIABLES)
                cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
                found.update((str(k).lower(), str(v or "")) for k, v in cur.fetchall())
        except pymysql.err.MySQLError as exc:
            raise ConnectionLostError(f"cannot ask {_name(host)}: "
                                      f"{exc.args[-1] if exc.args else exc}") from None
        finally:
            conn.close()
        return found


def server_problem(variables: dict[str, str], delivered: str) -> str:
    """Why a server (its ``SHOW GLOBAL VARIABLES`` and ``version``) cannot take over after
    ``delivered``; ``""`` when it can."""
    mariadb = "mariadb" in variables.get("version", "").lower()
    if variables.get("log_bin", "").upper() != "ON":
        return "has its binary log off"
    updates = variables.get("log_replica_updates") or variables.get("log_slave_updates")
    if (updates or "").upper() != "ON":
        name = "log_slave_updates" if mariadb else "log_replica_updates"
        return f"has {name} off (its binlog lacks what it replicated)"
    if not mariadb and variables.get("gtid_mode", "").upper() != "ON":
        return f"has gtid_mode {variables.get('gtid_mode') or 'OFF'} (needs ON)"
    executed = variables.get("gtid_binlog_pos" if mariadb else "gtid_executed", "")
    return lacking(delivered, mariadb=mariadb, executed=executed,
                   purged=variables.get("gtid_purged", ""))


def _read_only(variables: dict[str, str]) -> bool:
    return variables.get("read_only", "").upper() in ("ON", "1")


def _name(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def _reason(exc: ConnectionLostError) -> str:
    text = str(exc)
    return "does not answer (" + text.partition(": ")[2] + ")" if ": " in text else text


def _short(gtids: str, limit: int = 200) -> str:
    text = " ".join(gtids.split())
    return text if len(text) <= limit else text[:limit] + "..."
