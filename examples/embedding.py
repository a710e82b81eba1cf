"""Embedding changestream: a program of your own that follows a server's committed
transactions and counts the changes per table and operation.

    python examples/embedding.py mariadb://repl:secret@127.0.0.1:3306 shop \\
        --position-file shop.position --until caught-up

With a position file a restart goes on after the last transaction the loop finished
(a transaction counts as delivered when the loop asks for the next one); without
``--until`` it follows the server until interrupted.
"""

from __future__ import annotations

import argparse
from collections import Counter

import changestream


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="mysql:// or mariadb:// URL of the server")
    parser.add_argument("database", help="the database to follow")
    parser.add_argument("--position-file", help="where to keep the position")
    parser.add_argument("--start", help="where to begin without a saved position "
                        "(FILE:POS, gtid:SET, earliest, latest)")
    parser.add_argument("--until", help="stop there: caught-up, FILE:POS or gtid:SET")
    args = parser.parse_args(argv)

    overrides = {"source.url": args.source, "filter.include": [args.database],
                 "snapshot.mode": "never"}
    for key, value in (("start.position_file", args.position_file),
                       ("start.at", args.start), ("start.until", args.until)):
        if value is not None:
            overrides[key] = value
    config = changestream.load_config(overrides=overrides)

    counts: Counter[tuple[str, str]] = Counter()
    with changestream.TransactionStream(config) as transactions:
        for part in transactions:
            for change in part.changes:
                counts[(change.table or "-", change.op)] += 1
            if part.complete:
                when = part.info.commit_ts.isoformat() if part.info.commit_ts else "?"
                print(f"transaction {part.info.id} at {when}: {part.info.size} changes")
    for (table, op), n in sorted(counts.items()):
        print(f"{table} {op} {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
