"""The corpus rule: without the binlog corpus the corpus tests skip, or fail naming the folder
they expected when CHANGESTREAM_REQUIRE_SERVERS is set, and a per-file test keeps one
parameter so it cannot vanish as an empty parameter set."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.corpus import reference
from tests.servers import REQUIRE_ENV


@pytest.fixture
def corpus_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    def point(folder: Path) -> None:
        monkeypatch.setattr(reference, "CORPUS", folder)
        monkeypatch.setattr(reference, "REFERENCE", folder / "reference")
    return point


def test_a_missing_corpus_fails_naming_the_folder_when_required(
        tmp_path: Path, corpus_at, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus_at(tmp_path / "nowhere")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception) as info:
        reference.require_corpus()
    assert str(tmp_path / "nowhere") in str(info.value)
    assert reference.CORPUS_ENV in str(info.value)


def test_a_missing_corpus_skips_when_not_required(
        tmp_path: Path, corpus_at, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus_at(tmp_path / "nowhere")
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception) as info:
        reference.require_corpus()
    assert str(tmp_path / "nowhere") in str(info.value)


def test_an_empty_folder_is_no_corpus(tmp_path: Path, corpus_at,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    corpus_at(tmp_path)
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="incomplete"):
        reference.require_corpus()


def test_a_missing_file_of_a_present_corpus_is_named(tmp_path: Path, corpus_at,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "mysql-bin.000001").write_bytes(b"\xfebin")
    corpus_at(tmp_path)
    monkeypatch.setenv(REQUIRE_ENV, "1")
    assert reference.require_corpus("vendor/mysql-bin.000001") == tmp_path
    with pytest.raises(pytest.fail.Exception, match=r"vendor/mysql-bin\.000002"):
        reference.require_corpus("vendor/mysql-bin.000002")


def test_per_file_tests_keep_one_parameter_without_a_corpus(tmp_path: Path, corpus_at) -> None:
    corpus_at(tmp_path / "nowhere")
    assert reference.corpus_params() == [reference.ABSENT]
    corpus_at(tmp_path)
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "mysql-bin.000001").write_bytes(b"\xfebin")
    (tmp_path / "reference").mkdir()
    assert reference.corpus_params() == ["vendor/mysql-bin.000001"]
