"""The resume position on disk: saved and loaded whole, replaced atomically, and a file that
is not a position refused with an error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from changestream.delivery.position_store import PositionStore
from changestream.model.changes import Position
from changestream.model.errors import ConfigError

MYSQL = Position("binlog.000012", 4711, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42:tag:1-3",
                 "mysql", {"'x1',,1": "binlog.000011:1200"})
MARIADB = Position("mariadb-bin.000002", 385, "0-1-42,1-2-7", "mariadb")


def test_nothing_saved_yet_loads_as_none(tmp_path: Path) -> None:
    store = PositionStore(tmp_path / "position.json")
    assert store.load() is None
    assert store.last_batch_id == 0


@pytest.mark.parametrize("position", [MYSQL, MARIADB, Position("f.000001", 4)])
def test_save_then_load_gives_the_same_position(tmp_path: Path, position: Position) -> None:
    path = tmp_path / "position.json"
    PositionStore(path).save(position)
    assert PositionStore(path).load() == position


def test_the_batch_id_is_kept_with_the_position(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    store = PositionStore(path)
    store.save(MYSQL, batch_id=17)
    assert store.last_batch_id == 17
    again = PositionStore(path)
    assert again.load() == MYSQL
    assert again.last_batch_id == 17


def test_saving_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "state" / "router" / "position.json"
    PositionStore(path).save(MARIADB)
    assert PositionStore(path).load() == MARIADB


def test_a_save_replaces_the_previous_position_and_leaves_no_temporary_file(
        tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    store = PositionStore(path)
    store.save(MYSQL, batch_id=1)
    store.save(MARIADB, batch_id=2)
    assert PositionStore(path).load() == MARIADB
    assert sorted(p.name for p in tmp_path.iterdir()) == ["position.json"]


def test_the_file_is_replaced_not_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    store = PositionStore(path)
    store.save(MYSQL)
    old_inode = path.stat().st_ino
    store.save(MARIADB)
    assert path.stat().st_ino != old_inode


def test_a_save_that_fails_midway_leaves_the_old_position(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    store = PositionStore(path)
    store.save(MYSQL, batch_id=3)
    unwritable = Position("binlog.000013", 4, object(), "mysql")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.save(unwritable)
    assert PositionStore(path).load() == MYSQL


def test_the_file_is_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    PositionStore(path).save(MARIADB, batch_id=5)
    assert json.loads(path.read_text()) == {
        "file": "mariadb-bin.000002", "pos": 385, "gtid_set": "0-1-42,1-2-7",
        "flavor": "mariadb", "pending_xa": {}, "batch_id": 5}


@pytest.mark.parametrize("content", [
    b"",
    b"{\"file\": \"binlog.000001\", \"pos\": 4",  # torn
    b"not json at all",
    b"{\"pos\": 4}",  # no file
    b"{\"file\": \"binlog.000001\", \"pos\": \"four\"}",
    b"{\"file\": \"binlog.000001\", \"pos\": 4, \"batch_id\": \"x\"}",
    b"[1, 2, 3]",
    b"null",
    b"\xff\xfe\x00garbage",
])
def test_a_corrupt_file_is_a_config_error_naming_the_file(tmp_path: Path,
                                                          content: bytes) -> None:
    path = tmp_path / "position.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        PositionStore(path).load()
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_the_sink_state_travels_with_the_position(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    position = Position("f.000001", 4, sink={"path": "/x/out.jsonl", "length": 42})
    PositionStore(path).save(position)
    again = PositionStore(path)
    assert again.load() == position
    assert again.sink_state == {"path": "/x/out.jsonl", "length": 42}


def test_a_baseline_before_the_first_position_loads_as_no_position(tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    PositionStore(path).save_baseline({"path": "/x/out.jsonl", "length": 0})
    again = PositionStore(path)
    assert again.load() is None
    assert again.sink_state == {"path": "/x/out.jsonl", "length": 0}
