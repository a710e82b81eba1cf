"""The fuzz harness: mutated inputs read by changestream's readers in a child process,
each of which must end cleanly or in a one-line :class:`ChangestreamError`.

A target (:mod:`tests.fuzz_binlogs`, :mod:`tests.fuzz_config`) makes the input of case
``index`` from its seed alone (``case``) and reads it as changestream would (``run``). The
child process runs cases one after the other and reports each; the parent watches it, so
that what no ``except`` can catch is a finding too: a case that takes longer than
``timeout`` seconds (a hang), a child killed by a signal (a crash in compiled code), a case
that raises the child's peak RSS by more than ``memory_mb`` (the child's address space is
capped as well, so a huge allocation is a ``MemoryError``). After such a case the parent
starts a new child at the next one. Replay one with ``bench/fuzz.py --replay``."""

from __future__ import annotations

import importlib
import json
import os
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {
    "binlog": "tests.fuzz_binlogs:BinlogTarget",
    "packets": "tests.fuzz_binlogs:PacketTarget",
    "config": "tests.fuzz_config:ConfigTarget",
}
VARIANTS = ("compiled", "python")  # the compiled modules, or CHANGESTREAM_PURE_PYTHON=1


@dataclass(slots=True)
class Case:
    """One mutated input: its bytes, what it was made from and how, and how it is read."""

    data: bytes
    base: str
    mutation: str
    options: dict[str, Any] = field(default_factory=dict)
    index: int = -1  # set by the harness


class Target(Protocol):
    """Makes cases and reads them."""

    def case(self, rng: random.Random) -> Case: ...

    def run(self, case: Case, scratch: Path) -> int: ...


@dataclass(slots=True)
class Finding:
    """A case that did not end cleanly or in a one-line ChangestreamError."""

    target: str
    variant: str
    seed: int
    index: int
    base: str
    mutation: str
    problem: str  # the exception ("IndexError: ..."), "hang", "crash", "memory"
    where: str = ""  # the innermost frame, file:line

    def line(self) -> str:
        return (f"{self.target}/{self.variant} seed {self.seed} case {self.index} "
                f"({self.base}: {self.mutation}): {self.problem}"
                + (f" [{self.where}]" if self.where else ""))


@dataclass(slots=True)
class Report:
    """How many cases a run tried, and what it found."""

    tried: int = 0
    findings: list[Finding] = field(default_factory=list)


def load_target(name: str) -> Target:
    """The target registered as ``name``, or the class ``module:Class`` names."""
    module, _, attr = TARGETS.get(name, name).partition(":")
    target: Target = getattr(importlib.import_module(module), attr)()
    return target


def case_rng(target: str, variant: str, seed: int, index: int) -> random.Random:
    """The random source of one case: the same case for the same four, everywhere."""
    return random.Random(f"{target}/{variant}/{seed}/{index}")


def make_case(target: Target, name: str, variant: str, seed: int, index: int) -> Case:
    """Case ``index`` of ``target`` (registered as ``name``) for ``variant`` and ``seed``."""
    case = target.case(case_rng(name, variant, seed, index))
    case.index = index
    return case


def verdict(exc: BaseException) -> str | None:
    """What is wrong with how a case ended (``None``: nothing)."""
    from changestream.model.errors import BinlogError, ChangestreamError

    message = str(exc)
    if not isinstance(exc, ChangestreamError):
        return f"{type(exc).__name__}: {message[:300]}"
    if len(message.splitlines()) != 1:
        return f"{type(exc).__name__} not one line: {message[:300]!r}"
    if isinstance(exc, BinlogError) and exc.offset is None:
        return f"{type(exc).__name__} without an offset: {message[:300]}"
    return None


def innermost(exc: BaseException) -> str:
    """Where ``exc`` was raised: the innermost frame, relative to the checkout."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    path = Path(frame.filename)
    with_root = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    return f"{with_root}:{frame.lineno}"


def run_case(target: Target, case: Case, scratch: Path) -> tuple[str | None, str]:
    """Read one case: ``(problem or None, where)``."""
    try:
        target.run(case, scratch)
    except RecursionError as exc:  # before Exception: it is one
        return f"RecursionError: {exc}", innermost(exc)
    except Exception as exc:
        problem = verdict(exc)
        return problem, innermost(exc) if problem else ""
    return None, ""


# -- the child ----------------------------------------------------------------------------


def _cap_memory(memory_mb: int) -> None:
    """Cap the address space at what the process maps now plus four times ``memory_mb``."""
    mapped = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                mapped = int(line.split()[1]) * 1024
    limit = mapped + 4 * memory_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(target_name: str, variant: str, seed: int, start: int, stop: int,
          deadline: float, memory_mb: int) -> None:
    """Run cases ``start`` to ``stop`` (or until the wall clock passes ``deadline``),
    writing ``start I`` before each and a JSON line after it to stdout."""
    import logging

    logging.getLogger("changestream").setLevel(logging.CRITICAL)
    target = load_target(target_name)
    out = sys.stdout
    with tempfile.TemporaryDirectory(prefix="changestream-fuzz-") as scratch:
        _cap_memory(memory_mb)
        for index in range(start, stop):
            if time.time() > deadline:
                break
            case = make_case(target, target_name, variant, seed, index)
            out.write(f"start {index}\n")
            out.flush()
            before = _peak_rss_mb()
            problem, where = run_case(target, case, Path(scratch))
            grew = _peak_rss_mb() - before
            if problem is None and grew > memory_mb:
                problem = f"memory: peak RSS grew by {grew:.0f} MB"
            report = None if problem is None else {"base": case.base,
                                                   "mutation": case.mutation,
                                                   "problem": problem, "where": where}
            out.write(json.dumps({"index": index, "finding": report}) + "\n")
            out.flush()
    out.write("done\n")
    out.flush()


# -- the parent ---------------------------------------------------------------------------

_CHILD = ("import sys; from tests.fuzzing import child; a = sys.argv[1:]; "
          "child(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), float(a[5]), int(a[6]))")


def fuzz(target: str, *, seed: int, variant: str = "compiled", count: int | None = None,
         seconds: float | None = None, timeout: float = 10.0, memory_mb: int = 512,
         first: int = 0, on_finding: Callable[[Finding], None] | None = None) -> Report:
    """Run ``count`` cases of ``target`` from case ``first`` (or as many as ``seconds``
    allow) in child processes; a case the child does not finish within ``timeout``
    seconds, or that kills it, is a finding and the next child goes on after it."""
    report = Report()
    deadline = time.time() + seconds if seconds is not None else float("inf")
    stop = first + count if count is not None else 1 << 62
    index = first
    env = dict(os.environ)
    if variant == "python":
        env["CHANGESTREAM_PURE_PYTHON"] = "1"
    else:
        env.pop("CHANGESTREAM_PURE_PYTHON", None)
    while index < stop and time.time() < deadline:
        args = [sys.executable, "-c", _CHILD, target, variant, str(seed), str(index),
                str(stop), repr(deadline), str(memory_mb)]
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                       stderr=errors, stdin=subprocess.DEVNULL)
            index, finished, _ = _watch(process, target, variant, seed, index, timeout,
                                            report, errors, on_finding)
        if finished:
            break
    return report


def _watch(process: subprocess.Popen[bytes], target: str, variant: str, seed: int,
           index: int, timeout: float, report: Report, errors: Any,
           on_finding: Callable[[Finding], None] | None) -> tuple[int, bool, Finding | None]:
    """Follow one child: ``(the next case to run, whether the run is done, the hang or
    crash that ended the child)``."""
    assert process.stdout is not None
    stream = process.stdout
    current: int | None = None
    started = time.monotonic()
    pending = b""

    def found(problem: str, where: str = "") -> Finding:
        assert current is not None
        case = make_case(load_target(target), target, variant, seed, current)
        finding = Finding(target, variant, seed, current, case.base, case.mutation, problem,
                          where)
        report.tried += 1
        report.findings.append(finding)
        if on_finding is not None:
            on_finding(finding)
        return finding

    try:
        while True:
            wait = timeout - (time.monotonic() - started) if current is not None else 600.0
            ready = select.select([stream], [], [], max(0.0, wait))[0]
            if not ready:
                if current is None:
                    raise RuntimeError(f"fuzz child of {target} said nothing for 600 s")
                process.kill()
                return current + 1, False, found(f"hang: no end after {timeout:.0f} s")
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                code = process.wait()
                errors.seek(0)
                tail = errors.read().decode("utf-8", "replace").strip().splitlines()[-1:]
                if current is None:
                    raise RuntimeError(f"fuzz child of {target} ended with {_exit_text(code)} "
                                       f"between cases: {tail[0] if tail else ''}")
                return current + 1, False, found(
                    f"crash: child ended with {_exit_text(code)}"
                    + (f" ({tail[0][:200]})" if tail else ""))
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.startswith(b"start "):
                    current = int(line[6:])
                    started = time.monotonic()
                elif line == b"done":
                    process.wait()
                    return index, True, None
                elif line:
                    answer = json.loads(line)
                    current = None
                    index = answer["index"] + 1
                    report.tried += 1
                    if answer["finding"] is not None:
                        f = answer["finding"]
                        finding = Finding(target, variant, seed, answer["index"], f["base"],
                                          f["mutation"], f["problem"], f["where"])
                        report.findings.append(finding)
                        if on_finding is not None:
                            on_finding(finding)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _exit_text(code: int) -> str:
    if code < 0:
        import signal

        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def replay(target_name: str, variant: str, seed: int, index: int) -> tuple[Case, str | None]:
    """Run one case in this process, printing the traceback of a finding: the case and
    its problem, if any (``variant`` names the case; the compiled modules are used unless
    this process has ``CHANGESTREAM_PURE_PYTHON=1``)."""
    target = load_target(target_name)
    case = make_case(target, target_name, variant, seed, index)
    with tempfile.TemporaryDirectory(prefix="changestream-fuzz-") as scratch:
        try:
            target.run(case, Path(scratch))
        except BaseException as exc:
            problem = verdict(exc) if not isinstance(exc, RecursionError) else repr(exc)
            if problem is not None:
                traceback.print_exc()
            return case, problem
    return case, None
