"""Measurement: exactly-once JSON lines under random kill -9.

Starts a private MariaDB and a writer session that commits ``--transactions`` transactions
(1 to 20 rows each: inserts, some updated or deleted again) at a steady pace, while
``changestream run --sink jsonl:FILE --position-file POS`` follows it and is killed with
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
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from changestream.devserver import EmbeddedMariaDB
from tests.faults.ledger import committed, count


def _writer(server: EmbeddedMariaDB, transactions: int, seconds: float,
            done: threading.Event) -> None:
    rng = random.Random(7)
    conn = server.connect()
    next_id = 1
    try:
        with conn.cursor() as cur:
            for tx in range(transactions):
                size = rng.randint(1, 20)
                rows = ", ".join(f"({i}, {tx}, 'row {i}')"
                                 for i in range(next_id, next_id + size))
                next_id += size
                cur.execute("BEGIN")
                cur.execute(f"INSERT INTO bench.t VALUES {rows}")
                if tx % 5 == 1:
                    cur.execute(f"UPDATE bench.t SET v = 'updated' WHERE tx = {tx}")
                if tx % 9 == 4:
                    cur.execute(f"DELETE FROM bench.t WHERE tx = {tx} AND id % 2 = 0")
                cur.execute("COMMIT")
                time.sleep(seconds / transactions)
    finally:
        conn.close()
        done.set()


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
        server.execute(["CREATE DATABASE bench",
                        "CREATE TABLE bench.t (id INT PRIMARY KEY, tx INT, v VARCHAR(40))"])
        start = server.binlog_position()
        out, position = work / "changes.jsonl", work / "position.json"
        command = [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
                   "--include", "bench", "--start", f"{start[0]}:{start[1]}",
                   "--snapshot", "never", "--sink", f"jsonl:{out}",
                   "--position-file", str(position), "--batch-changes", "50"]
        # Spread the kills over the workload: about one every (workload / kills) seconds.
        seconds = max(30.0, args.kills * 0.9)
        done = threading.Event()
        writer = threading.Thread(target=_writer,
                                  args=(server, args.transactions, seconds, done))
        began = time.monotonic()
        writer.start()
        kills = 0
        while kills < args.kills:
            process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.3, 1.5))  # start-up included: kills land anywhere
            if process.poll() is not None:
                raise SystemExit(f"the router exited by itself ({process.returncode})")
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
        writer.join()
        finish = subprocess.run([*command, "--until", "caught-up"], capture_output=True,
                                timeout=600)
        if finish.returncode != 0:
            raise SystemExit(finish.stderr.decode())
        took = time.monotonic() - began

        ledger = count(committed(server.binlog_files(), "bench", start), out)
        print(f"machine: {os.cpu_count()} CPUs; {kills} kills -9 in {took:.0f} s")
        print(ledger)
        if not ledger.exactly_once:
            raise SystemExit(1)
    finally:
        server.close()


if __name__ == "__main__":
    main()
