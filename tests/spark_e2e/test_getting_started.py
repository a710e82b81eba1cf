"""docs/getting-started.md, run as a reader would: its SQL on a private MariaDB (in place of
the reader's server), its shell commands and Python programs in order in one folder, each
output the page shows compared with what the command printed. Blocks marked ``skip`` (the
installation) and the server's configuration file are not run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.M | re.S)
PAGE_ADDRESS = "127.0.0.1:3306"


@dataclass
class Block:
    """One fenced block of the page: its info string's words and its text."""

    tags: list[str]
    text: str

    @property
    def language(self) -> str:
        return self.tags[0] if self.tags else ""


def page_blocks() -> list[Block]:
    return [Block(m.group(1).split(), m.group(2)) for m in _FENCE.finditer(PAGE.read_text())]


def _statements(sql: str) -> list[str]:
    return [s.strip() for s in sql.split(";\n") if s.strip().rstrip(";")]


def _records(expected: str, printed: str) -> None:
    """The records a ``json`` block shows (``...`` standing for the rest of each) are the
    records printed, key by key."""
    got = [json.loads(line) for line in printed.splitlines() if line.strip()]
    shown = [json.loads(line.replace(",...}", "}")) for line in expected.splitlines()]
    assert len(got) == len(shown), printed
    for record, want in zip(got, shown):
        assert {k: record[k] for k in want} == want


def _same_text(expected: str, printed: str) -> None:
    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.strip("\n").splitlines()]
    assert lines(printed) == lines(expected)


def test_every_command_of_the_getting_started_page(tmp_path: Path) -> None:
    try:
        server = EmbeddedMariaDB(base_dir=tmp_path / "server").start()
    except ServerNotAvailableError as exc:
        pytest.skip(str(exc))
    work = tmp_path / "work"
    work.mkdir()
    bin_dir = f"{Path(sys.executable).parent}/"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    exports: list[str] = []
    ran: list[str] = []
    printed: str | None = None
    try:
        for block in page_blocks():
            if "skip" in block.tags or block.language == "ini":
                continue
            if block.language == "sql":
                server.execute(_statements(block.text))
                printed = None
            elif block.language == "sh":
                script = block.text.replace(".venv/bin/", bin_dir).replace(
                    PAGE_ADDRESS, f"127.0.0.1:{server.port}")
                exports += [line for line in script.splitlines() if line.startswith("export ")]
                done = subprocess.run(["bash", "-euo", "pipefail", "-c",
                                       "\n".join([*exports, script])], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{block.text}\n{done.stderr[-3000:]}"
                printed = done.stdout
            elif block.language == "python":
                done = subprocess.run([sys.executable, "-c", block.text], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=600)
                assert done.returncode == 0, f"{block.text}\n{done.stderr[-3000:]}"
                printed = done.stdout
            elif block.language in ("json", "text"):
                assert printed is not None, f"an output without a command: {block.text}"
                check: Any = _records if block.language == "json" else _same_text
                check(block.text, printed)
                printed = None
            else:
                raise AssertionError(f"a block the test does not know: {block.tags}")
            ran.append(block.language)
    finally:
        server.stop()
    # Every kind of step ran: the page cannot lose its commands and still pass.
    assert ran.count("sql") == 3 and ran.count("sh") == 3 and ran.count("python") == 3
    assert ran.count("text") == 3 and ran.count("json") == 1
