"""What the binlog committed against what a JSON-lines file holds: the transactions and
changes lost, and the records written twice (the fault suite's and bench/kill_recovery.py's
count)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson

from changestream.cli.scan import scan_transactions
from changestream.sources.files import FileSource


def committed(binlogs: list[Path], database: str, start: tuple[str, int]) -> dict[str, int]:
    """Changes of ``database`` per committed transaction (by GTID), as the binlog has them
    from ``start`` on."""
    out: dict[str, int] = {}
    for t in scan_transactions(FileSource(binlogs, start_file=start[0], start_pos=start[1])):
        rows = sum(sum(c.values()) for name, c in t.tables.items()
                   if name.startswith(f"{database}."))
        if t.status == "committed" and rows and t.gtid:
            out[t.gtid] = rows
    return out


@dataclass(slots=True)
class Ledger:
    """The count: ``lost_transactions`` (none of their changes written), ``lost_changes``,
    ``duplicated`` records, ``foreign`` transactions the binlog did not commit."""

    transactions: int
    changes: int
    records: int
    lost_transactions: int
    lost_changes: int
    duplicated: int
    foreign: int

    @property
    def exactly_once(self) -> bool:
        return not (self.lost_changes or self.duplicated or self.foreign)

    def __str__(self) -> str:
        return (f"committed {self.transactions} transactions, {self.changes} changes; "
                f"{self.records} records; lost {self.lost_transactions} transactions, "
                f"{self.lost_changes} changes; duplicated {self.duplicated} records; "
                f"{self.foreign} transactions not committed")


def count(expected: dict[str, int], out: Path, database: str | None = None) -> Ledger:
    """Compare ``out`` (JSON lines; its row changes, only ``database``'s when given) with
    ``expected`` (from :func:`committed`)."""
    copies: Counter[tuple[str, int]] = Counter()
    for line in out.read_bytes().splitlines() if out.exists() else ():
        record = orjson.loads(line)
        if record["op"] == "ddl" or (database is not None
                                     and record.get("database") != database):
            continue
        t = record["transaction"]
        copies[(t["id"], t["seq"])] += 1
    delivered = {tid for tid, _ in copies}
    present = sum(1 for tid, seq in copies if tid in expected and seq < expected[tid])
    return Ledger(len(expected), sum(expected.values()), sum(copies.values()),
                  len(set(expected) - delivered), sum(expected.values()) - present,
                  sum(n - 1 for n in copies.values() if n > 1), len(delivered - set(expected)))
