"""Template data directories: made once per key, not left half-made by a failure."""
from pathlib import Path
from typing import Any

import pytest

from changestream.devserver.templates import data_template


def test_a_template_is_made_once_and_a_failed_one_is_not_kept(tmp_path: Path,
                                                              monkeypatch: Any) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made: list[Path] = []

    def initialize(data_dir: Path, scratch: Path) -> None:
        made.append(data_dir)
        (data_dir / "mysql").mkdir(parents=True)

    first = data_template("t", ("build", 1), "mysql", initialize)
    assert data_template("t", ("build", 1), "mysql", initialize) == first
    assert len(made) == 1 and (first / "mysql").is_dir()
    assert first.parent == tmp_path / "changestream" / "t"
    assert data_template("t", ("build", 2), "mysql", initialize) != first  # another build

    def failing(data_dir: Path, scratch: Path) -> None:
        data_dir.mkdir(parents=True)
        raise RuntimeError("install failed")

    with pytest.raises(RuntimeError):
        data_template("t", ("build", 3), "mysql", failing)
    left = sorted(p.name for p in (tmp_path / "changestream" / "t").iterdir()
                  if not p.name.endswith(".lock"))
    assert len(left) == 2, left  # the two good templates, no scratch or half-made one
