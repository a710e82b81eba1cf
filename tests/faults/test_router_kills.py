"""kill -9 of the router while it writes out a 200,000-row transaction it spilled to disk:
after each restart the file is cut back to the last saved position and the transaction is
written again from its start, so the file ends with every change exactly once."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.faults.conftest import router
from tests.faults.ledger import committed, count
from tests.workloads import complete_lines as lines

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _acknowledged_lines(out: Path, position: Path) -> int:
    if not position.exists():
        return 0
    length = (orjson.loads(position.read_bytes()).get("sink") or {}).get("length", 0)
    return out.read_bytes()[:length].count(b"\n")


def test_kills_while_a_spilled_200000_row_transaction_is_written(private_mariadb: Any,
                                                                 tmp_path: Path) -> None:
    server = private_mariadb
    start = server.binlog_position()
    server.execute(["INSERT INTO faults.t VALUES (0, 0, 'before')",
                    "INSERT INTO faults.t SELECT 1 + seq, 1, CONCAT('big ', seq) "
                    "FROM faults.seq_0_to_199999",
                    "INSERT INTO faults.t VALUES (-1, 2, 'after')"])
    out, position = tmp_path / "out.jsonl", tmp_path / "position.json"
    args = ("--until", "caught-up", "--max-buffered-changes", "20000", "--batch-changes",
            "1000")
    rng = random.Random(5)
    kills = 0
    while kills < 4:
        grown = _acknowledged_lines(out, position)  # where the restart cuts the file back to
        process = router(server.url, out, position, *args)
        # Into the big transaction's records (the file grows; they come in about a second,
        # after it was read and spilled), then a random moment more.
        deadline = time.monotonic() + 120
        while lines(out) <= grown + 1000 and process.poll() is None:
            assert time.monotonic() < deadline, "no records of the big transaction"
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.2))
        if process.poll() is not None:
            break
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    finish = router(server.url, out, position, *args)
    _, err = finish.communicate(timeout=300)
    assert finish.returncode == 0, err.decode()
    assert kills >= 2, "the router finished before it could be killed twice"
    ledger = count(committed(server.binlog_files(), "faults", start), out, "faults")
    assert ledger.changes == 200_002 and ledger.exactly_once, ledger
