"""Whether a server has every transaction a router delivered, by GTIDs (never by binlog
offsets, which differ between servers): MySQL GTID sets, MariaDB GTID positions per
replication domain. Each answer is ``""`` (nothing lacking) or a phrase saying what is."""

from __future__ import annotations

from changestream.model.gtid import MariadbGtidState, MysqlGtidSet, is_mariadb_gtid


def mysql_lacking(delivered: str, executed: str, purged: str = "") -> str:
    """What a MySQL server whose ``@@gtid_executed`` is ``executed`` and ``@@gtid_purged``
    is ``purged`` lacks to go on after ``delivered``: GTIDs delivered that it has not
    executed, or GTIDs it purged from its binlogs that were not delivered (it can no
    longer send them)."""
    done = MysqlGtidSet(delivered)
    missing = done.difference(MysqlGtidSet(executed))
    if missing:
        return f"lacks {missing.render()}"
    gone = MysqlGtidSet(purged).difference(done)
    if gone:
        return f"has purged {gone.render()}, which was not delivered"
    return ""


def mariadb_lacking(delivered: str, binlog_pos: str) -> str:
    """What a MariaDB server whose binlog is at ``binlog_pos`` (``@@gtid_binlog_pos``)
    lacks of the GTID state ``delivered``: per domain, a sequence number it has not reached
    (or the same number from another server: their histories differ)."""
    has = MariadbGtidState(binlog_pos).last()
    short = []
    for domain, (server, seq) in sorted(MariadbGtidState(delivered).last().items()):
        theirs = has.get(domain)
        if theirs is None:
            short.append(f"{domain}-{server}-{seq} (nothing of domain {domain})")
        elif theirs[1] < seq:
            short.append(f"{domain}-{server}-{seq} (it is at {domain}-{theirs[0]}-{theirs[1]})")
        elif theirs[1] == seq and theirs[0] != server:
            short.append(f"{domain}-{server}-{seq} (it has {domain}-{theirs[0]}-{seq} "
                         "instead: another history)")
    return f"lacks {', '.join(short)}" if short else ""


def lacking(delivered: str, *, mariadb: bool, executed: str, purged: str = "") -> str:
    """What a server lacks of ``delivered`` (see :func:`mysql_lacking` and
    :func:`mariadb_lacking`; ``executed`` is MariaDB's ``@@gtid_binlog_pos``); a set in the
    other flavour's form is refused."""
    if delivered.strip() and is_mariadb_gtid(delivered) != mariadb:
        return (f"is {'MariaDB' if mariadb else 'MySQL'} and the delivered GTIDs "
                f"{delivered[:60]!r} are not in its form")
    if mariadb:
        return mariadb_lacking(delivered, executed)
    return mysql_lacking(delivered, executed, purged)
