"""A short, seeded fuzz of the configuration loader (tests/fuzz_config.py; the long one is
bench/fuzz.py): mutated TOML, values and keys of every type, environment overrides,
--sink-option pairs and --source URLs end in a one-line ConfigError or a configuration the
router can use."""

from __future__ import annotations

from tests.fuzzing import fuzz

CASES = 1000


def test_mutated_configurations_end_in_one_line_errors_or_usable_ones() -> None:
    report = fuzz("config", seed=1, count=CASES)
    assert report.tried == CASES
    assert not report.findings, "\n".join(f.line() for f in report.findings)
