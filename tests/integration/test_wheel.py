"""The wheel built from the tree installs into a clean virtual environment and runs from
outside the clone: ``--version``, ``inspect`` on a corpus file, and a short ``run`` against
a private server. The build prints no setuptools warning."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from changestream import __version__
from changestream.devserver import EmbeddedMariaDB, ServerNotAvailableError
from tests.corpus.reference import require_corpus

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _run(command: list[str], cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def test_the_wheel_installs_into_a_clean_environment_and_runs(tmp_path: Path) -> None:
    corpus = require_corpus("gh-ost/mysql-bin.000066")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    wheels = tmp_path / "wheels"
    # A copy of the tree without build leftovers, as a fresh clone has it.
    tree = tmp_path / "tree"
    _run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(tree)], outside)
    for changed in _changed_files():
        target = tree / changed
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((REPO / changed).read_bytes())
    # -v: pip shows the build backend's own output (its warnings) only then
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(wheels),
                  str(tree)], outside)
    assert "Building wheel for changestream" in built
    assert "would be ignored" not in built and "SetuptoolsDeprecationWarning" not in built \
        and "_DeprecatedInstaller" not in built, built[-3000:]
    wheel = next(wheels.glob("changestream-*.whl"))
    venv = tmp_path / "clean"
    _run(["python3", "-m", "venv", str(venv)], outside)
    _run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], outside)
    changestream = str(venv / "bin" / "changestream")

    assert _run([changestream, "--version"], outside).strip().endswith(__version__)
    where = _run([str(venv / "bin" / "python"), "-c",
                  "import changestream, changestream.native as n; print(changestream.__file__);"
                  " print(n.compiled('changestream.native.framing') is not None)"], outside)
    assert where.splitlines()[0].startswith(str(venv))  # the installed copy, not the tree
    assert where.splitlines()[1] == "True"  # its compiled parts built and packed
    binlog = str(corpus / "gh-ost" / "mysql-bin.000066")
    listing = _run([changestream, "inspect", binlog], outside)
    assert listing.count(" committed ") == 13  # 2 DDL, 11 transactions
    assert listing == _run([sys.executable, "-m", "changestream.cli", "inspect", binlog],
                           REPO)  # as the tree's own

    try:
        server = EmbeddedMariaDB(base_dir=tmp_path / "server").start()
    except ServerNotAvailableError as exc:
        pytest.skip(str(exc))
    try:
        server.execute(["CREATE DATABASE wheel", "CREATE TABLE wheel.t (id INT PRIMARY KEY, "
                        "v VARCHAR(10))", "INSERT INTO wheel.t VALUES (1, 'a'), (2, 'b')"])
        out = subprocess.run([changestream, "run", "--source", server.url, "--include",
                              "wheel", "--start", "earliest", "--until", "caught-up"],
                             cwd=outside, capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["op"], r["after"]) for r in records if r["op"] == "insert"] == [
        ("insert", {"id": 1, "v": "a"}), ("insert", {"id": 2, "v": "b"})]


def _changed_files() -> list[str]:
    """Files of the working tree that differ from its last commit (a test run before a
    commit builds what it tests)."""
    out = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                          "--untracked-files=all"], capture_output=True, text=True,
                         check=True).stdout
    return [line[3:] for line in out.splitlines()
            if line[:2].strip() not in ("D",) and (REPO / line[3:]).is_file()]
