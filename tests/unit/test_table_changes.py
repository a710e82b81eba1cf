"""Tables added and paused while running, as the positions keep them."""

from __future__ import annotations

from changestream.model.changes import Position
from changestream.model.table_changes import TableChanges
from changestream.snapshot.chunks import ChunkQuery
from changestream.snapshot.progress import SnapshotProgress


def test_adding_pausing_and_resuming_tables() -> None:
    changes = TableChanges().add(["shop.a", "shop.b", "shop.a"]).pause(["shop.c", "shop.b"])
    assert changes == TableChanges(("shop.a", "shop.b"), ("shop.c", "shop.b"))
    assert changes.resume(["shop.b"]) == TableChanges(("shop.a", "shop.b"), ("shop.c",))
    assert changes.add(["shop.c"]).paused == ("shop.b",)  # added again: no longer paused
    assert not TableChanges()
    assert changes.resume(["shop.c", "shop.b"]) == TableChanges(("shop.a", "shop.b"))


def test_a_position_keeps_the_changes_and_a_snapshots_conditions() -> None:
    changes = TableChanges(("shop.a",), ("shop.b",))
    progress = SnapshotProgress("s1", ("shop.a",), where={"shop.a": "id > 5"})
    position = Position("binlog.000002", 400, tables=changes.as_dict(),
                        snapshot=progress.as_dict())
    again = Position.from_dict(position.as_dict())
    assert TableChanges.from_dict(again.tables) == changes
    assert again.snapshot is not None
    assert SnapshotProgress.from_dict(again.snapshot).where == {"shop.a": "id > 5"}
    assert "tables" not in Position("binlog.000002", 4).as_dict()
    assert "where" not in SnapshotProgress("s2", ("shop.a",)).as_dict()


def test_a_chunk_query_with_a_condition_keeps_its_percent_signs_through_formatting() -> None:
    query = ChunkQuery("shop", "a", ("id", "v"), ("id",), 100, where="v LIKE 'b%'")
    sql, args = query.select((7,))
    assert sql == ("SELECT `id`, `v` FROM `shop`.`a` WHERE (v LIKE 'b%%') AND `id` > %s "
                   "ORDER BY `id` LIMIT 100")
    assert args == (7,)
    assert sql % ("7",) == ("SELECT `id`, `v` FROM `shop`.`a` WHERE (v LIKE 'b%') AND "
                            "`id` > 7 ORDER BY `id` LIMIT 100")
