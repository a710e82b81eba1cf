"""Decode workers' work done in the reader's own process: for a reader that is itself one of
several processes (a backfill's helper process or Spark task), where plain DML transactions
still go faster through a worker's compiled walk than through the general path, but other
processes would only take CPUs from its neighbours.

:class:`InlineWorkers` stands in for the worker processes
(:class:`changestream.parallel.decode_workers.DecodeWorkers`) beside a
:class:`changestream.parallel.segments.Segmenter`: always ready, it keeps each segment
handed to it and assembles it with one worker's ``_Worker`` when its answer is asked for, as
a worker process would have (the same runs; a worker's error is raised there, where the
router raises the one a worker sends back)."""

from __future__ import annotations

from collections import deque

from changestream.parallel.decode_workers import (
    Segment,
    SegmentResult,
    SegmentTicket,
    WorkerSettings,
    _Worker,
)


class InlineWorkers:
    """A decode worker in this process (see the module docstring); ``run_changes``: cut a
    segment's transactions into runs of about that many changes (default: one run)."""

    ready = True

    def __init__(self, settings: WorkerSettings, run_changes: int = 1 << 62):
        self.settings = settings
        self.worker = _Worker(settings, run_changes)
        self._waiting: deque[tuple[SegmentTicket, Segment]] = deque()

    def submit(self, segment: Segment, end: tuple[str, int]) -> SegmentTicket:
        """Keep ``segment``, which ends at ``end``, for :meth:`answer`."""
        ticket = SegmentTicket(0, len(segment.offsets), end)
        self._waiting.append((ticket, segment))
        return ticket

    def answer(self, ticket: SegmentTicket) -> SegmentResult:
        """The runs of ``ticket``'s segment; tickets are answered in the order given."""
        if not self._waiting or self._waiting[0][0] is not ticket:
            raise ValueError("inline decode worker: answers are taken in the order the "
                             "segments were submitted")
        _, segment = self._waiting.popleft()
        return self.worker.assemble(segment)
