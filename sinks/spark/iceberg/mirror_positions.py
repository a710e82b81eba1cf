"""A keyed mirror's batch as one Iceberg row delta that deletes by position: the rows the
batch replaces or removes are found in the mirror's :class:`.key_index.KeyIndex` and named
in position delete files (one per data file), committed with the data file of the batch's
last images and the position. The index is built at the first batch that deletes (a batch
of new keys while there is none is a plain append) and kept by each commit after; a commit
Iceberg refuses because another writer changed those rows is planned again on a new index.
A mirror that still has equality deletes (written before position deletes were the
default) goes on taking them until ``maintain`` compacts them away."""

from __future__ import annotations

import logging

import pyarrow as pa

from changestream.model.errors import SinkError

from ..options import short
from .files import ArrowAppender, Unsupported
from .key_index import DELETE_FILE_SCHEMA, KeyIndex, build_index

logger = logging.getLogger("changestream.sinks.spark")

#: How many times a batch is planned again after Iceberg refused its commit.
ATTEMPTS = 3


class MirrorPositions:
    """Lands keyed mirrors' batches with position deletes through ``appender``, keeping
    an index per mirror."""

    def __init__(self, appender: ArrowAppender):
        self.appender = appender
        self.indexes: dict[str, KeyIndex] = {}

    def land(self, name: str, keys: tuple[str, ...], upserts: pa.Table | None,
             deleted: pa.Table | None, properties: dict[str, str],
             expect_present: bool = False) -> bool | None:
        """Commit to mirror ``name`` (key columns ``keys``) the rows of keys ``deleted``
        deleted and ``upserts`` added, with ``properties``. ``True`` when done, ``False``
        when the driver cannot write this table (the caller uses Spark), ``None`` when
        the mirror cannot take position deletes (equality deletes apply to it).
        ``expect_present``: every key of ``deleted`` is in the mirror (it changed at the
        source, which the mirror equals as of the batch's start), so a key the index
        lacks means an index behind the table: it is read again once."""
        checked = False
        for attempt in range(ATTEMPTS):
            built = name not in self.indexes
            index = self._index(name, keys, needed=deleted is not None)
            if index is None and deleted is not None:
                return None
            located = DELETE_FILE_SCHEMA.empty_table()
            if index is not None and deleted is not None:
                try:
                    located, missing = index.locate(deleted)
                except Unsupported:
                    return None
                if missing and expect_present and not built and not checked:
                    checked = True
                    logger.info("spark sink: %d keys of mirror %s not where its key index "
                                "said; reading it again", missing, name)
                    self.indexes.pop(name, None)
                    continue
            if index is None:  # only new keys and no index yet: a plain append
                return self.appender.row_delta(name, upserts, None, properties)
            try:
                done = self.appender.position_delta(name, upserts, located,
                                                    index.snapshot_id, properties)
            except Exception as exc:  # Py4JJavaError
                self.indexes.pop(name, None)
                if "ValidationException" not in str(exc) or attempt == ATTEMPTS - 1:
                    raise
                logger.info("spark sink: mirror %s changed under the router (%s); reading "
                            "where its keys are again", name, short(exc))
                continue
            if done is None:
                self.indexes.pop(name, None)
                return False
            location, snapshot, parent = done
            if parent != index.snapshot_id:
                # Another writer committed in between (Iceberg put this commit on top of
                # its, having checked that the files it deletes from are still there): the
                # index misses that commit's changes, so it is read again when next needed.
                self.indexes.pop(name, None)
                return True
            index.remove(located)
            if location is not None and upserts is not None:
                index.add_file(location, upserts.select(list(keys)))
            index.snapshot_id = snapshot
            return True
        raise SinkError(f"spark sink: mirror {name}: unreachable")  # the loop returns

    def _index(self, name: str, keys: tuple[str, ...], needed: bool) -> KeyIndex | None:
        """Mirror ``name``'s index, current with the table (built when ``needed`` and
        missing or stale); ``None`` when there is none."""
        index = self.indexes.get(name)
        # Refreshed when an index would be used: another writer's commit (maintain,
        # another process) makes it stale, and rebuilds it, before it is used.
        facts = self.appender.facts(name, refresh=index is not None)
        if index is not None and index.table_ids == facts.ids \
                and index.snapshot_id == facts.snapshot_id:
            return index
        self.indexes.pop(name, None)
        if not needed:
            return None
        try:
            schema = self.appender.key_schema(name, list(keys))
        except Unsupported:
            return None
        index = build_index(self.appender.live_files(name), schema)
        if index is not None:
            index.table_ids = facts.ids
            self.indexes[name] = index
        return index
