"""On every corpus file, the row readers generated per schema decode the same values as the
generic per-value readers."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from changestream.decoding import rows as rows_module
from changestream.decoding.events import RowsEvent
from changestream.model.errors import BinlogError
from changestream.sources import FileSource
from tests.corpus.reference import CORPUS
from tests.corpus.test_corpus_files import READ_COMPLETELY


def _rows(path: str) -> list[tuple[int, Any, bool]]:
    """``(offset, rows, whether every column is logged)`` of each rows event."""
    out = []
    try:
        for event in FileSource([CORPUS / path]):
            if isinstance(event, RowsEvent):
                full = len(event.present) == len(event.schema.columns)
                out.append((event.header.offset, event.rows, full))
    except BinlogError as exc:
        out.append((-1, str(exc), False))
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and type(b) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) is not type(b) or a != b:
        return False
    return not isinstance(a, Decimal) or a.as_tuple() == b.as_tuple()


@pytest.mark.parametrize("path", READ_COMPLETELY)
def test_generated_row_readers_decode_the_corpus_like_the_generic_readers(
        path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = 0
    real = rows_module.compile_readers

    def counting(schema: Any) -> Any:
        nonlocal compiled
        readers = real(schema)
        compiled += readers is not None
        return readers

    monkeypatch.setattr(rows_module, "compile_readers", counting)
    fast = _rows(path)
    monkeypatch.setattr(rows_module, "compile_readers", lambda schema: None)
    generic = _rows(path)
    assert len(fast) == len(generic)
    for (offset, a, _), (_, b, _) in zip(fast, generic, strict=True):
        assert _same(a, b), f"rows event at offset {offset} decodes differently"
    if any(rows and full for _, rows, full in generic):
        assert compiled, "no rows event went through the generated readers"
