"""Tagged GTIDs (MySQL 8.4+): GTID_TAGGED events and PREVIOUS_GTIDS sets holding tags, as
MySQL 9.7 writes them, decoded by changestream exactly as ``mysqlbinlog`` decodes them; and
a live source started from a GTID set that holds a tag."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from changestream.cli.scan import scan_transactions
from changestream.decoding import event_types as et
from changestream.decoding.events import GtidEvent, PreviousGtidsEvent, RowsEvent
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition

pytestmark = pytest.mark.integration

TAG = "mytag"


def _mysqlbinlog(server: Any, path: Path) -> str:
    return subprocess.run([*server.tool("mysqlbinlog"), str(path)], capture_output=True, text=True,
                          check=True).stdout


_GTID_EVENT = re.compile(
    r"^# at (\d+)\n#[^\n]*\tGTID\t([^\n]*)\n(.*?)^SET @@SESSION\.GTID_NEXT= '([^']+)'",
    re.M | re.S)


def _mysqlbinlog_gtids(text: str) -> dict[int, dict[str, Any]]:
    """What mysqlbinlog says about each GTID event, by offset."""
    out = {}
    for m in _GTID_EVENT.finditer(text):
        fields = dict(kv.split("=", 1) for kv in m.group(2).split("\t") if "=" in kv)
        versions = dict(re.findall(r"SET @@session\.(\w+_server_version)=(\d+)", m.group(3)))
        out[int(m.group(1))] = {
            "gtid": m.group(4),
            "last_committed": int(fields["last_committed"]),
            "sequence_number": int(fields["sequence_number"]),
            "original_commit_ts": int(fields["original_committed_timestamp"]),
            "immediate_commit_ts": int(fields["immediate_commit_timestamp"]),
            "transaction_length": int(fields["transaction_length"]),
            "original_server_version": int(versions["original_server_version"]),
            "immediate_server_version": int(versions["immediate_server_version"]),
        }
    return out


def _as_mysqlbinlog_prints(e: GtidEvent) -> dict[str, Any]:
    return {
        "gtid": e.gtid, "last_committed": e.last_committed,
        "sequence_number": e.sequence_number, "original_commit_ts": e.original_commit_ts,
        "immediate_commit_ts": e.immediate_commit_ts,
        "transaction_length": e.transaction_length,
        "original_server_version": e.original_server_version,
        "immediate_server_version": e.immediate_server_version,
    }


def _path(server: Any, name: str) -> Path:
    (path,) = [p for p in server.binlog_files() if p.name == name]
    return path


@pytest.fixture
def tagged_binlog(mysql: Any) -> tuple[Path, Path, str]:
    """A binlog file holding tagged and untagged transactions, the file after it, and
    ``@@gtid_executed`` when the first one was closed."""
    mysql.execute("FLUSH BINARY LOGS")
    name, _ = mysql.binlog_position()
    db = "gtid_tagged"
    mysql.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}",
                   f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))"])
    mysql.execute([f"SET gtid_next = 'AUTOMATIC:{TAG}'", "BEGIN",
                   f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')",
                   f"UPDATE {db}.t SET v = 'c' WHERE id = 1", "COMMIT",
                   f"INSERT INTO {db}.t VALUES (3, 'tagged')",  # still tagged: AUTOMATIC:tag
                   "SET gtid_next = 'AUTOMATIC'",
                   f"INSERT INTO {db}.t VALUES (4, 'untagged')"])
    executed = mysql.execute("SELECT @@global.gtid_executed")[0][0]
    mysql.execute("FLUSH BINARY LOGS")
    next_name, _ = mysql.binlog_position()
    return _path(mysql, name), _path(mysql, next_name), executed


def test_gtid_tagged_events_decode_as_mysqlbinlog_reads_them(
        mysql: Any, tagged_binlog: tuple[Path, Path, str]) -> None:
    path, _, _ = tagged_binlog
    events = list(FileSource([path]))
    ours = {e.header.offset: _as_mysqlbinlog_prints(e) for e in events
            if isinstance(e, GtidEvent)}
    theirs = _mysqlbinlog_gtids(_mysqlbinlog(mysql, path))
    assert ours == theirs
    tagged = [e for e in events if e.header.type_code == et.GTID_TAGGED]
    assert [e.tag for e in tagged] == [TAG, TAG]
    assert [e.gno for e in tagged] == sorted(e.gno for e in tagged)
    assert all(isinstance(e, GtidEvent) and e.sid == tagged[0].sid for e in tagged)
    untagged = [e for e in events if e.header.type_code == et.GTID]
    assert untagged and all(e.tag is None and e.sid == tagged[0].sid for e in untagged)


def test_tagged_transactions_are_whole_and_as_long_as_their_gtid_event_says(
        tagged_binlog: tuple[Path, Path, str]) -> None:
    path, _, _ = tagged_binlog
    transactions = [t for t in scan_transactions(FileSource([path])) if t.gtid]
    tagged = [t for t in transactions if f":{TAG}:" in (t.gtid or "")]
    assert [(t.kind, t.status, t.tables) for t in tagged] == [
        ("dml", "committed", {"gtid_tagged.t": {"insert": 2, "update": 1, "delete": 0}}),
        ("dml", "committed", {"gtid_tagged.t": {"insert": 1, "update": 0, "delete": 0}}),
    ]
    for t in transactions:
        assert t.transaction_length == t.end - t.start, t.gtid


def test_previous_gtids_with_a_tag_decode_as_mysqlbinlog_reads_them(
        mysql: Any, tagged_binlog: tuple[Path, Path, str]) -> None:
    _, next_path, executed = tagged_binlog
    (previous,) = [e for e in FileSource([next_path]) if isinstance(e, PreviousGtidsEvent)]
    assert f":{TAG}:" in previous.gtid_set
    assert previous.gtid_set == re.sub(r"\s", "", executed)
    printed = re.search(r"\tPrevious-GTIDs\n((?:# [^\n]*\n)+)", _mysqlbinlog(mysql, next_path))
    assert printed is not None
    assert previous.gtid_set == re.sub(r"[#\s]", "", printed.group(1))


def test_live_source_starts_from_a_gtid_set_holding_a_tag(
        mysql: Any, tagged_binlog: tuple[Path, Path, str]) -> None:
    _, _, executed = tagged_binlog
    mysql.execute([f"SET gtid_next = 'AUTOMATIC:{TAG}'",
                   "INSERT INTO gtid_tagged.t VALUES (5, 'later')"])
    connection = {"host": "127.0.0.1", "port": mysql.port, "user": "root", "password": ""}
    events = list(LiveSource(connection, StartPosition.parse(f"gtid:{executed}"),
                             blocking=False))
    gtids = [e for e in events if isinstance(e, GtidEvent)]
    rows = [row for e in events if isinstance(e, RowsEvent) for row in e.rows]
    assert [(e.tag, e.header.type_code) for e in gtids] == [(TAG, et.GTID_TAGGED)]
    assert rows == [[5, "later"]]
