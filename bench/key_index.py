"""Benchmark: the Iceberg mirror's key index (sinks/spark/iceberg/key_index.py) at size.

Writes ``--rows`` rows (an integer key and a 20-character name) as Parquet files of
``--file-rows`` rows each, with Iceberg's field ids, builds the index from them as a restart
does (reading the key column only), then times what a batch does: finding ``--batch``
random keys' rows and forgetting them. Prints the Arrow memory the index holds, per row::

    python bench/key_index.py                      # 5,000,000 rows
    python bench/key_index.py --rows 1000000 --batch 1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from changestream.sinks.spark.iceberg.files import FIELD_ID
from changestream.sinks.spark.iceberg.key_index import build_index

KEY = pa.schema([pa.field("id", pa.int64(), False, metadata={FIELD_ID: b"1"})])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--file-rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"key_index: {platform.node()}, {os.cpu_count()} CPUs, {dt.date.today()}, "
          f"{args.rows:,} rows in files of {args.file_rows:,}, batches of {args.batch:,} keys")
    with tempfile.TemporaryDirectory(prefix="changestream-key-index-") as folder:
        lines = ["1"]
        for first in range(0, args.rows, args.file_rows):
            n = min(args.file_rows, args.rows - first)
            ids = pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), first - 1)
            table = pa.table({"id": ids, "name": pa.repeat(pa.scalar("x" * 20), n)},
                             schema=pa.schema([KEY.field("id"), pa.field(
                                 "name", pa.string(), metadata={FIELD_ID: b"2"})]))
            path = Path(folder) / f"{first}.parquet"
            pq.write_table(table, path, compression="zstd")
            lines.append(f"D\t{path}\t{n}")
        before = pa.total_allocated_bytes()
        began = time.perf_counter()
        index = build_index("\n".join(lines), KEY)
        built = time.perf_counter() - began
        assert index is not None and index.rows == args.rows
        held = pa.total_allocated_bytes() - before
        print(f"build from the files: {built:.2f} s; the index holds {held / 1e6:.0f} MB "
              f"({held / args.rows:.1f} bytes a row)")
        rng = random.Random(1)
        for _ in range(args.repeat):
            keys = pa.table({"id": pa.array(rng.sample(range(args.rows), args.batch),
                                            pa.int64())})
            began = time.perf_counter()
            located, missing = index.locate(keys)
            found = time.perf_counter() - began
            began = time.perf_counter()
            index.remove(located)
            removed = time.perf_counter() - began
            assert located.num_rows == args.batch - missing
            print(f"  {args.batch:,} keys: located in {found * 1000:.0f} ms, forgotten in "
                  f"{removed * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
