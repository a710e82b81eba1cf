"""A private Hive Metastore for the tests that keep an Iceberg catalog in one (``hive``).

The metastore is Hive 2.3.9's thrift server, run from the jars PySpark ships
(``<pyspark>/jars``: hive-metastore, DataNucleus, libthrift, ...) as its own JVM on a free
port, its tables in a database of its own on a :class:`~tests.postgres.PrivatePostgres`
(Debian's JDBC driver, ``/usr/share/java/postgresql.jar``). DataNucleus creates the
metastore's schema as it starts (``datanucleus.schema.autoCreateAll``); it does not create
the transaction tables behind the metastore's lock API (``lock``, ``check_lock``,
``unlock``), which Iceberg's ``HiveTableOperations`` takes for each commit, so they are
created here first: Hive 2.3's own definitions (``TxnDbUtil.prepDb``, written for Derby)
in PostgreSQL's words, as Hive's ``hive-txn-schema-2.3.0.postgres.sql`` has them.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

from tests.postgres import PrivatePostgres
from tests.servers import skip_or_fail

POSTGRES_DRIVER = Path("/usr/share/java/postgresql.jar")
#: The transaction tables of Hive 2.3's TxnHandler (TxnDbUtil.prepDb's, for PostgreSQL).
TXN_TABLES = """
CREATE TABLE TXNS (TXN_ID bigint PRIMARY KEY, TXN_STATE char(1) NOT NULL,
  TXN_STARTED bigint NOT NULL, TXN_LAST_HEARTBEAT bigint NOT NULL,
  TXN_USER varchar(128) NOT NULL, TXN_HOST varchar(128) NOT NULL,
  TXN_AGENT_INFO varchar(128), TXN_META_INFO varchar(128), TXN_HEARTBEAT_COUNT integer);
CREATE TABLE TXN_COMPONENTS (TC_TXNID bigint REFERENCES TXNS (TXN_ID),
  TC_DATABASE varchar(128) NOT NULL, TC_TABLE varchar(128), TC_PARTITION varchar(767),
  TC_OPERATION_TYPE char(1) NOT NULL);
CREATE INDEX TC_TXNID_INDEX ON TXN_COMPONENTS USING hash (TC_TXNID);
CREATE TABLE COMPLETED_TXN_COMPONENTS (CTC_TXNID bigint, CTC_DATABASE varchar(128) NOT NULL,
  CTC_TABLE varchar(256), CTC_PARTITION varchar(767));
CREATE TABLE NEXT_TXN_ID (NTXN_NEXT bigint NOT NULL);
INSERT INTO NEXT_TXN_ID VALUES (1);
CREATE TABLE HIVE_LOCKS (HL_LOCK_EXT_ID bigint NOT NULL, HL_LOCK_INT_ID bigint NOT NULL,
  HL_TXNID bigint, HL_DB varchar(128) NOT NULL, HL_TABLE varchar(128),
  HL_PARTITION varchar(767), HL_LOCK_STATE char(1) NOT NULL, HL_LOCK_TYPE char(1) NOT NULL,
  HL_LAST_HEARTBEAT bigint NOT NULL, HL_ACQUIRED_AT bigint, HL_USER varchar(128) NOT NULL,
  HL_HOST varchar(128) NOT NULL, HL_HEARTBEAT_COUNT integer, HL_AGENT_INFO varchar(128),
  HL_BLOCKEDBY_EXT_ID bigint, HL_BLOCKEDBY_INT_ID bigint,
  PRIMARY KEY (HL_LOCK_EXT_ID, HL_LOCK_INT_ID));
CREATE INDEX HL_TXNID_INDEX ON HIVE_LOCKS USING hash (HL_TXNID);
CREATE TABLE NEXT_LOCK_ID (NL_NEXT bigint NOT NULL);
INSERT INTO NEXT_LOCK_ID VALUES (1);
CREATE TABLE COMPACTION_QUEUE (CQ_ID bigint PRIMARY KEY, CQ_DATABASE varchar(128) NOT NULL,
  CQ_TABLE varchar(128) NOT NULL, CQ_PARTITION varchar(767), CQ_STATE char(1) NOT NULL,
  CQ_TYPE char(1) NOT NULL, CQ_TBLPROPERTIES varchar(2048), CQ_WORKER_ID varchar(128),
  CQ_START bigint, CQ_RUN_AS varchar(128), CQ_HIGHEST_TXN_ID bigint, CQ_META_INFO bytea,
  CQ_HADOOP_JOB_ID varchar(32));
CREATE TABLE NEXT_COMPACTION_QUEUE_ID (NCQ_NEXT bigint NOT NULL);
INSERT INTO NEXT_COMPACTION_QUEUE_ID VALUES (1);
CREATE TABLE COMPLETED_COMPACTIONS (CC_ID bigint PRIMARY KEY,
  CC_DATABASE varchar(128) NOT NULL, CC_TABLE varchar(128) NOT NULL,
  CC_PARTITION varchar(767), CC_STATE char(1) NOT NULL, CC_TYPE char(1) NOT NULL,
  CC_TBLPROPERTIES varchar(2048), CC_WORKER_ID varchar(128), CC_START bigint, CC_END bigint,
  CC_RUN_AS varchar(128), CC_HIGHEST_TXN_ID bigint, CC_META_INFO bytea,
  CC_HADOOP_JOB_ID varchar(32));
CREATE TABLE AUX_TABLE (MT_KEY1 varchar(128) NOT NULL, MT_KEY2 bigint NOT NULL,
  MT_COMMENT varchar(255), PRIMARY KEY (MT_KEY1, MT_KEY2));
CREATE TABLE WRITE_SET (WS_DATABASE varchar(128) NOT NULL, WS_TABLE varchar(128) NOT NULL,
  WS_PARTITION varchar(767), WS_TXNID bigint NOT NULL, WS_COMMIT_ID bigint NOT NULL,
  WS_OPERATION_TYPE char(1) NOT NULL);
"""
#: The JVM's options: a small heap, one GC thread, C1 only (it answers in ~2.5 s rather
#: than ~4 s on 2 CPUs), and the module openings Spark's launcher gives its own JVMs on
#: Java 17 (the same Hive and DataNucleus classes run in Spark's embedded metastore).
JAVA_OPTIONS = ["-XX:+IgnoreUnrecognizedVMOptions", "-Xmx512m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-Djdk.reflect.useDirectMethodHandle=false",
                *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
                    "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io",
                    "java.net", "java.nio", "java.util", "java.util.concurrent",
                    "java.util.concurrent.atomic", "jdk.internal.ref", "sun.nio.ch",
                    "sun.nio.cs", "sun.security.action", "sun.util.calendar"))]
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.metastore.name = org.apache.hadoop.hive.metastore.HiveMetaStore
logger.metastore.level = info
logger.audit.name = org.apache.hadoop.hive.metastore.HiveMetaStore.audit
logger.audit.level = warn
# an ERROR with a stack trace each time a client goes away
logger.thrift.name = org.apache.thrift.server.TThreadPoolServer
logger.thrift.level = off
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        skip_or_fail("no pyspark: the Hive Metastore runs from PySpark's Hive jars")
    jars = Path(spec.origin).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        skip_or_fail(f"no hive-metastore jar in {jars}")
    return jars


def answers(port: int, timeout: float = 5.0) -> bool:
    """Whether a metastore on ``port`` answers a thrift call (``get_all_databases``, in
    thrift's binary protocol, unframed: what Hive 2.3's server speaks without SASL)."""
    name = b"get_all_databases"
    call = struct.pack(">Ii", 0x80010001, len(name)) + name + struct.pack(">i", 1) + b"\x00"
    reply = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(call)
            s.shutdown(socket.SHUT_WR)  # the server answers, then sees the end and closes
            while chunk := s.recv(65536):
                reply += chunk
    except OSError:
        return False
    return reply[:4] == struct.pack(">I", 0x80010002)  # a reply (not an exception)


class PrivateHiveMetastore:
    """One Hive Metastore thrift server (``uri``) keeping its tables in database
    ``database`` of ``postgres``, which must be started (and outlive it)."""

    def __init__(self, postgres: PrivatePostgres, database: str = "hive_metastore"):
        self.postgres = postgres
        self.database = database
        self.port = 0
        self.folder: Path | None = None
        self.startup_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        """What the metastore's JVM wrote so far (its log goes to stderr)."""
        if self.folder is None or not (self.folder / "metastore.log").exists():
            return ""
        return (self.folder / "metastore.log").read_text(errors="replace")

    def catalog_properties(self, warehouse: str | os.PathLike[str]) -> dict[str, str]:
        """Iceberg catalog properties of a ``hive`` catalog in this metastore."""
        return {"type": "hive", "uri": self.uri, "warehouse": str(warehouse)}

    def _psql(self, database: str, sql: str) -> None:
        """Run ``sql`` in ``database`` of the PostgreSQL server."""
        pg = self.postgres
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"))
        psql = found[-1] if found else (shutil.which("psql") or "psql")
        subprocess.run([psql, "-h", "127.0.0.1", "-p", str(pg.port), "-U", pg.user, "-d",
                        database, "-q", "-X", "-v", "ON_ERROR_STOP=1"],
                       input=sql, check=True, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PGPASSWORD": pg.password})

    def _create_database(self) -> None:
        """The metastore's database, with Hive's transaction tables in it."""
        self._psql(self.postgres.database, f'CREATE DATABASE "{self.database}"')
        self._psql(self.database, TXN_TABLES)

    def _write_conf(self, conf: Path) -> None:
        pg = self.postgres
        assert self.folder is not None
        properties = {
            "javax.jdo.option.ConnectionURL":
                f"jdbc:postgresql://127.0.0.1:{pg.port}/{self.database}",
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": pg.user,
            "javax.jdo.option.ConnectionPassword": pg.password,
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
            "hive.metastore.warehouse.dir": (self.folder / "warehouse").as_uri(),
            # Hive's asynchronous logging needs LMAX Disruptor, which PySpark lacks.
            "hive.async.log.enabled": "false",
            # Iceberg writes the table's columns to the metastore at each commit; Hive 2.3
            # refuses a dropped or retyped column unless told not to check.
            "hive.metastore.disallow.incompatible.col.type.changes": "false",
        }
        conf.mkdir()
        (conf / "hive-site.xml").write_text(
            "<configuration>\n" + "".join(
                f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                for k, v in properties.items()) + "</configuration>\n")
        (conf / "hive-log4j2.properties").write_text(LOG4J2)

    def start(self, timeout: float = 180.0) -> PrivateHiveMetastore:
        """Create the database, start the JVM and wait until the metastore answers."""
        java = shutil.which("java")
        if java is None:
            skip_or_fail("no java: the Hive Metastore is a JVM")
        if not POSTGRES_DRIVER.is_file():
            skip_or_fail(f"no PostgreSQL JDBC driver ({POSTGRES_DRIVER}): install Debian's "
                         "libpostgresql-jdbc-java")
        jars = _spark_jars()
        self.folder = Path(tempfile.mkdtemp(prefix="changestream-hive-"))
        (self.folder / "warehouse").mkdir()
        conf = self.folder / "conf"
        self._write_conf(conf)
        try:
            self._create_database()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            self.stop()
            skip_or_fail(f"cannot create the metastore's database {self.database}: "
                         f"{str(exc.stderr or '').strip()}")
        self.port = _free_port()
        class_path = os.pathsep.join([str(conf), f"{jars}/*", str(POSTGRES_DRIVER)])
        began = time.monotonic()
        with (self.folder / "metastore.log").open("wb") as log:
            self._process = subprocess.Popen(
                [java, *JAVA_OPTIONS, "-cp", class_path,
                 "org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", str(self.port)],
                cwd=self.folder, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        while not answers(self.port):
            if self._process.poll() is not None or time.monotonic() - began > timeout:
                log_tail = self.log[-2000:]
                self.stop()
                skip_or_fail(f"the Hive Metastore did not start: {log_tail}")
            time.sleep(0.5)
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Kill the JVM (nothing of it need survive) and remove its folder."""
        if self._process is not None:
            if self._process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=30)
            self._process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
