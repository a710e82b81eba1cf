"""How decode workers encode a segment's records for the sink: a :class:`WorkerEncoding`,
named by the sink's ``encoded_format`` capability and built in each worker process. The
JSON-lines formats are built in (:class:`RecordLines`); any other name is
``module:attribute`` of a class the worker imports, so a sink brings its own encoding and
the core imports no sink (the Spark sink's is
:class:`changestream.sinks.spark.worker_encoding.ArrowFrames`). The same encoding says how
snapshot chunks become a sink's own records (:meth:`WorkerEncoding.chunk_encoding`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from changestream.decoding.event_decoder import EventDecoder
from changestream.encoding.records import record_lines
from changestream.model.changes import Change, TransactionPart
from changestream.model.errors import ConfigError
from changestream.parallel.segment_encoder import EncodedTransaction, segment_encoder
from changestream.transactions.filters import ChangeFilter

if TYPE_CHECKING:  # the snapshot's floor is above this one
    from changestream.snapshot.encodings import ChunkEncoding

#: A run's records: ``payload(first transaction, after its last, first change, after its
#: last)``, indices into the segment's transactions and changes (bytes for the router;
#: a worker in the reader's own process may hand over objects instead:
#: ``worker_encoding.InProcessArrowFrames``).
Payload = Callable[[int, int, int, int], bytes]

#: The encodings decode workers have built in: changestream's and the original JSON lines.
RECORD_FORMATS = ("changestream", "original")


class WorkerEncoding(Protocol):
    """A sink's records as decode workers write them."""

    #: The general path hands :meth:`general_payload` each transaction's parts (else only
    #: the changes).
    collects_parts: bool

    def fast_walk(self, decoder: EventDecoder, change_filter: ChangeFilter | None,
                  include_sql: bool) -> Any | None:
        """A walk of a segment's bytes straight to records (its ``encode`` gives the
        transactions or ``None`` when it does not take the segment; its ``table_counts``
        the changes by table and op); ``None``: the general path only."""

    def walk_payload(self, walk: Any, done: list[EncodedTransaction], file: str,
                     lines: list[bytes]) -> Payload:
        """The runs' records of a segment ``walk`` encoded (``lines``: what it wrote)."""

    def general_payload(self, whole: list[list[TransactionPart]], changes: list[Change],
                        stamp: str) -> Payload:
        """The runs' records of a segment the router's own decoder and assembler read."""

    def chunk_encoding(self) -> ChunkEncoding | None:
        """The same records of snapshot chunks, made in the router's process from the
        server's text rows (``None``: snapshot rows come to the sink as changes)."""


class RecordLines:
    """changestream's or the original JSON-lines records (``record_format``)."""

    collects_parts = False

    def __init__(self, record_format: str):
        self.record_format = record_format

    def fast_walk(self, decoder: EventDecoder, change_filter: ChangeFilter | None,
                  include_sql: bool) -> Any | None:
        if self.record_format != "changestream":
            return None
        return segment_encoder(decoder, change_filter, include_sql)

    def walk_payload(self, walk: Any, done: list[EncodedTransaction], file: str,
                     lines: list[bytes]) -> Payload:
        return _joined(lines)

    def general_payload(self, whole: list[list[TransactionPart]], changes: list[Change],
                        stamp: str) -> Payload:
        return _joined(list(record_lines(changes, self.record_format, stamp)))

    def chunk_encoding(self) -> ChunkEncoding | None:
        return None  # the snapshot writes changestream's own (snapshot.encodings)


def _joined(lines: list[bytes]) -> Payload:
    """A run's records when they are record lines: its changes' lines, joined."""
    return lambda _first, _end, begin, end: b"".join(lines[begin:end])


def load_encoding(name: str) -> WorkerEncoding:
    """The encoding ``name`` names: a built-in record format, or ``module:attribute`` of a
    class made with no arguments."""
    if name in RECORD_FORMATS:
        return RecordLines(name)
    module, _, attribute = name.partition(":")
    if not module or not attribute:
        raise ConfigError(f"decode workers: encoding {name!r} is neither a record format "
                          f"({', '.join(RECORD_FORMATS)}) nor module:attribute")
    try:
        made: WorkerEncoding = getattr(importlib.import_module(module), attribute)()
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"decode workers: cannot load encoding {name!r}: {exc}") from None
    return made
