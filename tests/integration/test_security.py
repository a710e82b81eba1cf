"""Security: the control endpoint's token (compared in constant time, required beyond the
loopback) and the source password, which no answer, error or log line shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import changestream.runtime.control as control_module
from changestream import RouterSettings, load_config
from changestream.model.errors import ConfigError
from changestream.runtime.control import ControlServer
from changestream.runtime.router import Router
from changestream.sinks.callback import CallbackSink

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-Pa55word"


def test_the_endpoint_listens_beyond_the_loopback_only_with_a_token(tmp_path: Path) -> None:
    base = {"source.url": "mysql://repl@db1:3306", "control.enabled": True}
    for host in ("127.0.0.1", "::1", "localhost"):
        load_config(None, env={}, overrides={**base, "control.host": host})
    with pytest.raises(ConfigError, match=r"control.host: 0.0.0.0 .* only with a token"):
        load_config(None, env={}, overrides={**base, "control.host": "0.0.0.0"})
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    config = load_config(None, env={}, overrides={**base, "control.host": "0.0.0.0",
                                                   "control.token_file": str(token)})
    assert config.control_token() == "t0ken"


def test_the_token_is_compared_in_constant_time(mariadb: Any,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = control_module.hmac.compare_digest

    def recording(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(control_module.hmac, "compare_digest", recording)
    router = Router(RouterSettings(source=mariadb.url), CallbackSink(lambda batch: None))
    server = ControlServer(router, 0, "right-token")
    server.start()
    try:
        def status(token: str) -> int:
            request = urllib.request.Request(f"http://127.0.0.1:{server.port}/status",
                                             headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status
            except urllib.error.HTTPError as error:
                return error.code

        assert status("wrong-token") == 401
        assert status("right-token") == 200
    finally:
        server.stop()
    assert [a for a, _ in compared] == [b"Bearer wrong-token", b"Bearer right-token"]


def test_the_password_is_in_no_status_error_check_or_log(mariadb: Any, tmp_path: Path) -> None:
    mariadb.execute([f"CREATE USER IF NOT EXISTS 'secretive'@'%' IDENTIFIED BY '{SECRET}'",
                     "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO "
                     "'secretive'@'%'"])
    url = mariadb.url.replace("root@", f"secretive:{SECRET}@")
    router = Router(RouterSettings(source=url), CallbackSink(lambda batch: None))
    assert SECRET not in json.dumps(router.status(), default=str)
    outputs = []
    # A wrong password (an error from the server), and a run at debug level in JSON logs.
    wrong = url.replace(SECRET, SECRET + "x")
    for source, extra in ((wrong, []), (url, ["-vv", "--log-json"])):
        result = subprocess.run(
            [sys.executable, "-m", "changestream.cli", "run", "--source", source,
             "--snapshot", "never", "--start", "latest", "--until", "caught-up",
             "--sink", f"jsonl:{tmp_path / 'out.jsonl'}", *extra],
            capture_output=True, text=True, timeout=120)
        outputs.append(result.stdout + result.stderr)
    assert "Access denied" in outputs[0]
    config_file = tmp_path / "c.toml"
    config_file.write_text(f'[source]\nurl = "{url}"\n')
    check = subprocess.run([sys.executable, "-m", "changestream.cli", "config", "check",
                            str(config_file)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "CHANGESTREAM_PASSWORD": SECRET})
    outputs.append(check.stdout + check.stderr)
    for out in outputs:
        assert SECRET not in out, out
