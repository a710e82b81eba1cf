"""Benchmark: how long a new ``changestream run`` takes to its first record, and where the
time goes.

Starts a private MariaDB, writes one small transaction, then runs ``--repeat`` new
processes of ``changestream run --until caught-up`` from just before it into a JSON-lines
file, and prints for each the time to the first record (from the process's start to the
record in the file) and to its exit, beside a plain interpreter's start, the time the
libraries a run needs take to import alone (PyMySQL, ``ssl``, orjson, pykka: the floor)
and the time the command's imports take (``python -c "import changestream.cli.run"``),
medians::

    python bench/start.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from changestream.devserver import EmbeddedMariaDB

#: What a run imports that is not changestream's: the floor of its start.
LIBRARIES = "pymysql, ssl, orjson, pykka"


def _timed(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - began


def _first_record(command: list[str], out: Path) -> tuple[float, float]:
    """Seconds from the start of ``command`` to the first line in ``out``, and to its
    exit."""
    out.unlink(missing_ok=True)
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first = None
    while first is None:
        if out.exists() and out.stat().st_size and b"\n" in out.read_bytes():
            first = time.perf_counter() - began
        elif process.poll() is not None:
            break
        else:
            time.sleep(0.001)
    _, err = process.communicate(timeout=60)
    ended = time.perf_counter() - began
    if process.returncode != 0 or first is None:
        raise SystemExit(f"changestream run failed: {err.decode()[-2000:]}")
    return first, ended


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, EmbeddedMariaDB() as server:
        server.execute(["CREATE DATABASE bench", "CREATE TABLE bench.t (id INT PRIMARY KEY, "
                        "v VARCHAR(20))"])
        file, pos = server.binlog_position()
        server.execute("INSERT INTO bench.t VALUES (1, 'one')")
        out = Path(folder) / "out.jsonl"
        command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
                   "--start", f"{file}:{pos}", "--until", "caught-up", "--include", "bench",
                   "--sink", f"jsonl:{out}", "--no-preflight"]
        runs = [_first_record(command, out) for _ in range(args.repeat)]
        interpreter = [_timed([sys.executable, "-c", "pass"]) for _ in range(args.repeat)]
        imports = [_timed([sys.executable, "-c", "import changestream.cli.run"])
                   for _ in range(args.repeat)]
        libraries = [_timed([sys.executable, "-c", f"import {LIBRARIES}"])
                     for _ in range(args.repeat)]
    median = statistics.median
    print(f"medians of {args.repeat} new processes:")
    print(f"  interpreter alone          {median(interpreter):.3f} s")
    print(f"  + the libraries alone ({LIBRARIES}) {median(libraries):.3f} s")
    print(f"  + the run command's imports {median(imports):.3f} s")
    print(f"  to the first record         {median(r[0] for r in runs):.3f} s")
    print(f"  to the process's exit       {median(r[1] for r in runs):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
