"""The version: written once, in pyproject.toml; ``changestream --version`` prints it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import changestream

ROOT = Path(__file__).parents[2]


def _pyproject_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_version_is_written_only_in_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project.get("dynamic", [])
    version = project["version"]
    assert importlib.metadata.version("changestream") == version, \
        "the installed metadata is stale: reinstall (pip install -e .)"
    assert changestream.__version__ == version
    for path in (ROOT / "changestream").rglob("*.py"):
        assert f'"{version}"' not in path.read_text(), f"{path} repeats the version"


def test_version_option_prints_the_version_and_exits_0() -> None:
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"changestream {_pyproject_version()}\n"
    assert result.stderr == ""


def test_the_installed_command_prints_the_version() -> None:
    command = Path(sys.executable).parent / "changestream"
    assert command.exists(), "the console script is not installed beside this Python"
    result = subprocess.run([str(command), "--version"], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout) == (0, f"changestream {_pyproject_version()}\n")


def test_a_source_tree_that_is_not_installed_reads_pyproject(monkeypatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert changestream._version() == _pyproject_version()
