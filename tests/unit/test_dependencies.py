"""The declared dependencies are the ones the package imports: a user installing changestream
pulls nothing it does not use, and nothing it uses is missing."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE_DIRS = ("changestream",)  # actors/ and sinks/ at the top are links into it
# The parts the "spark" extra installs for: the Spark sink and the backfill.
SPARK_PARTS = (ROOT / "changestream" / "sinks" / "spark",
               ROOT / "changestream" / "sinks" / "backfill")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower().replace("_", "-")
            for r in requirements}


def _imports(paths: list[Path]) -> dict[str, set[Path]]:
    """Top-level modules imported (absolutely) by ``paths``, and where."""
    found: dict[str, set[Path]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "changestream":
                    found.setdefault(top, set()).add(path)
    return found


def _distributions(imports: dict[str, set[Path]]) -> dict[str, set[Path]]:
    """The installed distributions that provide ``imports``, and where they are used."""
    providers = importlib.metadata.packages_distributions()
    used: dict[str, set[Path]] = {}
    for module, paths in imports.items():
        assert module in providers, f"{module} (imported by {sorted(paths)}) is not installed"
        for dist in providers[module]:
            used.setdefault(dist.lower().replace("_", "-"), set()).update(paths)
    return used


def _sources() -> list[Path]:
    return [p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")]


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    declared = _names(_project()["dependencies"])
    used = _distributions(_imports(_sources()))
    assert declared - set(used) == set(), "declared but imported nowhere in the package"


def test_the_package_imports_only_what_it_declares() -> None:
    project = _project()
    runtime = _names(project["dependencies"])
    spark = _names(project["optional-dependencies"]["spark"])
    core = [p for p in _sources() if not any(part in p.parents for part in SPARK_PARTS)]
    undeclared = {d: sorted(map(str, paths))
                  for d, paths in _distributions(_imports(core)).items() if d not in runtime}
    assert undeclared == {}
    spark_used = _distributions(_imports([p for part in SPARK_PARTS
                                          for p in part.rglob("*.py")]))
    assert set(spark_used) <= runtime | spark


def test_python_mysql_replication_is_only_for_benchmarks_and_cross_checks() -> None:
    project = _project()
    assert "mysql-replication" not in _names(project["dependencies"])
    assert "pymysqlreplication" not in _imports(_sources())
    extras = project["optional-dependencies"]
    assert "mysql-replication" in _names(extras["test"])
    assert "mysql-replication" in _names(extras["bench"])
    users = [ROOT / "bench" / "throughput.py", ROOT / "tests" / "unit" / "test_gtid_formats.py",
             ROOT / "tests" / "unit" / "test_json_binary.py"]
    assert all("pymysqlreplication" in p.read_text() for p in users)
