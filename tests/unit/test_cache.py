"""changestream's cache folder (changestream/cache.py): the XDG rule, one place for the
server templates, the jars and the class-data archives."""

from __future__ import annotations

from pathlib import Path

import pytest

from changestream.cache import cache_folder
from changestream.sinks.spark.jvm.class_sharing import default_folder
from changestream.sinks.spark.jvm.jars import jar_cache


@pytest.mark.parametrize("value", [None, ""])
def test_no_xdg_cache_home_means_the_home_cache(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path, value: str | None) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if value is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", value)  # empty: as unset, not the cwd
    assert cache_folder("jars") == tmp_path / ".cache" / "changestream" / "jars"
    assert jar_cache() == tmp_path / ".cache" / "changestream" / "jars"
    assert default_folder() == tmp_path / ".cache" / "changestream" / "jvm"


def test_xdg_cache_home_is_followed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert jar_cache() == tmp_path / "c" / "changestream" / "jars"
    assert default_folder() == tmp_path / "c" / "changestream" / "jvm"
    assert jar_cache(tmp_path / "mine") == tmp_path / "mine"
