"""The house's floors, from the imports (issue 33): a module imports only from its own room
or rooms below it. The rooms, lowest first, are :data:`FLOORS`; the imports that still run
up a floor are listed in :data:`KNOWN_UPWARD` (docs/house-plan.md says how each goes), and
the list only shrinks: a new upward import fails, and so does one that went but is still
listed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]

FLOORS = ("cache", "native", "devserver", "model", "observe", "decoding", "sources", "schema",
          "transactions", "encoding", "parallel", "snapshot", "delivery", "sinks", "actors",
          "runtime", "cli")

KNOWN_UPWARD: set[tuple[str, str]] = set()  # none left


def _room_of_file(path: Path) -> str | None:
    parts = path.relative_to(ROOT).parts
    return parts[1] if len(parts) > 2 else None  # changestream/<room>/...


def _module_of_file(path: Path) -> list[str]:
    return list(path.relative_to(ROOT).with_suffix("").parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    module = _module_of_file(path)
    package = module[:-1]  # the package a relative import starts from
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return found


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` but those under ``if TYPE_CHECKING:`` (never run)."""
    nodes: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return nodes


def _upward() -> set[tuple[str, str]]:
    upward = set()
    for folder in ("changestream",):
        for path in (ROOT / folder).rglob("*.py"):
            room = _room_of_file(path)
            if room not in FLOORS:
                continue
            for name in _imports(path):
                parts = name.split(".")
                target = parts[1] if parts[0] == "changestream" and len(parts) > 1 else None
                if target in FLOORS and FLOORS.index(target) > FLOORS.index(room):
                    upward.add((str(path.relative_to(ROOT)), name))
    return upward


def test_no_new_import_runs_up_a_floor() -> None:
    assert _upward() - KNOWN_UPWARD == set()


def test_an_upward_import_that_went_leaves_the_list() -> None:
    assert KNOWN_UPWARD - _upward() == set()
