"""A Spark callback: each micro-batch's changes as Spark DataFrames, one per source table,
for Spark code of your own (as Structured Streaming's ``foreachBatch``). Here: how many
rows each table got per operation, appended to a Parquet table of batch summaries.

    python examples/spark_callback.py mariadb://repl@127.0.0.1:3306 shop summaries/ \\
        --until caught-up

Needs ``pip install 'changestream[spark]'``. Read the summaries back with
``spark.read.parquet("summaries/")``.
"""

from __future__ import annotations

import argparse
from typing import Any

import changestream
from changestream.sinks.spark import SparkSink


def summarize(out: str) -> Any:
    """The callback: ``(batch_id, DataFrames by "db.table", batch info)``."""

    def land(batch_id: int, frames: dict[str, list[Any]], info: Any) -> None:
        from pyspark.sql import functions as F

        for table, dataframes in frames.items():
            for df in dataframes:  # one per table shape in the batch
                counts = df.groupBy("_op").count().withColumnRenamed("count", "rows")
                counts = counts.select(F.lit(batch_id).alias("batch"),
                                       F.lit(table).alias("table"), "_op", "rows")
                counts.write.mode("append").parquet(out)
                for row in counts.collect():
                    print(f"batch {batch_id} {table} {row['_op']} {row['rows']}")
        print(f"batch {batch_id}: {info.changes} changes in {info.transactions} "
              f"transactions, up to {info.position}")

    return land


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="mysql:// or mariadb:// URL of the server")
    parser.add_argument("database", help="the database to follow")
    parser.add_argument("out", help="the folder of the summaries' Parquet table")
    parser.add_argument("--start", help="where to begin (FILE:POS, gtid:SET, earliest)")
    parser.add_argument("--until", help="stop there: caught-up, FILE:POS or gtid:SET")
    parser.add_argument("--master", default="local[1]", help="Spark master (local[1])")
    args = parser.parse_args(argv)

    overrides = {"source.url": args.source, "filter.include": [args.database],
                 "snapshot.mode": "never"}
    for key, value in (("start.at", args.start), ("start.until", args.until)):
        if value is not None:
            overrides[key] = value
    router = changestream.Router(changestream.load_config(overrides=overrides),
                                 sink=SparkSink("callback", function=summarize(args.out),
                                                master=args.master))
    router.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
