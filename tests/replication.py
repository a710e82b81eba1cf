"""A private primary and replica for the failover tests: two servers of one flavour
(MariaDB 10.11 from Debian, MySQL 9.x from the sid root), distinct server ids, binlogs with
``log_slave_updates``/``log_replica_updates`` on, the replica following the primary by GTID
(MariaDB ``MASTER_USE_GTID``, MySQL ``SOURCE_AUTO_POSITION``), read-only until promoted."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql

from changestream.devserver import EmbeddedMariaDB, EmbeddedServer, ServerNotAvailableError
from tests.servers import PrivateMySQL, require_server, skip_or_fail


def new_server(flavor: str, server_id: int) -> EmbeddedServer:
    """A private server of ``flavor`` (``mariadb``/``mysql``) with ``server_id`` and replica
    updates logged (skipped where the machine lacks it)."""
    options: dict[str, str | int | bool | None] = {"server_id": server_id}
    try:
        if flavor == "mariadb":
            return EmbeddedMariaDB(options={**options, "log_slave_updates": True})
        return PrivateMySQL(options={**options, "log_replica_updates": True})
    except ServerNotAvailableError as error:
        skip_or_fail(str(error))


def replicate(replica: EmbeddedServer, primary: EmbeddedServer) -> None:
    """Make ``replica`` follow ``primary`` by GTID from its first transaction."""
    if replica.flavor == "mariadb":
        replica.execute([
            f"CHANGE MASTER TO MASTER_HOST='{primary.host}', MASTER_PORT={primary.port}, "
            f"MASTER_USER='{primary.user}', MASTER_PASSWORD='{primary.password}', "
            "MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            "START SLAVE", "SET GLOBAL read_only = ON"])
    else:
        replica.execute([
            f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='{primary.host}', "
            f"SOURCE_PORT={primary.port}, SOURCE_USER='{primary.user}', "
            f"SOURCE_PASSWORD='{primary.password}', SOURCE_AUTO_POSITION=1, "
            "GET_SOURCE_PUBLIC_KEY=1, SOURCE_CONNECT_RETRY=1",
            "START REPLICA", "SET GLOBAL read_only = ON"])


def replica_status(replica: EmbeddedServer) -> dict[str, Any]:
    """``SHOW SLAVE STATUS`` / ``SHOW REPLICA STATUS`` as a dict (empty: not a replica)."""
    sql = "SHOW SLAVE STATUS" if replica.flavor == "mariadb" else "SHOW REPLICA STATUS"
    with replica.connect(cursorclass=pymysql.cursors.DictCursor) as conn, \
            conn.cursor() as cur:
        cur.execute(sql)
        return dict(cur.fetchone() or {})


def applied_all_received(replica: EmbeddedServer) -> bool:
    """Whether the replica's SQL thread has applied everything its IO thread received."""
    s = replica_status(replica)
    if replica.flavor == "mariadb":
        return bool(s) and (s["Relay_Master_Log_File"], s["Exec_Master_Log_Pos"]) == \
            (s["Master_Log_File"], s["Read_Master_Log_Pos"])
    return bool(s) and (s["Relay_Source_Log_File"], s["Exec_Source_Log_Pos"]) == \
        (s["Source_Log_File"], s["Read_Source_Log_Pos"])


def received_up_to(replica: EmbeddedServer, file: str, pos: int) -> bool:
    """Whether the replica's IO thread has received the primary's binlog up to ``file``
    and ``pos``."""
    s = replica_status(replica)
    if not s:
        return False
    source = "Master" if replica.flavor == "mariadb" else "Source"
    read = (s[f"{source}_Log_File"], s[f"Read_{source}_Log_Pos"])
    return (read[0].rsplit(".", 1)[-1].zfill(10), read[1]) >= \
        (file.rsplit(".", 1)[-1].zfill(10), pos)


def caught_up(replica: EmbeddedServer, primary: EmbeddedServer) -> bool:
    """Whether the replica has executed every GTID the primary has."""
    if primary.flavor == "mariadb":
        want = primary.execute("SELECT @@global.gtid_binlog_pos")[0][0]
        return bool(replica.execute(f"SELECT MASTER_GTID_WAIT('{want}', 0) = 0")[0][0])
    want = primary.execute("SELECT @@global.gtid_executed")[0][0]
    return bool(replica.execute(f"SELECT GTID_SUBSET('{want}', @@global.gtid_executed)")[0][0])


def wait_until(predicate: Any, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)


def stop_applying(replica: EmbeddedServer) -> None:
    """Stop the replica's SQL thread (it still receives, but lags behind)."""
    replica.execute("STOP SLAVE SQL_THREAD" if replica.flavor == "mariadb"
                    else "STOP REPLICA SQL_THREAD")


def apply_again(replica: EmbeddedServer) -> None:
    replica.execute("START SLAVE SQL_THREAD" if replica.flavor == "mariadb"
                    else "START REPLICA SQL_THREAD")


def promote(replica: EmbeddedServer) -> None:
    """Stop replication and make the replica writable (the new primary)."""
    if replica.flavor == "mariadb":
        replica.execute(["STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"])
    else:
        replica.execute(["STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL read_only = OFF"])


def kill9(server: EmbeddedServer) -> None:
    """``kill -9`` the server's process (its files stay)."""
    process = server._process  # the test's own server
    assert process is not None
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    server._process = None


@contextmanager
def primary_and_replica(flavor: str) -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    """A started primary (server id 1) and replica (server id 2) following it."""
    primary = require_server(new_server(flavor, 1))
    try:
        replica = require_server(new_server(flavor, 2))
        try:
            replicate(replica, primary)
            yield primary, replica
        finally:
            replica.close()
    finally:
        primary.close()
