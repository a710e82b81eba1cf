"""Pre-flight checks: is the server set up for change data capture? Each finding says what
to change."""

from __future__ import annotations

import logging
import re
from typing import Any

import pymysql

from changestream.model.errors import SourceError
from changestream.model.record import record
from changestream.schema.shadow import shadow_problem

log = logging.getLogger("changestream")


class PreflightError(SourceError):
    """The server is not set up for change data capture; the message says what to change."""


@record(frozen=True)
class Finding:
    """One check's result: ``level`` is ``ok``, ``warning`` or ``error``."""

    check: str
    level: str
    message: str


def _version_tuple(version: str) -> tuple[int, ...]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)


def _variable(cur: Any, name: str) -> str | None:
    cur.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
    row = cur.fetchone()
    return None if row is None else str(row[1])


def _grants(cur: Any) -> set[str]:
    """Privileges granted ON *.* to the current user (upper case; ALL expands to all)."""
    cur.execute("SHOW GRANTS")
    privileges: set[str] = set()
    for (grant,) in cur.fetchall():
        m = re.match(r"GRANT (.+?) ON (\S+) TO", str(grant), re.S)
        if not m or m.group(2) not in ("*.*", "`*`.`*`"):
            continue
        for privilege in m.group(1).split(","):
            privileges.add(privilege.strip().upper())
    if "ALL PRIVILEGES" in privileges or "ALL" in privileges:
        privileges |= {"REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT", "BINLOG MONITOR"}
    return privileges


def check_server(connection: pymysql.Connection[Any], *, schema_from_server: bool = True,
                 history: str = "auto", shadow_server: str | None = None) -> list[Finding]:
    """Every check on a connected server, in order (``history``/``shadow_server``: the
    schema history's settings, for where column names come from)."""
    out: list[Finding] = []
    with connection.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
        mariadb = "mariadb" in version.lower()
        v = _version_tuple(version)
        supported = v >= (10, 0, 0) if mariadb else v >= (5, 7, 0)
        out.append(Finding("server version", "ok" if supported else "error",
                           f"{'MariaDB' if mariadb else 'MySQL'} {version}" + (
                               "" if supported else ": changestream needs MySQL 5.7+ or "
                               "MariaDB 10.0+")))
        log_bin = _variable(cur, "log_bin")
        out.append(Finding("binary log", "ok" if log_bin == "ON" else "error",
                           "log_bin is ON" if log_bin == "ON" else
                           "binary logging is off: start the server with --log-bin "
                           "(log_bin = <name> in my.cnf)"))
        fmt = _variable(cur, "binlog_format")
        out.append(Finding("binlog format", "ok" if fmt == "ROW" else "error",
                           "binlog_format is ROW" if fmt == "ROW" else
                           f"binlog_format is {fmt}: changes are only readable in ROW format; "
                           "set binlog_format=ROW (SET GLOBAL binlog_format = 'ROW' and in "
                           "my.cnf)"))
        image = _variable(cur, "binlog_row_image")
        out.append(Finding("row image", "ok" if image in (None, "FULL") else "error",
                           "binlog_row_image is FULL" if image in (None, "FULL") else
                           f"binlog_row_image is {image}: rows would lack the columns that did "
                           "not change; set binlog_row_image=FULL"))
        metadata = _variable(cur, "binlog_row_metadata")
        out.append(_metadata_finding(metadata, "mariadb" if mariadb else "mysql", history,
                                     shadow_server))
        if mariadb:
            out.append(Finding("GTIDs", "ok", "MariaDB logs GTIDs for every transaction"))
        else:
            gtid_mode = _variable(cur, "gtid_mode")
            out.append(Finding("GTIDs", "ok" if gtid_mode == "ON" else "warning",
                               "gtid_mode is ON" if gtid_mode == "ON" else
                               f"gtid_mode is {gtid_mode}: positions are binlog file offsets "
                               "only (no failover); set gtid_mode=ON and "
                               "enforce_gtid_consistency=ON for GTID positions"))
        try:
            privileges = _grants(cur)
        except pymysql.err.MySQLError as exc:
            out.append(Finding("grants", "warning", f"cannot read the grants: {exc}"))
            return out
        missing = []
        if "REPLICATION SLAVE" not in privileges and "REPLICATION REPLICA" not in privileges:
            missing.append("REPLICATION SLAVE")
        if not privileges & {"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"}:
            missing.append("BINLOG MONITOR" if mariadb and v >= (10, 5, 0)
                           else "REPLICATION CLIENT")
        if metadata != "FULL" and "SELECT" not in privileges and (
                history != "off" or schema_from_server):
            missing.append("SELECT")
        out.append(Finding("grants", "error" if missing else "ok",
                           f"the user lacks {', '.join(missing)}: GRANT {', '.join(missing)} "
                           "ON *.* TO the router's user" if missing else
                           "the user may read the binlog"))
    return out


def _metadata_finding(metadata: str | None, flavor: str, history: str,
                      shadow_server: str | None) -> Finding:
    """Where column names come from when the binlog does not carry them."""
    if metadata == "FULL":
        return Finding("row metadata", "ok", "binlog_row_metadata is FULL")
    what = f"binlog_row_metadata is {metadata or 'not available'}"
    if history == "off":
        return Finding("row metadata", "warning",
                       f"{what} and schema.history is off: column names come from "
                       "information_schema as it is now (wrong for rows written before a "
                       "later ALTER); turn the history on or set binlog_row_metadata=FULL")
    problem = shadow_problem(flavor, shadow_server)
    if problem is None:
        return Finding("row metadata", "ok",
                       f"{what}: column names come from the schema history")
    return Finding("row metadata", "error" if history == "on" else "warning",
                   f"{what} and the schema history cannot run its shadow server ({problem}): "
                   "rows will stop the router; install the server program, set "
                   "schema.shadow_server, or set binlog_row_metadata=FULL")


def run_preflight(connection: pymysql.Connection[Any], *,
                  schema_from_server: bool = True, history: str = "auto",
                  shadow_server: str | None = None) -> list[Finding]:
    """Check the server; log warnings; raise :class:`PreflightError` listing every error."""
    findings = check_server(connection, schema_from_server=schema_from_server,
                            history=history, shadow_server=shadow_server)
    for f in findings:
        if f.level == "warning":
            log.warning("pre-flight %s: %s", f.check, f.message)
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise PreflightError("the server is not ready for change data capture: " +
                             "; ".join(f"{f.check}: {f.message}" for f in errors))
    return findings
