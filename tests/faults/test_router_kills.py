"""kill -9 of the router while it reads and spills a 200,000-row transaction and while it
writes the transaction out: after each restart the file is cut back to the last saved
position and the transaction is written again from its start, so the file ends with every
change exactly once."""

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

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _acknowledged_length(position: Path) -> int:
    """The file's length the saved position names: where a restart cuts the file back to."""
    if not position.exists():
        return 0
    return int((orjson.loads(position.read_bytes()).get("sink") or {}).get("length", 0))


def _size(out: Path) -> int:
    return out.stat().st_size if out.exists() else 0


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
    kills, to_first_write = 0, 0.0
    while kills < 4:
        acknowledged = _acknowledged_length(position)
        process = router(server.url, out, position, *args)
        started = time.monotonic()
        deadline = started + 120
        if kills % 2:
            # While the big transaction is read and spilled: a random moment before the
            # previous run's first write.
            time.sleep(rng.uniform(0.1, 0.9) * to_first_write)
        else:
            # As its records are written: first the restart's cut back to the saved position
            # (the killed run's bytes stay until the sink opens), then the first byte beyond.
            # The spilled transaction's records go out in a few large writes, so the kill
            # lands within them or between them and the position's saving.
            while _size(out) > acknowledged and process.poll() is None:
                assert time.monotonic() < deadline, "the file was not cut back"
                time.sleep(0.001)
            while _size(out) <= acknowledged and process.poll() is None:
                assert time.monotonic() < deadline, "no records of the big transaction"
                time.sleep(0.001)
            to_first_write = time.monotonic() - started
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
