"""``async for`` over a TransactionStream (pytest-asyncio): committed transactions in
binlog order, a rolled-back one absent, each part acknowledged when the next is asked
for, and the stream ending when caught up."""

from __future__ import annotations

from typing import Any

import pytest

from changestream import RouterSettings, TransactionStream
from changestream.transactions.filters import ChangeFilter

pytestmark = pytest.mark.integration


async def test_async_for_gives_the_committed_transactions_in_order(
        server: Any, fresh_database: str) -> None:
    db = fresh_database
    start = server.binlog_position()
    server.execute([f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')"])
    with server.connect(autocommit=False) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO `{db}`.t VALUES (3, 'never')")
        conn.rollback()
        cur.execute(f"UPDATE `{db}`.t SET v = 'c' WHERE id = 2")
        cur.execute(f"DELETE FROM `{db}`.t WHERE id = 1")
        conn.commit()
    settings = RouterSettings(source=server.url, start=f"{start[0]}:{start[1]}",
                              until="caught-up", filter=ChangeFilter(include=[db]))
    seen = []
    with TransactionStream(settings) as stream:
        async for part in stream:
            seen.append([(c.op, c.after or c.before) for c in part.changes])
    assert seen == [
        [("ddl", None)],
        [("insert", {"id": 1, "v": "a"}), ("insert", {"id": 2, "v": "b"})],
        [("update", {"id": 2, "v": "c"}), ("delete", {"id": 1, "v": "a"})],
    ]
