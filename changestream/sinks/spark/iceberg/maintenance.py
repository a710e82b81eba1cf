"""Upkeep of the Iceberg tables a long-running router lands into: a week of 1-second
batches leaves thousands of small files and snapshots, which slow every read and MERGE.

For each table changestream owns in a catalog (its snapshots carry the position property,
or it is in the ``_changestream`` namespace) this compacts the data files, rewrites the
manifests, expires old snapshots and removes orphan files. The expiry never removes the
newest snapshot that carries a position, because a restart walks back to it from the
current snapshot (compaction's own commits carry none).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from changestream.model.errors import SinkError
from changestream.model.record import record

from ..options import java_cause
from ..positions import PROPERTY
from ..session import jvm_of
from .files import load_table, positioned_snapshot
from .names import CONTROL_NAMESPACE, METADATA_RETENTION

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger("changestream.sinks.spark")

MIN_ORPHAN_AGE = 24 * 3600.0


@record(frozen=True)
class MaintenanceSettings:
    """What ``maintain_catalog`` does (ages in seconds)."""

    compact: bool = True
    expire_after: float = 24 * 3600.0
    keep_snapshots: int = 10
    orphans_after: float = 3 * 24 * 3600.0  # older than any write still in flight
    remove_orphans: bool = True

    def __post_init__(self) -> None:
        # Iceberg's procedure refuses less: a younger file may belong to a write in flight.
        if self.remove_orphans and self.orphans_after < MIN_ORPHAN_AGE:
            raise ValueError(f"orphans_after {self.orphans_after:g} s: orphan files must be "
                             "at least 24 hours old to be removed safely (a younger file may "
                             "belong to a write still in flight)")


@record
class TableUpkeep:
    """What maintenance did to one table."""

    table: str
    files_before: int
    files_after: int
    snapshots_before: int
    snapshots_after: int
    rewritten_files: int = 0
    deletes_removed: int = 0  # equality delete files no data file needed any more
    orphans_removed: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str, what: str) -> float:
    """``90``, ``30m``, ``12h``, ``7d`` or ``2w`` as seconds; ``what`` names the option in
    the error."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{what}: {text!r} is not an age (e.g. 90s, 30m, 12h, 7d, 2w)")
    return float(match.group(1)) * _UNIT[match.group(2)]


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def owned_tables(spark: SparkSession, catalog: str,
                 control_namespace: str = CONTROL_NAMESPACE,
                 unreadable: list[str] | None = None) -> list[str]:
    """``namespace.table`` of every table in ``catalog`` that changestream lands or keeps
    (its own in ``control_namespace``); a table whose snapshots cannot be read to tell is
    left out, and named with the reason in ``unreadable`` when given."""
    found: list[str] = []
    for row in spark.sql(f"SHOW NAMESPACES IN {_q(catalog)}").collect():
        namespace = row[0]
        for t in spark.sql(f"SHOW TABLES IN {_q(catalog)}.{_q(namespace)}").collect():
            name = f"{_q(namespace)}.{_q(t['tableName'])}"
            if namespace == control_namespace:
                found.append(name)
                continue
            try:
                if _carries_positions(spark, catalog, name):
                    found.append(name)
            except Exception as exc:  # Py4J's or Spark's: its metadata is damaged
                if unreadable is None:
                    raise
                unreadable.append(f"{catalog}.{namespace}.{t['tableName']}: cannot be read "
                                  f"to tell whether changestream lands it: {java_cause(exc)}")
                logger.warning("maintain: %s", unreadable[-1])
    return found


def _carries_positions(spark: SparkSession, catalog: str, name: str) -> bool:
    return bool(spark.sql(
        f"SELECT 1 FROM {_q(catalog)}.{name}.snapshots "
        f"WHERE summary['{PROPERTY}'] IS NOT NULL LIMIT 1").collect())


def newest_position_millis(table: Any) -> int | None:
    """Commit time (ms) of the newest snapshot of Java table ``table`` that carries a
    position."""
    snapshot = positioned_snapshot(table, PROPERTY)
    return None if snapshot is None else int(snapshot.timestampMillis())


def remove_dangling_equality_deletes(spark: SparkSession, full_name: str) -> int:
    """Remove the equality delete files of unpartitioned table ``full_name`` that apply to
    no live data file any more (an equality delete applies to data files of a lower data
    sequence number; compaction gives its files the sequence number it started from).
    Iceberg's own ``remove-dangling-deletes`` left them in unpartitioned tables (1.10)."""
    table = load_table(spark, full_name)
    table.refresh()
    snapshot = table.currentSnapshot()
    if snapshot is None or table.spec().isPartitioned():
        return 0
    jvm = jvm_of(spark)
    io, specs = table.io(), table.specs()
    files = jvm.org.apache.iceberg.ManifestFiles
    lowest = None
    for manifest in snapshot.dataManifests(io):
        entries = files.read(manifest, io, specs).iterator()
        while entries.hasNext():
            sequence = entries.next().dataSequenceNumber()
            lowest = sequence if lowest is None else min(lowest, sequence)
    dangling = []
    for manifest in snapshot.deleteManifests(io):
        entries = files.readDeleteManifest(manifest, io, specs).iterator()
        while entries.hasNext():
            delete = entries.next()
            if str(delete.content()) == "EQUALITY_DELETES" and (
                    lowest is None or delete.dataSequenceNumber() <= lowest):
                dangling.append(delete.copyWithoutStats())
    if dangling:
        update = table.newRowDelta()
        for delete in dangling:
            update.removeDeletes(delete)
        update.commit()
    return len(dangling)


#: How many times a maintenance step that a writer's commit got in the way of is tried.
COMPACTION_ATTEMPTS = 8

#: What Iceberg says when a commit of the router in the meantime conflicts with a step
#: (a ValidationException: new position deletes of a file it rewrote, merged manifests it
#: rewrote; or a CommitFailedException), or when a step read metadata the router's commits
#: were changing (seen once, in one CI run: an Avro manifest read as "Invalid sync!";
#: "NotFoundException" covers Java's FileNotFoundException too).
_TRANSIENT = ("ValidationException", "CommitFailedException", "Invalid sync",
              "NotFoundException")


class MaintenanceError(SinkError):
    """A maintenance step of one table failed, after its retries."""


def _retried(spark: SparkSession, full: str, step: str, run: Callable[[], Any]) -> Any:
    """``run()`` (maintenance step ``step`` of table ``full``), tried again a little later
    each time, with the table read afresh, while it fails for a reason a concurrent
    commit explains (``_TRANSIENT``); a :class:`MaintenanceError` naming the table and the
    step when it still fails."""
    for attempt in range(COMPACTION_ATTEMPTS):
        try:
            return run()
        except Exception as exc:  # Py4JJavaError or pyspark's own
            if attempt == COMPACTION_ATTEMPTS - 1 or not any(
                    w in str(exc) for w in _TRANSIENT):
                raise MaintenanceError(f"{full.replace('`', '')}: {step} failed: "
                                       f"{java_cause(exc)}") from exc
            logger.info("maintain: %s changed during its %s (%s); trying again",
                        full.replace("`", ""), step, java_cause(exc))
            time.sleep(0.25 * (attempt + 1))
            with contextlib.suppress(Exception):  # gone meanwhile: the next try says so
                spark.catalog.refreshTable(full)  # Spark's catalog caches the table
    return None


def _position_deletes(table: Any) -> int:
    """How many rows position delete files delete in Java table ``table``'s current
    snapshot."""
    table.refresh()
    snapshot = table.currentSnapshot()
    if snapshot is None:
        return 0
    return int(snapshot.summary().get("total-position-deletes") or 0)


def _figures(table: Any) -> tuple[int, int]:
    """(data and delete files, snapshots) of Java table ``table`` as its metadata says."""
    table.refresh()
    snapshot = table.currentSnapshot()
    files = 0
    if snapshot is not None:
        summary = snapshot.summary()
        files = sum(int(summary.get(key) or 0) for key in ("total-data-files",
                                                           "total-delete-files"))
    return files, int(table.operations().current().snapshots().size())


def _keep_properties(table: Any) -> None:
    """Give ``table`` the metadata retention of the tables changestream makes (those made
    before it kept every metadata file: one per commit, each listing every snapshot)."""
    properties = table.properties()
    missing = {k: v for k, v in METADATA_RETENTION.items() if properties.get(k) != v}
    if missing:
        update = table.updateProperties()
        for key, value in missing.items():
            update.set(key, value)
        update.commit()


def _timestamp(millis: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(millis / 1000)) + \
        f".{int(millis) % 1000:03d}"


def _expire(table: Any, settings: MaintenanceSettings) -> None:
    """Expire the snapshots of Java table ``table`` that ``settings`` let go, with Iceberg's
    core expiry on the driver (the Spark procedure's jobs cost seconds a table even when a
    few files go)."""
    table.refresh()
    older_than = time.time() * 1000 - settings.expire_after * 1000
    kept = newest_position_millis(table)
    if kept is not None:
        older_than = min(older_than, kept)  # expiry removes only snapshots older than this
    table.expireSnapshots().expireOlderThan(int(older_than)) \
        .retainLast(max(1, settings.keep_snapshots)).commit()


def maintain_table(spark: SparkSession, catalog: str, name: str,
                   settings: MaintenanceSettings) -> TableUpkeep:
    """Compact, rewrite manifests, expire and remove orphans of table ``name``
    (``namespace.table``, quoted) in ``catalog``."""
    began = time.monotonic()
    full = f"{_q(catalog)}.{name}"
    system = f"{_q(catalog)}.system"
    # With the catalog named: a namespace that has a catalog's name (db "x" in catalog
    # "x") would be read as that catalog.
    literal = full.replace("'", "''")
    table = load_table(spark, full)
    files, snapshots = _figures(table)
    upkeep = TableUpkeep(name.replace("`", ""), files_before=files, files_after=0,
                         snapshots_before=snapshots, snapshots_after=0)
    _keep_properties(table)
    if settings.compact and files > 1:
        # Files any delete applies to are rewritten without the deleted rows (the mirror's
        # batches add position deletes, or equality deletes in older mirrors), and deletes
        # no file needs any more are dropped.
        rewritten = _retried(spark, full, "compaction", lambda: spark.sql(
            f"CALL {system}.rewrite_data_files(table => '{literal}', options => map("
            "'delete-file-threshold', '1', 'remove-dangling-deletes', 'true'))").collect())
        upkeep.rewritten_files = int(rewritten[0][0]) if rewritten else 0
        upkeep.deletes_removed = _retried(spark, full, "removal of dangling deletes",
                                          lambda: remove_dangling_equality_deletes(spark, full))
        if _position_deletes(table):
            # Position deletes of rewritten files still "apply" by sequence number (the
            # rewrite keeps its starting one): this drops the rows that name no live file.
            _retried(spark, full, "rewrite of position deletes", lambda: spark.sql(
                f"CALL {system}.rewrite_position_delete_files(table => '{literal}', "
                "options => map('rewrite-all', 'true'))").collect())
        _retried(spark, full, "rewrite of manifests", lambda: spark.sql(
            f"CALL {system}.rewrite_manifests(table => '{literal}')").collect())
    _retried(spark, full, "snapshot expiry", lambda: _expire(table, settings))
    if settings.remove_orphans:
        orphans = _retried(spark, full, "orphan removal", lambda: spark.sql(
            f"CALL {system}.remove_orphan_files(table => '{literal}', older_than => "
            f"TIMESTAMP '{_timestamp(time.time() * 1000 - settings.orphans_after * 1000)}')"
        ).collect())
        upkeep.orphans_removed = len(orphans)
    upkeep.files_after, upkeep.snapshots_after = _figures(table)
    upkeep.seconds = round(time.monotonic() - began, 2)
    return upkeep


def maintain_catalog(spark: SparkSession, catalog: str, settings: MaintenanceSettings,
                     report: Callable[[TableUpkeep], None] | None = None,
                     control_namespace: str = CONTROL_NAMESPACE) -> list[TableUpkeep]:
    """Maintain every table changestream owns in ``catalog``; ``report`` hears of each.
    A table whose upkeep fails (or whose snapshots cannot be read to tell whether it is
    changestream's) does not stop the others': a :class:`MaintenanceError` naming every
    such table and its error is raised once all were tried."""
    done = []
    failed: list[str] = []
    for name in owned_tables(spark, catalog, control_namespace, failed):
        try:
            upkeep = maintain_table(spark, catalog, name, settings)
        except Exception as exc:  # a step's MaintenanceError, or Py4J's reading the table
            failed.append(str(exc) if isinstance(exc, MaintenanceError)
                          else f"{catalog}.{name.replace('`', '')}: {java_cause(exc)}")
            logger.warning("maintain: %s", failed[-1])
            continue
        if report is not None:
            report(upkeep)
        done.append(upkeep)
    if failed:
        raise MaintenanceError(f"{len(failed)} of {len(failed) + len(done)} tables were not "
                               "maintained (the others were): " + "; ".join(failed))
    return done


class MaintenanceSchedule:
    """The sink's maintenance schedule: every ``every`` seconds (checked after a batch),
    the tables landed since the last run are maintained as ``changestream maintain`` does,
    but for two things: snapshots expire after ``expire_after`` seconds (a router landing
    a batch a second makes 3,600 snapshots an hour, and every commit writes a metadata file
    that lists them all), and orphan files are looked for once a day. The run's own
    commits come between two batches, never during one."""

    def __init__(self, every: float, expire_after: float = 3600.0):
        self.every = every
        self.expire_after = expire_after
        self.due = time.monotonic() + every
        self.orphans_due = 0.0  # the first run looks for orphans, then once a day
        self.tables: set[str] = set()  # `db`.`table` landed since the last run
        self.runs = 0

    def landed(self, names: list[str]) -> None:
        """Note the tables (``namespace.table``, quoted) a batch committed to."""
        self.tables.update(names)

    def run_if_due(self, spark: SparkSession, catalog: str) -> None:
        """Maintain the noted tables of ``catalog`` when the time has come."""
        now = time.monotonic()
        if now < self.due:
            return
        orphans = now >= self.orphans_due
        if orphans:
            self.orphans_due = now + 86400
        settings = MaintenanceSettings(expire_after=self.expire_after,
                                       remove_orphans=orphans)
        failed = set()
        for name in sorted(self.tables):
            try:
                if not spark.catalog.tableExists(f"{_q(catalog)}.{name}"):
                    continue  # dropped or renamed since it was landed
                done = maintain_table(spark, catalog, name, settings)
            except Exception as exc:  # the batch is landed: a failed upkeep only waits
                text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
                logger.warning("spark sink: maintenance of %s.%s failed (tried again in "
                               "%g s): %s", catalog, name, self.every, text)
                failed.add(name)
                continue
            logger.info("spark sink: maintained %s.%s in %.1fs: %d -> %d files, %d -> %d "
                        "snapshots", catalog, done.table, done.seconds, done.files_before,
                        done.files_after, done.snapshots_before, done.snapshots_after)
        self.tables = failed
        self.runs += 1
        self.due = time.monotonic() + self.every
