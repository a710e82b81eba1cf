"""The messages the router's actors send each other. Each carries a batch, never one row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from changestream.decoding.events import Event
from changestream.model.changes import EncodedRun, Position, TransactionPart
from changestream.model.record import record
from changestream.transactions.filters import ChangeFilter

if TYPE_CHECKING:
    from changestream.parallel.decode_workers import SegmentTicket
    from changestream.snapshot.coordinator import ChunkOffer


@record
class TablesSwitch:
    """Tables added or paused while running, at this point of the stream (a transaction
    boundary): the filter from here on, the changes the positions keep from here on
    (:class:`changestream.model.table_changes.TableChanges` as a dict), and the progress
    of the snapshot that starts here, if one does."""

    change_filter: ChangeFilter
    changes: dict[str, Any]
    snapshot: dict[str, Any] | None = None


@record
class EventBatch:
    """Events for the Transaction actor, in binlog order, with the tickets of segments
    handed to decode workers, snapshot chunks and table switches in their places."""

    events: Sequence[Event | SegmentTicket | ChunkOffer | TablesSwitch]


@record
class ResetOpenTransaction:
    """The source reconnects at the last transaction boundary: drop a half-read one."""


@record
class EndOfStream:
    """The source has ended (or the router stops): deliver what is pending, then finish."""

    reason: str = "end of source"


@record
class Parts:
    """Committed transactions (or parts of a big one) for the Sink actor, and the position
    after the last transaction completed among them (``None`` if none completed).
    ``reply_to``: the actor the Sink actor acknowledges it to (:class:`PartsTaken`)."""

    parts: Sequence[TransactionPart | EncodedRun]
    position: Position | None
    reply_to: Any = None  # a pykka.ActorRef


@record
class PartsTaken:
    """The Sink actor has taken a :class:`Parts` message: its sender may send another."""


@record
class SegmentDone:
    """A decode worker's answer for its oldest segment: the runs of transactions it
    encoded, or the error that stopped it."""

    worker: int
    answer: Any  # changestream.parallel.decode_workers.SegmentResult or an exception


@record
class CaughtUp:
    """The source has nothing more to read right now: everything read before it has been
    sent on. Sent down the pipeline (listener, Transaction actor, Sink actor) when the
    reader goes idle, so a batch is not kept waiting for more."""


@record
class Tick:
    """Time has passed (a timer the Sink actor set when its batch would be old enough):
    it looks again whether the batch is due."""
