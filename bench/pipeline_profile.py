"""Time each stage of changestream's pipeline on binlog files, single thread.

Stages: decoding (FileSource), assembling (TransactionAssembler feed + drain), encoding the
change records (records.encode_lines), and the JSON-lines sink writing them to a file. Then
what a decode worker does with the segments the router would hand it: on its fast path
(segment_encoder) and on its general path (decoder, assembler, records), one worker.
With ``--profile STAGE`` the stage also runs under cProfile and the top functions print.

    .venv/bin/python bench/pipeline_profile.py /tmp/perf-binlogs [--repeat 3] [--profile decode]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

from changestream.decoding.event_decoder import EventDecoder
from changestream.encoding.records import encode_lines
from changestream.model.changes import Batch
from changestream.parallel.decode_workers import Segment, WorkerSettings, _Worker
from changestream.parallel.segments import Segmenter
from changestream.sources.files import FileSource
from changestream.transactions.assembler import TransactionAssembler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from sinks.jsonl import JsonLinesSink


def decode(paths):
    return list(FileSource(paths))


def decode_only(paths):
    for _ in FileSource(paths):
        pass


def assemble(events, include_sql=False):
    asm = TransactionAssembler(include_sql=include_sql)
    parts = []
    feed = asm.feed
    for start in range(0, len(events), 2000):  # the listener's batches of 2,000 events
        for event in events[start:start + 2000]:
            feed(event)
        for message, _pos in asm.drain(5000):
            parts.extend(message)
    return parts


def encode(changes):
    return encode_lines(changes)


def sink(parts, out):
    s = JsonLinesSink(out, fsync=False)
    s.open()
    s.write(Batch(1, parts, None))
    s.close()


class _Collected:
    """Stands in for the worker pool: keeps the segments the segmenter hands out."""

    def __init__(self):
        self.segments: list[Segment] = []
        self.ready = True  # started: it takes every plain transaction

    def submit(self, segment, end):
        self.segments.append(segment)


def segments(paths):
    pool = _Collected()
    source = FileSource(paths)

    class Raw:
        def raw_stream(self):
            return source.raw_events()
    for _ in Segmenter(EventDecoder(), pool).events(Raw()):
        pass
    return pool.segments


def worker(cut, fast):
    w = _Worker(WorkerSettings(None, False, "changestream", True, 20_000, None))
    if not fast:
        w.encoder = None
    return sum(run.changes for segment in cut for run in w.assemble(segment))


def timed(fn, *args, repeat=1):
    best = None
    result = None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn(*args)
        elapsed = time.perf_counter() - t
        best = elapsed if best is None else min(best, elapsed)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", choices=("decode", "assemble", "encode", "sink"))
    parser.add_argument("--include-sql", action="store_true",
                        help="row changes carry their statement (the router's --include-sql)")
    args = parser.parse_args()
    t_stream, _ = timed(decode_only, args.paths, repeat=args.repeat)
    t_dec, events = timed(decode, args.paths, repeat=args.repeat)
    t_asm, parts = timed(assemble, events, args.include_sql, repeat=args.repeat)
    changes = [c for p in parts for c in p.changes]
    t_enc, data = timed(encode, changes, repeat=args.repeat)
    out = os.path.join(tempfile.mkdtemp(prefix="cs-profile-"), "out.jsonl")

    def sink_once():
        if os.path.exists(out):
            os.unlink(out)
        sink(parts, out)
    t_sink, _ = timed(sink_once, repeat=args.repeat)
    n = len(changes)
    print(f"{len(events):,} events, {n:,} changes, records {len(data) / 1e6:.0f} MB")
    total = t_stream + t_asm + t_sink
    for name, t in (("decode (streamed)", t_stream), ("decode (into a list)", t_dec),
                    ("assemble", t_asm), ("encode", t_enc), ("sink (encode+write)", t_sink)):
        print(f"{name:22} {t:7.3f} s  {n / t:10,.0f} rows/s")
    print(f"{'decode+assemble+sink':22} {total:7.3f} s  {n / total:10,.0f} rows/s")
    t_cut, cut = timed(segments, args.paths, repeat=args.repeat)
    t_fast, fast_rows = timed(worker, cut, True, repeat=args.repeat)
    t_general, _ = timed(worker, cut, False, repeat=args.repeat)
    print(f"{len(cut):,} worker segments ({fast_rows:,} changes):")
    for name, t in (("segmenting (router)", t_cut), ("worker, fast path", t_fast),
                    ("worker, general path", t_general)):
        print(f"{name:22} {t:7.3f} s  {fast_rows / t:10,.0f} rows/s")
    if args.profile:
        fn = {"decode": lambda: decode_only(args.paths),
              "assemble": lambda: assemble(events, args.include_sql),
              "encode": lambda: encode(changes), "sink": sink_once}[args.profile]
        prof = cProfile.Profile()
        prof.runcall(fn)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
