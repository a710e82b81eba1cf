"""On every corpus file, the assembler's quick paths (images straight from the values, whole
transactions in one part) deliver exactly what its general paths deliver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changestream.decoding.events import Event
from changestream.model.changes import Change
from changestream.transactions import assembler as assembler_module
from changestream.transactions import row_changes
from changestream.transactions.assembler import TransactionAssembler
from changestream.transactions.filters import ChangeFilter
from tests.corpus.reference import corpus_params
from tests.corpus.test_assembler_corpus import _read


def _delivered(events: list[Event], tmp_path: Path, **options: Any) -> list[Any]:
    assembler = TransactionAssembler(spill_dir=str(tmp_path), **options)
    out: list[Any] = []
    for start in range(0, len(events), 50):
        for event in events[start:start + 50]:
            assembler.feed(event)
        for parts, position in assembler.drain(max_changes=7):
            out.append(("message", position))
            for part in parts:
                out.append(("part", part.info, part.complete, len(part.changes)))
                out.extend(_fields(c) for c in part.changes)
    return out


def _fields(c: Change) -> tuple[Any, ...]:
    return tuple(getattr(c, name) for name in Change.__slots__)


def _general_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    def image_rows(event: Any, shape: Any, sql: Any, file: str, out: Any) -> None:
        row_changes.image_row_changes(event, shape, True, sql, file, out)

    monkeypatch.setattr(assembler_module, "direct_row_changes", image_rows)


@pytest.mark.parametrize("relative", corpus_params())
def test_quick_paths_deliver_what_the_general_paths_deliver(
        relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _read(relative)
    quick = _delivered(events, tmp_path)
    with monkeypatch.context() as m:
        _general_paths(m)
        general = _delivered(events, tmp_path)
    assert quick == general


def test_quick_paths_with_spilling_and_excluded_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _read("osheroff/mysql-bin.sakila.gz")
    options = {"max_buffered_changes": 5,
               "change_filter": ChangeFilter(exclude_columns=["*.*.last_update"])}
    quick = _delivered(events, tmp_path, **options)
    with monkeypatch.context() as m:
        _general_paths(m)
        general = _delivered(events, tmp_path, **options)
    assert quick == general
    assert any(isinstance(x, tuple) and x[0] == "part" and not x[2] for x in quick)
