"""The unit tier needs none of the optional extras: with PySpark and PyArrow made
unimportable, every unit test module is collected."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]

_BLOCKED_COLLECT = """
import sys
for name in ("pyspark", "pyarrow"):
    sys.modules[name] = None  # import raises ImportError
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests/unit"]))
"""


def test_the_unit_tier_collects_without_pyspark_and_pyarrow() -> None:
    result = subprocess.run([sys.executable, "-c", _BLOCKED_COLLECT], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "error" not in result.stdout.lower().splitlines()[-1]
