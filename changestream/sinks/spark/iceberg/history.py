"""The schema history kept in the Iceberg warehouse, beside the positions it belongs to.

The states live in ``<catalog>._changestream.schema_states`` (one row per state: its
content digest, the state as JSON, when it was stored). A state is appended before the
batch whose position names it is committed (its ``changestream.position`` property then
carries ``schema_history``), so the position the warehouse holds always names a state that
is there; states no committed position names any more are deleted afterwards. DDL is rare:
most batches name the state the one before them did and write nothing here.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from changestream.model.errors import ConfigError
from changestream.schema.history import SchemaState
from changestream.schema.store import decode_state

from ..options import short
from ..types import columns_json
from .commits import create_table, driver_commits
from .files import ArrowAppender, append_rows, live_rows, local_live_files
from .names import CONTROL_NAMESPACE, CONTROL_TABLE_PROPERTIES
from .names import quote as _q

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATES_TABLE = "schema_states"

logger = logging.getLogger("changestream.sinks.spark")


class WarehouseHistoryStore:
    """A :class:`~changestream.schema.store.HistoryStorage` in an Iceberg catalog."""

    def __init__(self, spark: SparkSession, catalog: str, namespace: str = CONTROL_NAMESPACE):
        self.spark = spark
        self.catalog = catalog
        self.namespace = namespace
        self.table = f"{_q(catalog)}.{_q(namespace)}.{_q(STATES_TABLE)}"
        self._stored: set[str] | None = None
        self._appender: ArrowAppender | None = None

    def describe(self, digest: str) -> str:
        return f"{self.table} (digest {digest})"

    def skips(self) -> set[str]:
        return set()  # the configuration's schema.skip names them for this storage

    def _digests(self) -> set[str]:
        if self._stored is None:
            self._stored = set(self._states())
        return self._stored

    def _states(self, digest: str | None = None) -> dict[str, str]:
        """The states the warehouse holds (digest -> state JSON; only ``digest``'s when
        given), read from the table's files when they are local (a restart's first read
        then runs no Spark query, slow to plan in a new JVM), else with Spark."""
        if not self.spark.catalog.tableExists(self.table):
            return {}
        rows = live_rows(self.spark, self.table, ["digest", "state"])
        if rows is None:
            where = "" if digest is None else f" WHERE digest = '{digest}'"
            rows = [r.asDict() for r in
                    self.spark.sql(f"SELECT digest, state FROM {self.table}{where}").collect()]
        return {r["digest"]: r["state"] for r in rows
                if digest is None or r["digest"] == digest}

    def read_digests(self) -> None:
        """Read which states the warehouse holds now, so that the first batch after a
        start does not wait for it."""
        self._digests()

    def save(self, digest: str, data: bytes) -> None:
        if digest in self._digests():
            return
        if not self.spark.catalog.tableExists(self.table):
            create_table(self.spark, self.catalog, self.namespace, STATES_TABLE,
                         columns_json((("digest", "string"), ("state", "string"),
                                       ("stored_at", "timestamp"))),
                         CONTROL_TABLE_PROPERTIES)
        row = pa.table({"digest": [digest], "state": [data.decode()],
                        "stored_at": pa.array([datetime.now(UTC)],
                                              pa.timestamp("us", tz="UTC"))})
        if self._appender is None:
            self._appender = ArrowAppender(self.spark)
        # before the first batch after a start that brings a new state (DDL, a new seed)
        append_rows(self.spark, self._appender, self.table, row, {})
        self._digests().add(digest)

    def load(self, digest: str) -> tuple[str, SchemaState]:
        state = self._states(digest).get(digest)
        if state is None:
            raise ConfigError(
                f"the warehouse's position names the schema history state {digest}, which "
                f"{self.table} does not hold; run `changestream schema reseed` with this sink "
                "to build it again from the server")
        return decode_state(state.encode(), self.describe(digest))

    def prune(self, keep: str) -> None:
        others = self._digests() - {keep}
        if not others:
            return
        if not self._drop_files(keep):
            self.spark.sql(f"DELETE FROM {self.table} WHERE digest <> '{keep}'")
        self._stored = {keep} & self._digests()

    def _drop_files(self, keep: str) -> bool:
        """Remove the states other than ``keep`` by dropping the data files that hold only
        them, in one commit from the driver (each state is appended as a file of its own;
        a Spark ``DELETE`` is a job: 0.8 s in a warm session, more in a new JVM).
        ``False`` when that cannot be done here: a file not local, delete files to merge,
        a file holding ``keep`` beside other states (compacted), or the commit refused
        because a file went meanwhile; the caller then runs the ``DELETE``."""
        live = local_live_files(self.spark, self.table)
        if live is None:
            return False
        table, files = live
        dropped = []
        for location, path in files:
            digests = set(pq.read_table(path, columns=["digest"]).column("digest").to_pylist())
            if keep not in digests:
                dropped.append(location)
            elif len(digests) > 1:
                return False
        if not dropped:
            return True
        try:
            driver_commits(self.spark, table).deleteFiles(table, "\n".join(dropped))
        except Exception as exc:  # Py4JJavaError: a file rewritten by maintenance meanwhile
            logger.info("spark sink: %s: dropping old schema states' files failed (%s); "
                        "deleting them with Spark", self.table, short(exc))
            return False
        return True
