"""The README's first command runs the quick start: it must end with every mirror equal to
its source table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_quickstart_lands_the_sample_workload_and_checks_it(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "changestream.cli", "quickstart", "--dir",
                             str(tmp_path / "qs"), "--rows", "60"], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for table in ("customers", "orders", "order_notes"):
        assert f"changestream.shop.{table}: " in out
        assert f"equal to shop.{table} on MariaDB" in out
    assert "Done: every mirror table equals its source table: yes." in out
    assert (tmp_path / "qs" / "warehouse" / "shop" / "orders" / "metadata").is_dir()
