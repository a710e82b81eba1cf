"""A backfill task stages the same pieces whether its plain DML transactions go through the
decode workers' compiled walk or, with ``CHANGESTREAM_PURE_PYTHON=1``, everything through
the general path: the same items in binlog order, the same rows (read back from the staged
files), positions, transaction counts and XA bookkeeping, on a real server's
files: keyed and keyless tables, inserts, updates, deletes, DDL in the middle (a column
added, one renamed), XA, MySQL's compressed transactions, with column names logged or
named from the schema history (MINIMAL), MySQL files cut into ranges, a gzip'd file, small
pieces cut inside a worker's segment, and a change filter."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from changestream.native import compiled
from changestream.parallel.decode_workers import SegmentResult, SegmentTicket
from changestream.parallel.inline_workers import InlineWorkers
from changestream.sinks.backfill.decoding import (
    StagedPiece,
    UnitManifest,
    decode_unit,
    read_piece,
)
from changestream.sinks.backfill.names import UnitNames, record_history
from changestream.sinks.backfill.planning import BackfillUnit, plan_units
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command
from tests.workloads import archive_binlogs

pytestmark = pytest.mark.integration


def _workload(server: Any, db: str) -> None:
    """About 2,500 changes in mixed transactions, a DDL halfway, the log rotated twice."""
    t, k, o = f"`{db}`.t", f"`{db}`.k", f"`{db}`.o"
    mysql = server.flavor == "mysql"
    server.execute([
        f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(40), amount DECIMAL(10,2), "
        "at DATETIME(6), raw VARBINARY(8))",
        f"CREATE TABLE {k} (a INT, b VARCHAR(20))",
        f"CREATE TABLE {o} (id INT PRIMARY KEY, n BIGINT UNSIGNED)"])
    for step in range(40):
        if step == 20:
            server.execute([f"ALTER TABLE {t} ADD COLUMN note VARCHAR(20) DEFAULT 'n/a'",
                            # the same column types under another name: a MINIMAL
                            # TABLE_MAP of the same bytes, named anew from here
                            f"ALTER TABLE {k} RENAME COLUMN b TO c"])
        if step in (13, 31):
            server.execute("FLUSH BINARY LOGS")
        first = step * 50 + 1
        values = ", ".join(f"({i}, 'row {i} ✓', {i}.25, '2024-01-{1 + i % 28:02d} "
                           f"10:00:0{i % 10}.{i:06d}', X'{i % 256:02x}00')"
                           for i in range(first, first + 50))
        compressed = mysql and step % 3 == 1
        server.execute([
            "SET time_zone = '+00:00'",
            *(["SET SESSION binlog_transaction_compression = ON"] if compressed else []),
            "BEGIN", f"INSERT INTO {t} (id, v, amount, at, raw) VALUES {values}",
            f"UPDATE {t} SET amount = amount * 2, v = CONCAT(v, '!') "
            f"WHERE id BETWEEN {first} AND {first + 9}",
            f"DELETE FROM {t} WHERE id = {first + 20}",
            f"INSERT INTO {k} VALUES ({step}, 'same'), ({step}, 'same')",
            f"DELETE FROM {k} WHERE a = {step} LIMIT 1",
            f"INSERT INTO {o} VALUES ({step}, {18446744073709551615 - step})", "COMMIT"])
        if step % 10 == 5:
            xid = f"'bf{step}'"
            server.execute([f"XA START {xid}", f"UPDATE {o} SET n = n - 1 WHERE id = {step}",
                            f"XA END {xid}", f"XA PREPARE {xid}", f"XA COMMIT {xid}"])
        if step % 10 == 7:
            server.execute(["BEGIN", f"DELETE FROM {t} WHERE id < {first}", "ROLLBACK"])
    server.execute(f"UPDATE {t} SET note = 'late' WHERE id % 7 = 0")


@pytest.fixture
def archive(server: Any, fresh_database: str, row_metadata: str, tmp_path: Path
            ) -> list[Path]:
    server.execute("FLUSH BINARY LOGS")
    first = server.binlog_position()[0]
    _workload(server, fresh_database)
    return archive_binlogs(server, first, tmp_path / "archive")


def _decoded(units: list[BackfillUnit], staging: Path, names: dict[int, UnitNames],
             change_filter: ChangeFilter | None, chunk: int) -> list[UnitManifest]:
    return [decode_unit(u, str(staging), chunk, change_filter, names.get(u.index))
            for u in units]


def _same(compiled_path: list[UnitManifest], general: list[UnitManifest]) -> None:
    for walked, decoded in zip(compiled_path, general, strict=True):
        assert walked.error is None and decoded.error is None, walked.error or decoded.error
        assert (walked.end, walked.rows, walked.transactions, walked.pending_xa,
                walked.unmatched_xa) == (decoded.end, decoded.rows, decoded.transactions,
                                         decoded.pending_xa, decoded.unmatched_xa)
        assert len(walked.items) == len(decoded.items)
        for a, b in zip(walked.items, decoded.items, strict=True):
            assert type(a) is type(b)
            if not isinstance(a, StagedPiece):
                assert a == b
                continue
            assert isinstance(b, StagedPiece)
            assert (a.database, a.table, a.schema, a.signature, a.rows, a.first, a.last) == \
                (b.database, b.table, b.schema, b.signature, b.rows, b.first, b.last)
            rows, expected = read_piece(a.path), read_piece(b.path)
            assert rows.schema == expected.schema, a.path
            assert rows.to_pylist() == expected.to_pylist(), a.path


def _counting_walks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    """Whether the compiled walk took each segment the inline worker answered, and whether
    the segment held compressed transactions."""
    walked: list[tuple[bool, bool]] = []
    answer: Callable[[InlineWorkers, SegmentTicket], SegmentResult] = InlineWorkers.answer

    def counted(self: InlineWorkers, ticket: SegmentTicket) -> SegmentResult:
        before, compressed = self.worker.fast_segments, self._waiting[0][1].payloads
        runs = answer(self, ticket)
        walked.append((self.worker.fast_segments > before, compressed))
        return runs

    monkeypatch.setattr(InlineWorkers, "answer", counted)
    return walked


@pytest.mark.parametrize("server", ["mariadb", "mysql"], indirect=True)
def test_the_compiled_walk_stages_what_the_general_path_stages(
        server: Any, fresh_database: str, row_metadata: str, archive: list[Path],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if compiled("changestream.sinks.spark._arrow_walk") is None:
        pytest.skip("the compiled walk is not built (or CHANGESTREAM_PURE_PYTHON=1)")
    assert any(p.name.endswith(".gz") for p in archive)
    # MySQL's files cut into ranges: units that start and end inside a file.
    units = plan_units([str(tmp_path / "archive")], 8192 if server.flavor == "mysql" else 0)
    assert len(units) > len(archive) or server.flavor == "mariadb"
    names: dict[int, UnitNames] = {}
    if row_metadata == "MINIMAL":
        recorded = record_history([str(p) for p in archive], server.flavor,
                                  shadow_command(server))
        names = {u.index: recorded.for_unit(u) for u in units}
    only = ChangeFilter(include=[f"{fresh_database}.t", f"{fresh_database}.k"])
    walked = _counting_walks(monkeypatch)
    # Small pieces, cut inside a worker's segments, and bigger ones.
    for label, change_filter, chunk in (("all", None, 37), ("all", None, 500),
                                        ("filtered", only, 150)):
        walked.clear()
        fast = _decoded(units, tmp_path / f"walked-{label}-{chunk}", names, change_filter,
                        chunk)
        assert any(fast_walk for fast_walk, _ in walked), "the compiled walk took nothing"
        if server.flavor == "mysql" and row_metadata == "FULL":
            assert (True, True) in walked, "no compressed transaction went through the walk"
        monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
        general = _decoded(units, tmp_path / f"general-{label}-{chunk}", names,
                           change_filter, chunk)
        monkeypatch.delenv("CHANGESTREAM_PURE_PYTHON")
        _same(fast, general)
        assert sum(m.rows for m in fast) > 2000


@pytest.mark.parametrize("server", ["mysql"], indirect=True)
def test_an_error_names_the_same_file_and_offset_on_both_paths(
        server: Any, row_metadata: str, archive: list[Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if compiled("changestream.sinks.spark._arrow_walk") is None:
        pytest.skip("the compiled walk is not built (or CHANGESTREAM_PURE_PYTHON=1)")
    data = bytearray(archive[0].read_bytes())
    # A rows event of a plain transaction, its table id changed to one never mapped (its
    # checksum made again): the walk refuses it, the general path names it.
    offset = 4
    while data[offset + 4] not in (30, 31, 32):
        offset += int.from_bytes(data[offset + 9:offset + 13], "little")
    size = int.from_bytes(data[offset + 9:offset + 13], "little")
    data[offset + 19:offset + 25] = (0x7654321).to_bytes(6, "little")
    data[offset + size - 4:offset + size] = \
        zlib.crc32(data[offset:offset + size - 4]).to_bytes(4, "little")
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / archive[0].name).write_bytes(bytes(data))
    units = plan_units([str(folder)], 0)
    names: dict[int, UnitNames] = {}
    if row_metadata == "MINIMAL":
        recorded = record_history([str(folder / archive[0].name)], "mysql",
                                  shadow_command(server))
        names = {u.index: recorded.for_unit(u) for u in units}
    walked = _decoded(units, tmp_path / "walked", names, None, 1000)
    monkeypatch.setenv("CHANGESTREAM_PURE_PYTHON", "1")
    general = _decoded(units, tmp_path / "general", names, None, 1000)
    assert [m.error for m in walked] == [m.error for m in general]
    assert walked[0].error is not None and f"offset {offset}" in walked[0].error
