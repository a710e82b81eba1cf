"""The fuzz harness for as long as it is given (docs/testing.md, "Fuzzed input").

Runs mutated inputs of each target (``binlog``: corpus binlogs read as a file source;
``packets``: COM_BINLOG_DUMP reply streams read by the live source's packet reader;
``config``: the configuration loader) for ``--seconds`` in all, shared between the targets
and between the compiled modules and the Python paths; prints how many inputs each tried
and every finding, and exits 1 when there is one. A finding is replayed in this process,
with its traceback, by ``--replay TARGET/VARIANT/SEED/CASE`` (as the finding's line
names it), and ``--record-capture FILE`` records a private MariaDB's dump stream for the
``packets`` target (``tests/fuzz_data/``).

    .venv/bin/python bench/fuzz.py --seconds 1800 --seed 7 --targets binlog,packets,config
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzzing import TARGETS, VARIANTS, Finding, fuzz, replay


def _replay(spec: str) -> int:
    target, variant, seed, index = spec.split("/")
    case, problem = replay(target, variant, int(seed), int(index))
    print(f"{case.base}: {case.mutation}")
    print(problem or "ends cleanly or in a one-line error")
    return 1 if problem else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds one input may take before it counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=512,
                        help="peak RSS growth of one input that counts as a blow-up")
    parser.add_argument("--replay", metavar="TARGET/VARIANT/SEED/CASE")
    parser.add_argument("--record-capture", metavar="FILE", type=Path)
    args = parser.parse_args()
    if args.replay:
        return _replay(args.replay)
    if args.record_capture:
        from tests.fuzz_capture import record_capture

        path = record_capture(args.record_capture)
        print(f"{path}: {path.stat().st_size:,} bytes")
        return 0
    targets = args.targets.split(",")
    share = args.seconds / (len(targets) * len(VARIANTS))
    findings: list[Finding] = []
    began = time.monotonic()
    for target in targets:
        for variant in VARIANTS:
            report = fuzz(target, seed=args.seed, variant=variant, seconds=share,
                          timeout=args.timeout, memory_mb=args.memory_mb,
                          on_finding=lambda f: print(f"FINDING {f.line()}", flush=True))
            findings += report.findings
            print(f"{target}/{variant}: {report.tried:,} inputs, "
                  f"{len(report.findings)} findings", flush=True)
    kinds = sorted({(f.target, f.problem.split(":")[0], f.where) for f in findings})
    print(f"{time.monotonic() - began:.0f} s, {len(findings)} findings"
          + "".join(f"\n  {t}: {p} [{w}]" for t, p, w in kinds))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
