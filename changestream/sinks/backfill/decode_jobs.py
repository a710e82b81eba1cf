"""Where a backfill's units are decoded: in processes of the driver's machine when Spark
runs there (``local[N]``: N processes), else in a Spark job on the executors. Both hand each
unit's manifest to the landing as soon as it is staged, in any order; the landing takes them
in binlog order (:meth:`DecodeJob.wait_for`).

Why not Spark tasks on a local master too: a task there is a Python worker of Spark's
on the same cores, and its scheduling and the workers' start cost seconds per job (a
10-task job of nothing took 1.7 s warm and 4.5 s cold on 2 CPUs), as long as the decoding
of 300,000 changes itself."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from typing import TYPE_CHECKING, Protocol

from changestream.model.errors import SinkError, SourceError
from changestream.parallel.channel import Channel
from changestream.parallel.processes import HelperProcess, reap, start_python
from changestream.transactions.filters import ChangeFilter

from .decoding import ERROR, UnitManifest, decode_unit, read_error, read_manifest, unit_folder
from .names import UnitNames
from .planning import BackfillUnit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: ``decode_on`` settings: ``auto`` (local processes on a ``local`` master, else Spark).
DECODE_PLACES = ("auto", "local", "spark")


class DecodeJob(Protocol):
    """Decodes units in the background; their manifests on request."""

    units: list[BackfillUnit]

    def start(self) -> None: ...

    def ready(self, unit: BackfillUnit) -> bool:
        """Whether the unit's manifest is there (:meth:`wait_for` would not wait)."""
        ...

    def wait_for(self, unit: BackfillUnit) -> UnitManifest: ...

    def stop(self) -> None: ...


def local_processes(master: str) -> int | None:
    """How many decoding processes a Spark ``master`` URL's machine gives (``local``: 1,
    ``local[N]`` or ``local[N,F]``: N, ``local[*]``: every CPU); ``None`` for a cluster."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if found is None:
        return None
    count = found.group(1)
    if count is None:
        return 1
    return (os.cpu_count() or 1) if count == "*" else max(1, int(count))


def decode_job(spark: SparkSession, place: str, units: list[BackfillUnit], staging: str,
               chunk_changes: int, change_filter: ChangeFilter | None,
               names: dict[int, UnitNames]) -> DecodeJob:
    """The job that decodes ``units`` where ``place`` says (:data:`DECODE_PLACES`)."""
    processes = local_processes(spark.sparkContext.master or "")
    if place == "local" or (place == "auto" and processes is not None):
        return LocalDecodeJob(units, staging, chunk_changes, change_filter, names,
                              processes or (os.cpu_count() or 1))
    return SparkDecodeJob(spark, units, staging, chunk_changes, change_filter, names)


def staged(staging: str, unit: BackfillUnit) -> UnitManifest | None:
    """The unit's manifest if it was staged; a ``SourceError`` if decoding it found the
    binlog at fault (the error staged in its place); ``None`` while neither is there."""
    manifest = read_manifest(staging, unit.index)
    if manifest is not None:
        return manifest
    error = read_error(staging, unit.index)
    if error is not None:
        raise SourceError(f"backfill: {error}")
    return None


def _clear_errors(units: list[BackfillUnit], staging: str) -> None:
    for unit in units:  # what a failed attempt said is not this attempt's answer
        (unit_folder(staging, unit.index) / ERROR).unlink(missing_ok=True)


class LocalDecodeJob:
    """Units decoded by ``processes`` helper processes of this machine
    (:func:`~changestream.parallel.processes.start_python` on :func:`serve_units`), taken
    in binlog order."""

    def __init__(self, units: list[BackfillUnit], staging: str, chunk_changes: int,
                 change_filter: ChangeFilter | None, names: dict[int, UnitNames],
                 processes: int):
        self.units = units
        self.staging = staging
        self.chunk_changes = chunk_changes
        self.change_filter = change_filter
        self.names = names
        self.processes = max(1, min(processes, len(units)))
        self._todo = list(reversed(units))
        self._lock = threading.Lock()
        self._done = {unit.index: threading.Event() for unit in units}
        self._failures: dict[int, str] = {}
        self._children: list[HelperProcess] = []
        self._channels: list[Channel] = []
        self._threads: list[threading.Thread] = []
        _clear_errors(units, staging)

    def start(self) -> None:
        for i in range(self.processes if self.units else 0):
            channel, process = start_python("changestream.sinks.backfill.decode_jobs",
                                            "serve_units", f"changestream-backfill-{i}")
            self._channels.append(channel)
            self._children.append(process)
            thread = threading.Thread(target=self._feed, args=(channel, process),
                                      name=f"backfill-decode-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _next(self) -> BackfillUnit | None:
        with self._lock:
            return self._todo.pop() if self._todo and not self._failures else None

    def _feed(self, channel: Channel, process: HelperProcess) -> None:
        """Hand units to one process until none are left (or one failed)."""
        while (unit := self._next()) is not None:
            try:
                # Not compressed: the pieces are on this machine's disk, and the driver
                # maps them rather than decompress them (decoding.py).
                channel.send((unit, self.staging, self.chunk_changes, self.change_filter,
                              self.names.get(unit.index), False))
                failure = channel.recv()
            except (OSError, EOFError):
                code = process.wait()
                failure = (f"the decoding process ended (exit code {code}) while it decoded "
                           f"{unit.describe()}")
            if failure is not None:
                self._fail(unit, failure)
                return
            self._done[unit.index].set()
        with contextlib.suppress(OSError):
            channel.send(None)

    def _fail(self, unit: BackfillUnit, failure: str) -> None:
        """Stop the job: ``unit`` failed, and the units not decoded yet will not be."""
        with self._lock:
            self._failures.setdefault(unit.index, failure)
            self._todo.clear()
        for event in self._done.values():
            event.set()

    def ready(self, unit: BackfillUnit) -> bool:
        event = self._done.get(unit.index)
        return event is None or event.is_set()

    def wait_for(self, unit: BackfillUnit) -> UnitManifest:
        """The unit's manifest once a process has staged it."""
        event = self._done.get(unit.index)
        if event is not None:
            event.wait()
        manifest = staged(self.staging, unit)
        if manifest is not None:
            return manifest
        failure = self._failures.get(unit.index) or next(iter(self._failures.values()), None)
        raise SinkError(f"backfill: {failure or unit.describe() + ' was not decoded'}")

    def stop(self) -> None:
        with self._lock:
            self._todo.clear()
        for channel in self._channels:
            with contextlib.suppress(OSError):
                channel.shutdown()
            channel.close()
        reap(self._children)
        for thread in self._threads:
            thread.join(timeout=10)


def serve_units(fd: int) -> None:
    """A decoding process's life: units from the backfill's driver on ``fd``, each answered
    with ``None`` once staged (a binlog's error is staged too), or what went wrong."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's to handle
    channel = Channel.of_fd(fd)
    while True:
        try:
            task = channel.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        try:
            decode_unit(*task)
            answer = None
        except Exception as exc:  # decode_unit stages the binlog's errors itself
            answer = f"decoding {task[0].describe()} failed: {type(exc).__name__}: {exc}"
        try:
            channel.send(answer)
        except OSError:
            return


class SparkDecodeJob:
    """The Spark job that decodes ``units`` on the executors, run from a thread so the
    driver lands units while later ones are decoded."""

    def __init__(self, spark: SparkSession, units: list[BackfillUnit], staging: str,
                 chunk_changes: int, change_filter: ChangeFilter | None,
                 names: dict[int, UnitNames] | None = None):
        self.spark = spark
        self.names = names or {}
        self.change_filter = change_filter
        self.units = units
        self.staging = staging
        self.chunk_changes = chunk_changes
        self.failure: BaseException | None = None
        self.group = f"changestream-backfill-{id(self)}"
        self._thread = threading.Thread(target=self._run, name="backfill-decode",
                                        daemon=True)
        _clear_errors(units, staging)

    def start(self) -> None:
        if self.units:
            self._thread.start()

    def _run(self) -> None:
        staging, chunk, only = self.staging, self.chunk_changes, self.change_filter
        names = self.names
        sc = self.spark.sparkContext
        try:
            sc.setJobGroup(self.group, "changestream backfill: decode binlog units", True)
            sc.parallelize(self.units, len(self.units)) \
                .map(lambda unit: decode_unit(unit, staging, chunk, only,
                                              names.get(unit.index)).index).collect()
        except BaseException as exc:  # handed to the waiting driver
            self.failure = exc

    def ready(self, unit: BackfillUnit) -> bool:
        return read_manifest(self.staging, unit.index) is not None or \
            read_error(self.staging, unit.index) is not None or not self._thread.is_alive()

    def wait_for(self, unit: BackfillUnit) -> UnitManifest:
        """The unit's manifest once its task has written it."""
        while True:
            manifest = staged(self.staging, unit)
            if manifest is not None:
                return manifest
            if not self._thread.is_alive():
                if self.failure is not None:
                    raise SinkError(f"backfill: decoding failed on Spark: "
                                    f"{first_line(self.failure)}") from self.failure
                manifest = read_manifest(self.staging, unit.index)
                if manifest is None:
                    raise SinkError(f"backfill: {unit.describe()} was not decoded")
                continue
            time.sleep(0.05)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.spark.sparkContext.cancelJobGroup(self.group)
            self._thread.join(timeout=30)


def first_line(exc: BaseException) -> str:
    """What went wrong on Spark, in a line (the Python error of a task, if it was one)."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    missing = [line for line in lines if line.startswith("ModuleNotFoundError")]
    if missing:
        return (f"{missing[0]}: the executors' Python lacks changestream or its "
                "dependencies (set PYSPARK_PYTHON or spark.pyspark.python to a Python that "
                "has them)")
    errors = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception): ", line)]
    text = errors[-1] if errors else (lines[0] if lines else type(exc).__name__)
    return text[:500]
