"""Every test in tests/corpus reads the binlog corpus: without it, each skips with the reason,
or fails when ``CHANGESTREAM_REQUIRE_SERVERS`` is set (see tests/corpus/reference.py)."""

from __future__ import annotations

import pytest

from tests.corpus.reference import require_corpus


@pytest.fixture(autouse=True)
def _corpus_present() -> None:
    require_corpus()
