"""The standalone router: pre-flight checks, the control endpoint, sink plugins, TLS."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from changestream.devserver import EmbeddedMariaDB
from changestream.model.changes import Batch
from changestream.model.errors import SourceError
from changestream.runtime.config import load_config
from changestream.runtime.control import ControlServer
from changestream.runtime.preflight import PreflightError
from changestream.runtime.router import Router, RouterSettings
from changestream.schema.history_settings import HistorySettings
from changestream.sinks.callback import CallbackSink
from changestream.transactions.filters import ChangeFilter
from tests.servers import shadow_command
from tests.workloads import wait_for

pytestmark = pytest.mark.integration

PLUGIN_SITE = Path(__file__).parents[1] / "plugins" / "site"


# -- pre-flight ------------------------------------------------------------------------------


def test_preflight_passes_on_a_server_set_up_for_cdc(server: Any) -> None:
    router = Router(RouterSettings(source=server.url), CallbackSink(lambda batch: None))
    findings = router.preflight()
    assert {f.check for f in findings} >= {"server version", "binary log", "binlog format",
                                            "row image", "row metadata", "GTIDs", "grants"}
    assert all(f.level == "ok" for f in findings), findings


def test_preflight_minimal_metadata_is_fine_with_the_schema_history(server: Any) -> None:
    server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        def metadata_finding(history: str, shadow: str | None) -> Any:
            router = Router(RouterSettings(source=server.url,
                                           schema=HistorySettings(history, shadow)),
                            CallbackSink(lambda batch: None))
            return next(f for f in router.preflight() if f.check == "row metadata")

        found = metadata_finding("auto", shadow_command(server))
        assert (found.level, "schema history" in found.message) == ("ok", True)
        found = metadata_finding("off", None)
        assert found.level == "warning" and "information_schema" in found.message
        found = metadata_finding("auto", "/nonexistent/mariadbd")
        assert found.level == "warning" and "shadow server" in found.message
        with pytest.raises(PreflightError) as error:
            metadata_finding("on", "/nonexistent/mariadbd")
        assert "schema.shadow_server" in str(error.value)
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = 'FULL'")


def test_preflight_says_what_to_change(server: Any) -> None:
    server.execute(["SET GLOBAL binlog_format = 'STATEMENT'",
                    "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
                    "CREATE USER IF NOT EXISTS 'weak'@'%' IDENTIFIED BY 'pw'"])
    try:
        router = Router(RouterSettings(source=server.url), CallbackSink(lambda batch: None))
        with pytest.raises(PreflightError) as error:
            router.preflight()
        assert "binlog_format is STATEMENT" in str(error.value)
        assert "set binlog_format=ROW" in str(error.value)
        weak = Router(RouterSettings(source=server.url.replace("root@", "weak:pw@")),
                      CallbackSink(lambda batch: None))
        with pytest.raises(PreflightError) as error:
            weak.preflight()
        assert "the user lacks REPLICATION SLAVE" in str(error.value)
        assert "GRANT REPLICATION SLAVE" in str(error.value)
    finally:
        server.execute(["SET GLOBAL binlog_format = 'ROW'",
                        "SET GLOBAL binlog_row_metadata = 'FULL'", "DROP USER 'weak'@'%'"])


def test_run_refuses_a_server_in_statement_format_with_exit_3(server: Any) -> None:
    server.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        result = subprocess.run([sys.executable, "-m", "changestream.cli", "run", "--source",
                                 server.url, "--until", "caught-up"], capture_output=True,
                                text=True, timeout=60)
    finally:
        server.execute("SET GLOBAL binlog_format = 'ROW'")
    assert result.returncode == 3
    assert "binlog_format=ROW" in result.stderr and "Traceback" not in result.stderr


# -- control endpoint ------------------------------------------------------------------------


def _http(port: int, method: str, path: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_control_endpoint_reports_status_metrics_and_pauses(
        mariadb: Any, tmp_path: Path) -> None:
    db = "control_endpoint"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}",
                     f"CREATE TABLE {db}.t (id INT PRIMARY KEY)"])
    start = mariadb.binlog_position()
    delivered: list[int] = []
    router = Router(RouterSettings(source=mariadb.url, start=f"{start[0]}:{start[1]}",
                                   filter=ChangeFilter(include=[db])),
                    CallbackSink(lambda b: delivered.extend(
                        c.after["id"] for c in b.iter_changes() if c.after)))
    control = ControlServer(router, port=0, token="s3cret")
    control.start()
    router.start()
    try:
        mariadb.execute([f"INSERT INTO {db}.t VALUES ({i})" for i in range(1, 6)])
        wait_for(lambda: len(delivered) == 5)
        assert _http(control.port, "GET", "/status")[0] == 401
        assert _http(control.port, "GET", "/status", "wrong")[0] == 401
        code, body = _http(control.port, "GET", "/status", "s3cret")
        status = orjson.loads(body)
        assert code == 200 and status["connected"] is True and status["paused"] is False
        assert status["transactions_delivered"] == 5 and status["changes_delivered"] == 5
        assert status["delivered_position"]["file"] == start[0]
        assert status["source_position"]["pos"] >= status["delivered_position"]["pos"]
        assert status["seconds_behind"] == 0.0
        assert set(status["queue_depths"]) == {"listener_to_transaction", "transaction_to_sink"}
        code, body = _http(control.port, "GET", "/metrics", "s3cret")
        metrics = body.decode()
        assert "changestream_transactions_delivered_total 5" in metrics
        assert "# TYPE changestream_changes_delivered_total counter" in metrics
        assert 'changestream_queue_depth{queue="transaction_to_sink"}' in metrics
        assert _http(control.port, "POST", "/pause", "s3cret") == (200, b'{"paused":true}')
        mariadb.execute([f"INSERT INTO {db}.t VALUES ({i})" for i in range(6, 9)])
        time.sleep(1.0)
        assert len(delivered) == 5, "delivered while paused"
        assert orjson.loads(_http(control.port, "GET", "/status", "s3cret")[1])["paused"]
        assert _http(control.port, "POST", "/resume", "s3cret")[0] == 200
        wait_for(lambda: len(delivered) == 8)
        assert delivered == list(range(1, 9))
    finally:
        router.stop()
        router.wait(30)
        control.stop()


def test_run_serves_the_control_endpoint(mariadb: Any, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "changestream.cli", "run", "--source",
                                mariadb.url, "--start", "latest", "--sink",
                                f"jsonl:{tmp_path / 'out.jsonl'}", "--control-port", str(port)],
                               stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _probe(port), timeout=30)
        wait_for(lambda: orjson.loads(_http(port, "GET", "/status")[1])["connected"])
        status = orjson.loads(_http(port, "GET", "/status")[1])
        assert status["source"] == mariadb.url and status["seconds_behind"] == 0.0
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()


def _probe(port: int) -> bool:
    try:
        return _http(port, "GET", "/status")[0] == 200
    except OSError:
        return False


# -- plugins -------------------------------------------------------------------------------


def test_a_third_party_sink_is_found_by_entry_point_and_by_module_class(
        mariadb: Any, tmp_path: Path) -> None:
    db = "plugin_sink"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = mariadb.binlog_position()
    mariadb.execute([f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(5))",
                     f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')"])
    env = {**os.environ, "PYTHONPATH": f"{PLUGIN_SITE}{os.pathsep}"
           f"{os.environ.get('PYTHONPATH', '')}"}
    common = ["--source", mariadb.url, "--start", f"{start[0]}:{start[1]}", "--until",
              "caught-up", "--include", db]
    by_name, by_class = tmp_path / "by-name.csv", tmp_path / "by-class.csv"
    for sink_args in (["--sink", f"csvfile:{by_name}"],
                      ["--sink", "thirdparty_sink:CsvFileSink", "--sink-option",
                       f"path={by_class}"]):
        result = subprocess.run([sys.executable, "-m", "changestream.cli", "run", *common,
                                 *sink_args], capture_output=True, text=True, env=env,
                                timeout=60)
        assert result.returncode == 0, result.stderr
    lines = by_name.read_text().splitlines()
    assert by_class.read_text().splitlines() == lines
    assert [line.split(",", 4)[2:4] for line in lines] == [
        ["ddl", f"{db}.t"], ["insert", f"{db}.t"], ["insert", f"{db}.t"]]
    assert lines[1].endswith('"{""id"": 1, ""v"": ""a""}"')


# -- TLS -----------------------------------------------------------------------------------


def _certificates(folder: Path, name: str = "IP:127.0.0.1") -> dict[str, Path]:
    """A CA and a server certificate for ``name`` (127.0.0.1) made with openssl."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=changestream test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "server.key", "-out", "server.csr")
    (folder / "san.cnf").write_text(f"subjectAltName = {name}\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "san.cnf", "-out", "server.pem")
    return {name: folder / f"{name}.pem" if name != "server_key" else folder / "server.key"
            for name in ("ca", "server", "server_key")}


def test_tls_to_the_server_verifies_its_certificate(tmp_path: Path) -> None:
    certs = _certificates(tmp_path)
    with EmbeddedMariaDB(options=[f"--ssl-ca={certs['ca']}", f"--ssl-cert={certs['server']}",
                                  f"--ssl-key={certs['server_key']}"]) as server:
        server.execute(["CREATE DATABASE tls_db", "CREATE TABLE tls_db.t (id INT PRIMARY KEY)",
                        "INSERT INTO tls_db.t VALUES (1)"])
        got: list[Batch] = []
        overrides = {"source.url": server.url, "start.at": "earliest", "start.until": "caught-up",
                     "filter.include": ["tls_db"], "source.tls.mode": "verify-identity",
                     "source.tls.ca": str(certs["ca"])}
        router = Router(load_config(None, env={}, overrides=overrides), CallbackSink(got.append))
        conn = router._connect()
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1], "the connection is not encrypted"
        conn.close()
        router.run()
        assert [c.after for b in got for c in b.iter_changes() if c.op == "insert"] == [
            {"id": 1}]
        # The default (preferred) encrypts when the server offers TLS; disabled does not.
        for mode, encrypted in (("preferred", True), ("disabled", False)):
            settings = {"source.url": server.url, "source.tls.mode": mode}
            if mode == "preferred":
                del settings["source.tls.mode"]
            conn = Router(load_config(None, env={}, overrides=settings),
                          CallbackSink(got.append))._connect()
            with conn.cursor() as cur:
                cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
                assert bool(cur.fetchone()[1]) is encrypted, mode
            if encrypted:  # one context for every connection, without CA certificates
                assert conn.ctx.cert_store_stats()["x509_ca"] == 0
                assert conn.ctx is Router(load_config(None, env={}, overrides=settings),
                                          CallbackSink(got.append))._connect().ctx
            conn.close()
        # A CA that did not sign the server's certificate is refused.
        other = tmp_path / "other"
        other.mkdir()
        wrong = _certificates(other)["ca"]
        overrides["source.tls.ca"] = str(wrong)
        with pytest.raises(SourceError, match=r"cannot connect .*certificate verify failed"):
            Router(load_config(None, env={}, overrides=overrides),
                   CallbackSink(got.append))._connect()


def test_verify_identity_refuses_a_certificate_for_another_host(tmp_path: Path) -> None:
    """Signed by the trusted CA but made out to another name: verify-identity refuses the
    server at 127.0.0.1, verify-ca (which checks only the signature) takes it."""
    certs = _certificates(tmp_path, "DNS:db.example.internal")
    with EmbeddedMariaDB(options=[f"--ssl-ca={certs['ca']}", f"--ssl-cert={certs['server']}",
                                  f"--ssl-key={certs['server_key']}"]) as server:
        overrides = {"source.url": server.url, "source.tls.mode": "verify-identity",
                     "source.tls.ca": str(certs["ca"])}
        with pytest.raises(SourceError, match=r"cannot connect .*(mismatch|match)"):
            Router(load_config(None, env={}, overrides=overrides),
                   CallbackSink(lambda batch: None))._connect()
        overrides["source.tls.mode"] = "verify-ca"
        conn = Router(load_config(None, env={}, overrides=overrides),
                      CallbackSink(lambda batch: None))._connect()
        conn.close()


# -- logs ------------------------------------------------------------------------------------


def test_json_logs_go_to_stderr_and_stdout_keeps_only_records(mariadb: Any) -> None:
    db = "json_logs"
    mariadb.execute([f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"])
    start = mariadb.binlog_position()
    mariadb.execute([f"CREATE TABLE {db}.t (id INT PRIMARY KEY)",
                     f"INSERT INTO {db}.t VALUES (1)"])
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "run", "--source",
                             mariadb.url, "--start", f"{start[0]}:{start[1]}", "--until",
                             "caught-up", "--include", db, "--log-json", "-v"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    records = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [r["op"] for r in records] == ["ddl", "insert"]
    logs = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert logs and all(set(entry) >= {"ts", "level", "logger", "message"} for entry in logs)
    assert any(entry["level"] == "info" for entry in logs)
