"""``python -m changestream.sinks.spark.jvm.prepare``: have the driver JVM's class-data
archive (:mod:`.class_sharing`) written now, as the install script does, rather than by the
first Spark run.

Without an archive, a machine's first ``changestream run --sink spark:iceberg`` starts its
JVM without one (its open 4-5 s instead of about 2) and that JVM then rehearses a batch's
commits and writes the archive as it exits (some 7 s after the run's own end; 12.5 s in
all for a run with nothing to land). This opens an Iceberg sink on a warehouse in a
temporary folder and closes it, which does the same. It prints what it did; it exits 0
also when it could not (no Java, say): the runs then write the archive themselves. A
caller that reads its output to the end has waited for the JVM writing the archive (the
JVM writes to the same output).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from changestream.sinks.spark.jvm.class_sharing import default_folder


def main() -> int:
    from changestream.sinks.spark.session import writes_class_archive
    from changestream.sinks.spark.sink import SparkSink

    try:
        with tempfile.TemporaryDirectory(prefix="changestream-prepare-") as folder:
            sink = SparkSink(mode="iceberg", warehouse=str(Path(folder) / "warehouse"))
            sink.open()
            try:
                options = sink.spark.sparkContext.getConf().get(
                    "spark.driver.extraJavaOptions", "") or ""
                state = "being written" if writes_class_archive(sink.spark) else (
                    "there already" if "-XX:SharedArchiveFile=" in options else
                    "not used by this start (another start is writing it, or sharing is "
                    "off)")
            finally:
                sink.close()
    except Exception as exc:  # the first Spark run writes it instead
        print(f"changestream: the driver JVM's class-data archive was not written "
              f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); the first "
              "Spark run writes it", flush=True)
        return 0
    print(f"changestream: the driver JVM's class-data archive is {state} in "
          f"{default_folder()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
