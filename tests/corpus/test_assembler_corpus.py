"""The transaction assembler on real recorded binlogs: every committed row change is
delivered once, in transactions numbered and stamped consistently, at non-decreasing
positions, and spilling big transactions to disk changes nothing in the output."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from changestream.cli.scan import scan_transactions
from changestream.decoding.ddl import parse_ddl
from changestream.decoding.events import Event, QueryEvent, RowsQueryEvent
from changestream.model.changes import Change, Position, TransactionPart
from changestream.model.errors import BinlogError
from changestream.sources import FileSource
from changestream.transactions.assembler import TransactionAssembler
from tests.corpus.reference import CORPUS, corpus_params

_events: dict[str, list[Event] | None] = {}


def _read(relative: str) -> list[Event]:
    """All events of a corpus file (cached); the test is skipped for files the reader refuses
    (tests/corpus/test_corpus_files.py checks those refusals)."""
    if relative not in _events:
        try:
            _events[relative] = list(FileSource([CORPUS / relative]))
        except BinlogError:
            _events[relative] = None
    events = _events[relative]
    if events is None:
        pytest.skip(f"{relative} is refused by the reader")
    return events


def _assemble(events: list[Event], tmp_path: Path,
              **options: int) -> list[tuple[list[TransactionPart], Position | None]]:
    assembler = TransactionAssembler(spill_dir=str(tmp_path), **options)
    for event in events:
        assembler.feed(event)
    return list(assembler.drain())


def _transactions(messages: list[tuple[list[TransactionPart], Position | None]]
                  ) -> Iterator[list[Change]]:
    """The changes of each transaction, joined across its parts."""
    current: list[Change] = []
    for parts, _position in messages:
        for part in parts:
            current.extend(part.changes)
            if part.complete:
                yield current
                current = []
    assert current == [], "the last transaction has no complete part"


def _committed_row_counts(events: list[Event]) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()
    for t in scan_transactions(events, on_warning=lambda m: None):
        if t.status != "committed":  # rolled back, prepared and never committed, cut short
            continue
        for table, ops in t.tables.items():
            for op, n in ops.items():
                if n:
                    counts[(table, op)] += n
    return counts


def _row_counts(transactions: list[list[Change]]) -> Counter[tuple[str, str]]:
    return Counter((f"{c.database}.{c.table}", c.op) for changes in transactions
                   for c in changes if c.op != "ddl")


def _shape(transactions: list[list[Change]]) -> list[list[tuple[object, ...]]]:
    return [[(c.op, c.database, c.table, c.before, c.after, c.seq, c.last) for c in changes]
            for changes in transactions]


FILES = corpus_params()


@pytest.mark.parametrize("relative", FILES)
def test_every_committed_row_change_is_delivered_once(relative: str, tmp_path: Path) -> None:
    events = _read(relative)
    transactions = list(_transactions(_assemble(events, tmp_path)))
    assert _row_counts(transactions) == _committed_row_counts(events)


@pytest.mark.parametrize("relative", FILES)
def test_each_transaction_is_numbered_and_stamped_consistently(relative: str,
                                                               tmp_path: Path) -> None:
    events = _read(relative)
    gtids = {t.gtid for t in scan_transactions(events, on_warning=lambda m: None) if t.gtid}
    for changes in _transactions(_assemble(events, tmp_path)):
        info = changes[0].transaction
        assert info is not None
        assert [c.seq for c in changes] == list(range(len(changes)))
        assert [c.last for c in changes] == [False] * (len(changes) - 1) + [True]
        assert all(c.transaction is info for c in changes)
        assert info.size == len(changes)
        if info.gtid is not None:
            assert info.id == info.gtid
            assert info.gtid in gtids
        assert info.start < info.end
        assert info.commit_ts is not None and info.commit_ts.tzinfo is not None


@pytest.mark.parametrize("relative", FILES)
def test_each_ddl_statement_is_a_transaction_of_its_own(relative: str, tmp_path: Path) -> None:
    events = _read(relative)
    expected = [e.query for e in events
                if isinstance(e, QueryEvent) and parse_ddl(e.query, e.database) is not None]
    ddl = [changes for changes in _transactions(_assemble(events, tmp_path))
           if any(c.op == "ddl" for c in changes)]
    assert [changes[0].sql for changes in ddl] == expected
    assert all(len(changes) == 1 for changes in ddl)


@pytest.mark.parametrize("relative", FILES)
def test_positions_never_go_back(relative: str, tmp_path: Path) -> None:
    events = _read(relative)
    positions = [p for _, p in _assemble(events, tmp_path) if p is not None]
    offsets = [(p.file, p.pos) for p in positions]
    assert offsets == sorted(offsets)
    last_end = max(e.header.end for e in events)
    assert all(pos <= last_end for _, pos in offsets)


@pytest.mark.parametrize("relative", FILES)
def test_spilling_to_disk_gives_identical_output(relative: str, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    events = _read(relative)
    in_memory = list(_transactions(_assemble(events, tmp_path)))
    caplog.set_level(logging.INFO, logger="changestream")
    spilled = list(_transactions(_assemble(events, tmp_path, max_buffered_changes=50)))
    assert _shape(spilled) == _shape(in_memory)
    if max((len(t) for t in in_memory), default=0) > 50:
        assert "spilling to disk" in caplog.text
    assert [c[0].transaction.id for c in spilled] == [c[0].transaction.id for c in in_memory]


def test_the_corpus_has_a_transaction_big_enough_to_spill(tmp_path: Path) -> None:
    """The spilling comparison above means something: some transaction passes 50 changes."""
    biggest = 0
    for relative in FILES:
        try:
            events = _read(relative)
        except pytest.skip.Exception:
            continue
        for changes in _transactions(_assemble(events, tmp_path)):
            biggest = max(biggest, len(changes))
    assert biggest > 50


@pytest.mark.parametrize("relative", ["rust_mysql_common/mariadb-bin.000001",
                                      "mariadb-test-data/master-bin-seq_10.3.36.000001",
                                      "apecloud/mysql-bin.000057"])
def test_row_statements_only_with_include_sql(relative: str, tmp_path: Path) -> None:
    events = _read(relative)
    flat = [inner for e in events for inner in getattr(e, "events", None) or [e]]
    annotated = {e.query for e in flat if isinstance(e, RowsQueryEvent)}
    assert annotated, f"{relative} has no ANNOTATE_ROWS / ROWS_QUERY event"
    with_sql = [c for t in _transactions(_assemble(events, tmp_path, include_sql=True))
                for c in t]
    without = [c for t in _transactions(_assemble(events, tmp_path, include_sql=False))
               for c in t]
    rows = [c for c in with_sql if c.op != "ddl"]
    assert rows and all(c.sql in annotated for c in rows)
    assert all(c.sql is None for c in without if c.op != "ddl")
    assert [c.sql for c in without if c.op == "ddl"] == [c.sql for c in with_sql
                                                         if c.op == "ddl"]
    assert [(c.op, c.before, c.after, c.seq) for c in without] == \
        [(c.op, c.before, c.after, c.seq) for c in with_sql]
