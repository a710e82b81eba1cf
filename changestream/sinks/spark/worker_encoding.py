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


class ArrowFrames:
    """The Spark sink's table runs, as Arrow frames."""

    collects_parts = True

    def fast_walk(self, decoder: EventDecoder, change_filter: ChangeFilter | None,
                  include_sql: bool) -> Any | None:
        module = compiled("changestream.sinks.spark._arrow_walk")
        return None if module is None else module.ArrowSegmentEncoder(
            decoder, change_filter, include_sql)

    def walk_payload(self, walk: Any, done: list[EncodedTransaction], file: str,
                     lines: list[bytes]) -> Payload:
        payload: Payload = walk.payload(done, file)
        return payload

    def general_payload(self, whole: list[list[TransactionPart]], changes: list[Change],
                        stamp: str) -> Payload:
        from .frames import encode_runs, table_runs

        def payload(first: int, end: int, _begin: int, _end: int) -> bytes:
            return encode_runs(table_runs([p for parts in whole[first:end] for p in parts],
                                          all_before=True))

        return payload

    def chunk_encoding(self) -> ChunkEncoding:
        from .snapshot_frames import ArrowChunks

        return ArrowChunks()
