"""A short, seeded fuzz of the binlog readers (tests/fuzzing.py; the long one is
bench/fuzz.py): mutated corpus binlogs read as a file source, and mutated dump streams
(a private MariaDB's recorded one, the corpus files' events as dump packets) read by the
live source's packet reader, each on to records, with the compiled modules and with the
Python paths. Every input ends cleanly or in a one-line ChangestreamError (a BinlogError
naming the offset), within the time limit and without a memory blow-up."""

from __future__ import annotations

import pytest

from tests.corpus.reference import require_corpus
from tests.fuzzing import VARIANTS, fuzz

CASES = {"binlog": 1200, "packets": 1000}  # per variant


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("target", sorted(CASES))
def test_mutated_inputs_end_cleanly_or_in_one_line_errors(target: str, variant: str) -> None:
    require_corpus()
    report = fuzz(target, seed=1, variant=variant, count=CASES[target])
    assert report.tried == CASES[target]
    assert not report.findings, "\n".join(f.line() for f in report.findings)
