"""Soak: a steady mixed workload for a bounded time, the router followed from outside.

Starts a private MariaDB and ``changestream run --sink jsonl:FILE --position-file POS
--control-port P`` (decode workers as by default), then for ``--minutes`` (10 by default) a
writer commits a steady mix at ``--rate`` transactions a second: single-row inserts,
10-row inserts, updates of 1 to 10 rows, deletes, and every 30 seconds one 5,000-row
transaction (spilled to disk). Every 10 seconds it samples ``/metrics`` and the RSS of the
router and its worker processes. It prints, per minute, changes delivered per second, the
delivery lag's percentiles (commit to durable in the sink, from the
``changestream_delivery_lag_seconds`` histogram) and the RSS, and at the end the memory
growth between the second and the last minute and whether the file holds every committed
change exactly once::

    python bench/soak.py                     # 10 minutes
    python bench/soak.py --minutes 2 --rate 200
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from changestream.devserver import EmbeddedMariaDB
from tests.faults.ledger import committed, count

_BUCKET = re.compile(r'^changestream_delivery_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', re.M)
_DELIVERED = re.compile(r"^changestream_changes_delivered_total (\S+)$", re.M)


def _writer(server: EmbeddedMariaDB, rate: float, until: float, stop: threading.Event) -> int:
    rng = random.Random(3)
    conn = server.connect()
    next_id, tx, big_at = 1, 0, time.monotonic() + 30
    with conn.cursor() as cur:
        while time.monotonic() < until and not stop.is_set():
            began = time.monotonic()
            kind = rng.random()
            cur.execute("BEGIN")
            if began >= big_at:
                big_at += 30
                cur.execute("INSERT INTO soak.t (id, tx, v) SELECT %s + seq, %s, 'big' "
                            "FROM soak.seq_0_to_4999", (next_id, tx))
                next_id += 5000
            elif kind < 0.4:
                cur.execute("INSERT INTO soak.t VALUES (%s, %s, 'one')", (next_id, tx))
                next_id += 1
            elif kind < 0.7:
                rows = ", ".join(f"({i}, {tx}, 'ten')" for i in range(next_id, next_id + 10))
                cur.execute(f"INSERT INTO soak.t VALUES {rows}")
                next_id += 10
            elif kind < 0.9:
                low = rng.randrange(1, next_id)
                cur.execute("UPDATE soak.t SET v = %s WHERE id BETWEEN %s AND %s",
                            (f"u{tx}", low, low + rng.randint(0, 9)))
            else:
                low = rng.randrange(1, next_id)
                cur.execute("DELETE FROM soak.t WHERE id BETWEEN %s AND %s", (low, low + 2))
            cur.execute("COMMIT")
            tx += 1
            time.sleep(max(0.0, 1 / rate - (time.monotonic() - began)))
    conn.close()
    return tx


def _rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its children (decode workers), in MB."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total / 1024


def _percentile(buckets: list[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of a cumulative histogram (upper bounds, counts), interpolated."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return float("nan")
    want, low_bound, low_count = q * total, 0.0, 0.0
    for bound, cumulative in buckets:
        if cumulative >= want:
            if bound == float("inf"):
                return low_bound
            share = (want - low_count) / max(cumulative - low_count, 1e-9)
            return low_bound + (bound - low_bound) * share
        low_bound, low_count = bound, cumulative
    return low_bound


def _sample(port: int) -> tuple[float, list[tuple[float, float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    delivered = float(_DELIVERED.search(text).group(1))  # type: ignore[union-attr]
    buckets = sorted((float(b), float(c)) for b, c in _BUCKET.findall(text))
    return delivered, buckets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=300.0, help="transactions a second")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="changestream-soak-"))
    server = EmbeddedMariaDB().start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        server.execute(["CREATE DATABASE soak",
                        "CREATE TABLE soak.t (id INT PRIMARY KEY, tx INT, v VARCHAR(40))"])
        start = server.binlog_position()
        out = work / "out.jsonl"
        router = subprocess.Popen(
            [sys.executable, "-m", "changestream.cli", "run", "--source", server.url,
             "--include", "soak", "--snapshot", "never", "--start",
             f"{start[0]}:{start[1]}", "--sink", f"jsonl:{out}", "--position-file",
             str(work / "position.json"), "--control-port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(2)
        stop = threading.Event()
        until = time.monotonic() + args.minutes * 60
        transactions = [0]
        writer = threading.Thread(target=lambda: transactions.__setitem__(
            0, _writer(server, args.rate, until, stop)))
        writer.start()
        samples: list[tuple[float, float, list[tuple[float, float]], float]] = []
        began = time.monotonic()
        while writer.is_alive():
            time.sleep(10)
            if router.poll() is not None:
                stop.set()
                raise SystemExit(router.stderr.read().decode() if router.stderr else "")
            delivered, buckets = _sample(port)
            samples.append((time.monotonic() - began, delivered, buckets, _rss_mb(router.pid)))
        expected = committed(server.binlog_files(), "soak", start)
        deadline = time.monotonic() + 120
        while _sample(port)[0] < sum(expected.values()) and time.monotonic() < deadline:
            time.sleep(0.5)
        router.send_signal(signal.SIGTERM)
        router.wait(60)

        print(f"machine: {os.cpu_count()} CPUs; {args.minutes:g} min at {args.rate:g} tx/s "
              f"target; {transactions[0]} transactions written")
        print("minute  changes/s   lag p50   lag p95   lag p99   RSS MB")
        previous = (0.0, 0.0, [(float("inf"), 0.0)])
        minute_rss: list[float] = []
        for minute in range(1, int(args.minutes + 0.999) + 1):
            window = [s for s in samples if minute * 60 - 60 < s[0] <= minute * 60]
            if not window:
                continue
            t, delivered, buckets, _ = window[-1]
            rate = (delivered - previous[1]) / max(t - previous[0], 1e-9)
            since = [(b, c - dict(previous[2]).get(b, 0.0)) for b, c in buckets]
            rss = max(s[3] for s in window)
            minute_rss.append(rss)
            print(f"{minute:6d}  {rate:9.0f}  {_percentile(since, 0.5):7.3f}s  "
                  f"{_percentile(since, 0.95):7.3f}s  {_percentile(since, 0.99):7.3f}s  "
                  f"{rss:7.1f}")
            previous = (t, delivered, buckets)
        _, _, buckets, _ = samples[-1]
        print(f"whole run: lag p50 {_percentile(buckets, 0.5):.3f}s, p95 "
              f"{_percentile(buckets, 0.95):.3f}s, p99 {_percentile(buckets, 0.99):.3f}s")
        if len(minute_rss) >= 3:
            print(f"memory growth from minute 2 to the last: "
                  f"{minute_rss[-1] - minute_rss[1]:+.1f} MB")
        print(f"exactly once: {count(expected, out, 'soak')}")
    finally:
        server.close()


if __name__ == "__main__":
    main()
