"""Debezium's MySQL connector as a bench reader: one process that writes each row change
of the bench's table as one JSON line and stops after a given number of them.

It runs Debezium 3.6's embedded engine through ``pydbzengine`` (its jars, a JVM through
JPype; Java 17) as a replica of the bench's server. Debezium 3.6 has no snapshot mode
that streams from a given binlog position, so the reader writes that position as the
engine's stored offset before it starts and runs in ``snapshot.mode=recovery``: the table
schemas are read from the server (no rows), then the binlog is read from the offset.
Records are the connector's JSON values without schemas (``decimal.handling.mode=string``)::

    python bench/debezium_reader.py PORT BINLOG_FILE POSITION ROWS OUT.jsonl WORK_DIR

``--check`` only says whether it can run (exit 0) or why not (exit 1, one line on stderr).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import IO, Any

ENGINE_NAME = "bench-debezium"
TOPIC_PREFIX = "bench"
LOG4J = """rootLogger.level=WARN
appender.console.type=Console
appender.console.name=console
appender.console.target=SYSTEM_ERR
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=%d [%p] %c{1} - %m%n
rootLogger.appenderRef.console.ref=console
"""
JUL = "handlers=java.util.logging.ConsoleHandler\n.level=WARNING\n"  # the binlog client's


def unavailable() -> str | None:
    """Why Debezium cannot run here (``None``: it can)."""
    if shutil.which("java") is None:
        return "no java on the PATH (Debezium 3.6 needs Java 17)"
    try:
        import jpype
        import pydbzengine  # noqa: F401
    except ImportError as error:
        return f"{error.name} is not installed (pip install pydbzengine)"
    try:
        jpype.getDefaultJVMPath()
    except jpype.JVMNotFoundException as error:
        return f"JPype finds no JVM: {error}"
    return None


def properties(port: int, work: Path) -> dict[str, str]:
    """The connector's settings: the bench's table on 127.0.0.1 as root, files in ``work``."""
    return {
        "name": ENGINE_NAME,
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "127.0.0.1", "database.port": str(port),
        "database.user": "root", "database.password": "",
        "database.server.id": "4245", "topic.prefix": TOPIC_PREFIX,
        "database.include.list": "bench", "table.include.list": "bench.t",
        "snapshot.mode": "recovery", "snapshot.locking.mode": "none",
        "include.schema.changes": "false", "tombstones.on.delete": "false",
        "decimal.handling.mode": "string", "errors.max.retries": "0",
        "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false",
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / "offsets.dat"),
        "offset.flush.interval.ms": "600000",
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(work / "schema-history.jsonl"),
    }


def gtids_before(port: int, binlog_file: str, position: int) -> str | None:
    """MySQL's GTID set of the transactions before ``binlog_file:position`` (``None``
    without GTIDs): the file's previous GTIDs and its GTID events before the position."""
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES LIKE 'gtid_mode'")
            mode = cur.fetchone()
            if mode is None or mode[1] != "ON":
                return None
            cur.execute(f"SHOW BINLOG EVENTS IN '{binlog_file}'")
            parts = [str(info).split("'")[1] if kind == "Gtid" else str(info)
                     for _, pos, kind, _, _, info in cur.fetchall()
                     if pos < position and kind in ("Previous_gtids", "Gtid")]
            cur.execute("SELECT GTID_SUBTRACT(%s, '')", (",".join(p for p in parts if p),))
            row = cur.fetchone()
            return str(row[0]) if row else None
    finally:
        conn.close()


def write_offset(path: Path, binlog_file: str, position: int, gtids: str | None) -> None:
    """Stores ``binlog_file:position`` (and the GTIDs before it) as the engine's offset, as
    Kafka Connect's ``FileOffsetBackingStore`` does: a serialized ``HashMap<byte[], byte[]>``
    of JSON."""
    import jpype

    key = json.dumps([ENGINE_NAME, {"server": TOPIC_PREFIX}], separators=(",", ":"))
    offset: dict[str, Any] = {"file": binlog_file, "pos": position}
    if gtids:
        offset["gtids"] = gtids
    value = json.dumps(offset, separators=(",", ":"))
    as_bytes = jpype.JArray(jpype.JByte)
    offsets = jpype.JClass("java.util.HashMap")()
    offsets.put(as_bytes(key.encode()), as_bytes(value.encode()))
    stream = jpype.JClass("java.io.ObjectOutputStream")(
        jpype.JClass("java.io.FileOutputStream")(str(path)))
    try:
        stream.writeObject(offsets)
    finally:
        stream.close()


class Writer:
    """Writes each record's value as a line; sets ``done`` once ``want`` are written."""

    def __init__(self, out: IO[str], want: int) -> None:
        self.out = out
        self.want = want
        self.written = 0
        self.done = threading.Event()

    def handleJsonBatch(self, records: Any) -> None:
        """One batch from the engine (``ChangeEvent``s; the name is pydbzengine's)."""
        for record in records:
            value = record.value()
            if value is None or self.written >= self.want:
                continue
            self.out.write(str(value))
            self.out.write("\n")
            self.written += 1
        if self.written >= self.want:
            self.done.set()


def read(port: int, binlog_file: str, position: int, want: int, out_path: Path,
         work: Path) -> int:
    """Streams ``want`` row changes from ``binlog_file:position`` into ``out_path``."""
    from pydbzengine import DebeziumEngine
    from pydbzengine.engine.jvm import ensure_jvm_started

    work.mkdir(parents=True, exist_ok=True)
    (work / "log4j2.properties").write_text(LOG4J)
    (work / "logging.properties").write_text(JUL)
    ensure_jvm_started(jvm_opts=[
        f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}",
        f"-Djava.util.logging.config.file={work / 'logging.properties'}"])
    write_offset(work / "offsets.dat", binlog_file, position,
                 gtids_before(port, binlog_file, position))
    with open(out_path, "w", encoding="utf-8") as out:
        writer = Writer(out, want)  # pydbzengine only calls its handleJsonBatch
        engine = DebeziumEngine(properties(port, work), writer)  # type: ignore[arg-type]
        failed: list[BaseException] = []
        thread = threading.Thread(target=_run, args=(engine, writer, failed), daemon=True)
        thread.start()
        writer.done.wait()
        engine.close()
        thread.join(timeout=30)
    if failed:
        print(f"debezium: {failed[0]}", file=sys.stderr)
        return 1
    return 0


def _run(engine: Any, writer: Writer, failed: list[BaseException]) -> None:
    """Runs the engine; an engine that stops (or fails) before ``done`` ends the wait."""
    try:
        engine.run()
        if not writer.done.is_set():
            failed.append(RuntimeError(f"the engine stopped after {writer.written} of "
                                       f"{writer.want} records"))
    except BaseException as error:  # reported by the main thread
        failed.append(error)
    finally:
        writer.done.set()


def main(argv: list[str]) -> int:
    """The command line (see the module's docstring)."""
    if argv[:1] == ["--check"]:
        why = unavailable()
        if why:
            print(why, file=sys.stderr)
        return 1 if why else 0
    port, binlog_file, position, want, out, work = argv
    code = read(int(port), binlog_file, int(position), int(want), Path(out), Path(work))
    sys.stdout.flush()
    os._exit(code)  # the JVM's threads would hold a normal exit


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
