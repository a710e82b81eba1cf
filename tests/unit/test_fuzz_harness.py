"""The fuzz harness itself (tests/fuzzing.py): a case that hangs, kills its process, blows
up its memory, raises something other than a one-line ChangestreamError (or a BinlogError
without its offset) is reported with its case number, and the run goes on after it;
mutations are the same for the same seed; error messages are one line whatever they quote."""

from __future__ import annotations

import random

from tests.fuzz_mutators import mutate
from tests.fuzzing import case_rng, fuzz, verdict

PROBE = "tests.fuzz_probe:MisbehavingTarget"


def test_each_kind_of_misbehaviour_is_a_finding_and_the_run_goes_on() -> None:
    report = fuzz(PROBE, seed=1, count=7, timeout=2.0, memory_mb=64)
    assert report.tried == 7
    problems = {f.index: f.problem for f in report.findings}
    assert sorted(problems) == [1, 2, 3, 4, 5]
    assert problems[1].startswith("hang")
    assert problems[2].startswith("crash: child ended with signal SIGABRT")
    assert problems[3].startswith(("memory", "MemoryError"))
    assert problems[4].startswith("IndexError: ")
    assert problems[5].startswith("BinlogError without an offset")
    assert "tests/fuzz_probe.py:" in next(f.where for f in report.findings if f.index == 4)


def test_a_clean_error_is_one_line_and_a_binlog_error_says_where() -> None:
    from changestream.model.errors import BinlogError, ConfigError, SourceError

    assert verdict(BinlogError("corrupt", "f", 4)) is None
    assert verdict(ConfigError("key \"a\nb\": unknown\u2028")) is None
    assert verdict(SourceError("lost the server")) is None
    assert "without an offset" in (verdict(BinlogError("corrupt")) or "")
    assert (verdict(KeyError("x")) or "").startswith("KeyError")


def test_the_same_seed_makes_the_same_mutants() -> None:
    data = bytes(range(256)) * 4
    frames = [(i, 64) for i in range(0, 1024, 64)]
    first = mutate(case_rng("binlog", "compiled", 3, 17), data, frames)
    assert first == mutate(case_rng("binlog", "compiled", 3, 17), data, frames)
    others = {mutate(random.Random(i), data, frames)[0] for i in range(50)}
    assert len(others) > 40 and data not in others
