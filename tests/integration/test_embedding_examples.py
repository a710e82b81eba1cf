"""The embedding examples of docs/embedding.md run as written (against the private MariaDB)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EMBEDDING = Path(__file__).parents[2] / "docs" / "embedding.md"


def _examples() -> list[str]:
    text = EMBEDDING.read_text()
    section = text[text.index("\n## Examples\n"):]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_embedding_page_has_three_examples() -> None:
    assert len(_examples()) == 3


@pytest.mark.parametrize("index", range(3))
def test_embedding_example_runs(mariadb: Any, index: int) -> None:
    mariadb.execute("DROP DATABASE IF EXISTS shop")
    file, pos = mariadb.binlog_position()
    mariadb.execute(["CREATE DATABASE shop",
                     "CREATE TABLE shop.t (id INT PRIMARY KEY)",
                     "INSERT INTO shop.t VALUES (1), (2)", "UPDATE shop.t SET id = 3 WHERE id = 2"])
    code = _examples()[index].replace("mariadb://root@127.0.0.1:3306", mariadb.url)
    # The examples read from the oldest binlog; the environment (which the examples'
    # overrides leave alone) starts them at this test's own events instead.
    env = {**os.environ, "CHANGESTREAM_START_AT": f"{file}:{pos}"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    if index == 0:
        assert "insert t {'id': 1}" in out and "update t {'id': 3}" in out
    elif index == 1:
        assert re.search(r"^async \S+ 2 changes$", out, re.M)  # the two-row insert
    else:
        assert re.search(r"^batch 1 \d+ changes up to ", out, re.M)
        assert re.search(r"^\d+ transactions$", out, re.M)
