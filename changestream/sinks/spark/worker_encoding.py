"""The Spark sink's records as decode workers write them: its table runs as Arrow frames
(:func:`changestream.sinks.spark.frames.encode_runs`), from a segment's bytes by the
compiled walk (:mod:`changestream.sinks.spark._arrow_walk`) where it was built, else from
the general path's transactions (:class:`changestream.parallel.encodings.WorkerEncoding`);
snapshot chunks the same way, from the server's text rows
(:mod:`changestream.sinks.spark.snapshot_frames`)."""

from __future__ import annotations

from typing import Any

from changestream.decoding.event_decoder import EventDecoder
from changestream.model.changes import Change, TransactionPart
from changestream.native import compiled
from changestream.parallel.encodings import Payload
from changestream.parallel.segment_encoder import EncodedTransaction
from changestream.snapshot.encodings import ChunkEncoding
from changestream.transactions.filters import ChangeFilter

#: The name the sink declares as its ``encoded_format``.
ARROW_FRAMES = "changestream.sinks.spark.worker_encoding:ArrowFrames"

#: The same frames for a worker in the reader's own process (a backfill unit's).
IN_PROCESS_ARROW_FRAMES = "changestream.sinks.spark.worker_encoding:InProcessArrowFrames"


class ArrowFrames:
    """The Spark sink's table runs, as Arrow frames."""

    collects_parts = True
    #: Records as bytes for another process (``frames.encode_runs``); without, the frames
    #: themselves, as ``frames.decode_runs`` gives them back.
    encoded = True

    def fast_walk(self, decoder: EventDecoder, change_filter: ChangeFilter | None,
                  include_sql: bool) -> Any | None:
        module = compiled("changestream.sinks.spark._arrow_walk")
        return None if module is None else module.ArrowSegmentEncoder(
            decoder, change_filter, include_sql)

    def walk_payload(self, walk: Any, done: list[EncodedTransaction], file: str,
                     lines: list[bytes]) -> Payload:
        payload: Payload = walk.payload(done, file, self.encoded)
        return payload

    def general_payload(self, whole: list[list[TransactionPart]], changes: list[Change],
                        stamp: str) -> Payload:
        from .frames import encode_runs, table_runs

        def payload(first: int, end: int, _begin: int, _end: int) -> Any:
            runs = table_runs([p for parts in whole[first:end] for p in parts],
                              all_before=True)
            if self.encoded:
                return encode_runs(runs)
            return [(run.schema, list(run.spans), run.frame) for run in runs]

        return payload

    def chunk_encoding(self) -> ChunkEncoding:
        from .snapshot_frames import ArrowChunks

        return ArrowChunks()


class InProcessArrowFrames(ArrowFrames):
    """:class:`ArrowFrames` for a decode worker in the reader's own process
    (:class:`changestream.parallel.inline_workers.InlineWorkers`): its runs' records are
    the frames, not bytes to read back (an IPC write, a pickle and their reading: a
    222,200-change unit's decoding took 0.42-0.50 CPU seconds with them, 0.23-0.35
    without)."""

    encoded = False
