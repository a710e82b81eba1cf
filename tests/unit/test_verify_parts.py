"""The verifier's pure parts: comparing rows by key, and the keys a window changed."""

from __future__ import annotations

from typing import Any

from changestream.model.changes import (
    Batch,
    Change,
    Position,
    TransactionInfo,
    TransactionPart,
)
from changestream.verify.changed_keys import _KeyNotes
from changestream.verify.verifier import Difference, VerifyReport, compare

INFO = TransactionInfo("0-1-7", "0-1-7", 3, None, 3, 1, "bin.000002", 4, 900)


def test_compare_names_missing_and_differing_rows_but_not_the_left_out() -> None:
    source = {(1,): {"id": 1, "a": 1}, (2,): {"id": 2, "a": 2}, (3,): {"id": 3, "a": 3},
              (4,): {"id": 4, "a": None}}
    mirror = {(1,): {"id": 1, "a": 1}, (2,): {"id": 2, "a": 20}, (4,): {"id": 4, "a": 0}}
    assert compare(source, mirror, set()) == [
        Difference((2,), "differs", ("a",)), Difference((3,), "missing"),
        Difference((4,), "differs", ("a",))]
    assert compare(source, mirror, {(2,), (3,)}) == [Difference((4,), "differs", ("a",))]


def test_a_report_is_plain_json() -> None:
    report = VerifyReport("d.t", rows=3, chunks=1, differences=[
        Difference((b"\x01", 2), "extra")])
    assert report.as_dict()["keys"] == [{"key": ["01", 2], "kind": "extra", "columns": []}]
    assert report.as_dict()["differences"] == 1


def _change(op: str, pos: int, before: dict[str, Any] | None, after: dict[str, Any] | None,
            table: str = "t") -> Change:
    return Change(op, "d", table, before, after, None, None, "bin.000002", pos, 0)


def test_the_notes_keep_each_changes_keys_where_it_was_logged() -> None:
    notes = _KeyNotes("d", "t", ("k", "n"))
    changes = [
        _change("insert", 100, None, {"k": "a", "n": 1, "v": 0}),
        _change("update", 200, {"k": "a", "n": 1}, {"k": "b", "n": 1}),  # a key move
        _change("insert", 300, None, {"k": "x", "n": 9}, table="other"),
        _change("ddl", 400, None, None),
    ]
    notes.write(Batch(1, [TransactionPart(INFO, changes)], Position("bin.000002", 450)))
    assert notes.changes == [(("bin", 2, 100), ("a", 1)), (("bin", 2, 200), ("a", 1)),
                             (("bin", 2, 200), ("b", 1))]
    assert notes.ddl == [("bin", 2, 400)]
    assert notes.read_to == ("bin", 2, 450)
