"""Measurement: exactly-once JSON lines under random kill -9.

Starts a private MariaDB and the fault suite's writer, which commits ``--transactions``
transactions (1 to 10 rows each: inserts, some updated or deleted again) at a steady pace,
while ``changestream run --sink jsonl:FILE --position-file POS`` follows it and is killed with
SIGKILL ``--kills`` times at random moments (restarted at once each time). At the end one
run with ``--until caught-up`` finishes. The file is then checked against the binlog's own
committed transactions: how many transactions and changes are missing, and how many
records are there twice::

    python bench/kill_recovery.py                 # 50 kills over 1,500 transactions
    python bench/kill_recovery.py --kills 100 --transactions 3000
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from changestream.devserver import EmbeddedMariaDB
from tests.faults.conftest import TABLE, Writer, router
from tests.faults.ledger import committed, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--transactions", type=int, default=1_500)
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="changestream-kills-"))
    server = EmbeddedMariaDB().start()
    try:
        server.execute(["CREATE DATABASE faults", TABLE])
        start = server.binlog_position()
        out, position = work / "changes.jsonl", work / "position.json"
        # Spread the kills over the workload: about one every (workload / kills) seconds.
        writer = Writer(server, args.transactions, max(30.0, args.kills * 0.9), seed=7)
        began = time.monotonic()
        writer.start()
        kills = 0
        while kills < args.kills:
            process = router(server.url, out, position)
            time.sleep(rng.uniform(0.3, 1.5))  # start-up included: kills land anywhere
            if process.poll() is not None:
                raise SystemExit(f"the router exited by itself ({process.returncode}): "
                                 f"{process.communicate()[1].decode()}")
            process.send_signal(signal.SIGKILL)
            process.communicate()
            kills += 1
        writer.join()
        if writer.error is not None:
            raise SystemExit(f"the writer failed: {writer.error}")
        finish = router(server.url, out, position, "--until", "caught-up")
        _, err = finish.communicate(timeout=600)
        if finish.returncode != 0:
            raise SystemExit(err.decode())
        took = time.monotonic() - began

        ledger = count(committed(server.binlog_files(), "faults", start), out)
        print(f"machine: {os.cpu_count()} CPUs; {kills} kills -9 in {took:.0f} s")
        print(ledger)
        if not ledger.exactly_once:
            raise SystemExit(1)
    finally:
        server.close()


if __name__ == "__main__":
    main()
