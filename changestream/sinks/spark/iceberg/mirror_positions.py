"""A keyed mirror's batch as one Iceberg row delta that deletes by position: the rows the
batch replaces or removes are found in the mirror's :class:`.key_index.KeyIndex` and named
in position delete files (one per data file), committed with the data file of the batch's
last images and the position. The index is built at the first batch that deletes (a batch
of new keys while there is none is a plain append) and kept by each commit after; a commit
Iceberg refuses because another writer changed those rows is planned again on a new index.
A mirror that still has equality deletes (written before position deletes were the
default) goes on taking them until ``maintain`` compacts them away.

A mirror without a primary key is a multiset: its batch removes a number of copies of
whole rows, found by their hash (:func:`.key_index.row_hashes`), and appends the copies it
adds (:class:`RowCopies`)."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from changestream.model.errors import SinkError

from ..options import short
from .commit_queue import CommitQueue, StagedCommit
from .files import ArrowAppender, Unsupported, file_schema
from .key_index import (
    DELETE_FILE_SCHEMA,
    ROW_HASH_SCHEMA,
    KeyIndex,
    build_index,
    read_keys,
    row_hashes,
)

logger = logging.getLogger("changestream.sinks.spark")

#: How many times a batch is planned again after Iceberg refused its commit.
ATTEMPTS = 3


class KeyedRows:
    """A keyed mirror's batch: the keys it deletes (``deleted``: key columns) and the
    rows it adds (``upserts``), found and indexed by the key columns ``keys``."""

    def __init__(self, keys: tuple[str, ...], upserts: pa.Table | None,
                 deleted: pa.Table | None):
        self.keys = list(keys)
        self.upserts = upserts
        self.deleted = deleted
        self._schema: pa.Schema | None = None

    def index_schema(self, table_schema: dict[str, Any]) -> pa.Schema:
        """The index's columns for a table of ``table_schema`` (Iceberg's JSON)."""
        self._schema = file_schema(table_schema, self.keys)
        return self._schema

    def read(self, path: Path) -> pa.Table:
        assert self._schema is not None
        return read_keys(path, self._schema)

    def locate(self, index: KeyIndex, count_missing: bool) -> tuple[pa.Table, int]:
        assert self.deleted is not None
        return index.locate(self.deleted, count_missing)

    def index_keys(self, rows: pa.Table) -> pa.Table:
        return rows.select(self.keys)


def row_schema(table_schema: dict[str, Any]) -> pa.Schema:
    """Every column of a table of ``table_schema`` (Iceberg's JSON) as the table types
    it: what a keyless mirror's rows are hashed over."""
    return file_schema(table_schema, [f["name"] for f in table_schema["fields"]])


class RowCopies:
    """A keyless mirror's batch: ``removed`` (the hash of each row value it removes, in
    column ``ROW_HASH``, with how many of its copies go, in ``COPIES``: one row a value)
    and the rows it adds (``upserts``, a row per copy), hashed over ``hashed_over``
    (:func:`row_schema`)."""

    def __init__(self, upserts: pa.Table | None, removed: pa.Table | None,
                 hashed_over: pa.Schema):
        self.upserts = upserts
        self.removed = removed
        self.deleted = removed  # what the batch needs found in the mirror
        self.hashed_over = hashed_over

    def index_schema(self, table_schema: dict[str, Any]) -> pa.Schema:
        """The index's columns: the row hash."""
        return ROW_HASH_SCHEMA

    def read(self, path: Path) -> pa.Table:
        return row_hashes(read_keys(path, self.hashed_over), self.hashed_over)

    def locate(self, index: KeyIndex, count_missing: bool) -> tuple[pa.Table, int]:
        assert self.removed is not None
        return index.locate_copies(self.removed)  # its count costs nothing more

    def index_keys(self, rows: pa.Table) -> pa.Table:
        return row_hashes(rows, self.hashed_over)


class _NotWritable(Exception):
    """A table the driver cannot write position deletes to (not on a local file system,
    or partitioned)."""


class MirrorPositions:
    """Lands keyed mirrors' batches with position deletes through ``appender``, keeping
    an index per mirror."""

    def __init__(self, appender: ArrowAppender):
        self.appender = appender
        self.indexes: dict[str, KeyIndex] = {}

    def land(self, name: str, batch: KeyedRows | RowCopies, properties: dict[str, str],
             commits: CommitQueue, expect_present: bool = False,
             attempts: int = ATTEMPTS) -> bool | None:
        """Give ``batch``'s commit to mirror ``name`` (with ``properties``) to ``commits``:
        ``True`` when given (what its result says of the index is taken in when it is
        waited for; one Iceberg refuses is planned again then, ``attempts`` times in
        all), ``False`` when the driver cannot write this table (the caller uses Spark),
        ``None`` when the mirror cannot take position deletes (equality deletes apply to
        it, or its keys cannot be indexed here). The caller has waited for the table's
        commits given before. ``expect_present``: every key (row) the batch deletes is in
        the mirror (it changed at the source, which the mirror equals as of the batch's
        start), so one the index lacks means an index behind the table: it is read again
        once."""
        checked = False
        upserts, deleted = batch.upserts, batch.deleted
        while True:
            built = name not in self.indexes
            try:
                index = self._index(name, batch, needed=deleted is not None)
            except Unsupported:
                return None
            except _NotWritable:
                return False
            if index is None and deleted is not None:
                return None
            located = DELETE_FILE_SCHEMA.empty_table()
            if index is not None and deleted is not None:
                try:
                    # Missing keys matter only where they say the index is behind.
                    located, missing = batch.locate(
                        index, count_missing=expect_present and not built and not checked)
                except Unsupported:
                    return None
                if missing and expect_present and not built and not checked:
                    checked = True
                    logger.info("spark sink: %d rows of mirror %s not where its key index "
                                "said; reading it again", missing, name)
                    self.indexes.pop(name, None)
                    continue
            if index is None:  # only new rows and no index yet: a plain append
                append = self.appender.prepare_row_delta(name, upserts, None, properties)
                if append is None:
                    return False
                commits.submit(name, append)
                return True
            commit = self.appender.prepare_position_delta(name, upserts, located,
                                                          index.snapshot_id, properties)
            if commit is None:
                self.indexes.pop(name, None)
                return False
            commits.submit(name, _refusable(commit), partial(
                self._made, name, batch, properties, commits, expect_present, attempts,
                index, located))
            return True

    def _made(self, name: str, batch: KeyedRows | RowCopies, properties: dict[str, str],
              commits: CommitQueue, expect_present: bool, attempts: int, index: KeyIndex,
              located: pa.Table, made: Any) -> None:
        """A commit given to the queue was made (or refused): the index follows it; a
        commit Iceberg refused is planned again and given to the queue, while attempts
        are left."""
        if not isinstance(made, _Refusal):
            self._took(name, batch, index, located, made)
            return
        self.indexes.pop(name, None)
        if attempts <= 1:
            raise made.error
        logger.info("spark sink: mirror %s changed under the router (%s); reading "
                    "where its keys are again", name, short(made.error))
        if self.land(name, batch, properties, commits, expect_present,
                     attempts - 1) is not True:
            raise SinkError(f"spark sink: mirror {name} changed under the router and "
                            "can no longer take this batch by position") from made.error

    def _took(self, name: str, batch: KeyedRows | RowCopies, index: KeyIndex,
              located: pa.Table, made: tuple[str | None, int, int]) -> None:
        """The index after its mirror's commit ``made`` (the new data file, the snapshot and
        its parent) removed ``located`` and added ``batch``'s rows."""
        location, snapshot, parent = made
        if parent != index.snapshot_id:
            # Another writer committed in between (Iceberg put this commit on top of its,
            # having checked that the files it deletes from are still there): the index
            # misses that commit's changes, so it is read again when next needed.
            self.indexes.pop(name, None)
            return
        index.remove(located)
        if location is not None and batch.upserts is not None:
            index.add_file(location, batch.index_keys(batch.upserts))
        index.snapshot_id = snapshot

    def _index(self, name: str, batch: KeyedRows | RowCopies, needed: bool
               ) -> KeyIndex | None:
        """Mirror ``name``'s index, current with the table (built when ``needed`` and
        missing or stale); ``None`` when there is none. Raises :class:`Unsupported` when
        the table's keys cannot be indexed here, :class:`_NotWritable` when the batch
        deletes and the driver cannot write the table."""
        index = self.indexes.get(name)
        # Refreshed when an index would be used: another writer's commit (maintain,
        # another process) makes it stale, and rebuilds it, before it is used.
        facts = self.appender.facts(name, refresh=index is not None)
        if needed and (facts.base is None or facts.partitioned):
            # position_delta would refuse it: no index is read for nothing
            raise _NotWritable(name)
        schema = batch.index_schema(facts.schema)
        if index is not None and index.table_ids == facts.ids \
                and index.snapshot_id == facts.snapshot_id and index.key_schema == schema:
            return index
        self.indexes.pop(name, None)
        if not needed:
            return None
        index = build_index(self.appender.live_files(name), schema, batch.read)
        if index is not None:
            index.table_ids = facts.ids
            self.indexes[name] = index
        return index


class _Refusal:
    """A commit Iceberg refused (a ``ValidationException``: another writer changed the
    rows it deletes), as a queued commit's result."""

    def __init__(self, error: Exception):
        self.error = error


def _refusable(staged: StagedCommit[Any]) -> StagedCommit[Any]:
    """``staged``, whose commit's refusal is its result rather than an error (the commits
    after it in the queue are made: the mirror is planned again)."""

    def commit(written: Any) -> Any:
        try:
            return staged.commit(written)
        except Exception as exc:  # Py4JJavaError
            if "ValidationException" in str(exc):
                return _Refusal(exc)
            raise

    return StagedCommit(staged.write, commit)
