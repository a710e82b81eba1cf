"""The sink adapter interface: how committed changes leave the router.

An adapter is any object with ``open``, ``write`` and ``close``; it knows nothing of actors.
The router calls ``open`` once, ``write`` for each batch in order (from another thread),
then ``close``. ``write`` returns only when the batch is durable: the position moves past it
only then. A batch can come again after a crash unless the adapter stores positions itself
(the last one returned from ``open``: exactly once) or its output can be cut back. What else
it offers it declares once as its ``capabilities`` (:class:`SinkCapabilities`); the router
reads nothing else of it (docs/sinks.md, "Writing a sink adapter")."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from changestream.model.changes import Batch, Position
from changestream.model.errors import ConfigError
from changestream.model.record import record

__all__ = ["DEFAULT_CAPABILITIES", "CutsBack", "KeepsHistory", "SetsPosition", "SinkAdapter",
           "SinkCapabilities", "capabilities_of"]


@runtime_checkable
class SinkAdapter(Protocol):
    """What the router needs of a sink."""

    def open(self) -> Position | None:
        """Prepare to write; return the position stored with the data, if the sink keeps
        one (else ``None``)."""
        ...

    def write(self, batch: Batch) -> None:
        """Make ``batch`` durable, or raise. Called again with the same batch on failure."""
        ...

    def close(self) -> None:
        """Release what ``open`` took. Called once, also after a failure."""
        ...




@record(frozen=True)
class SinkCapabilities:
    """What a sink adapter offers beyond ``open``/``write``/``close``, declared once as its
    ``capabilities`` attribute (docs/sinks.md has the table). Each default is what a plain
    adapter gets; a hook is called only when declared."""

    #: The micro-batch size it wants unless the router's batch settings give one (``None``:
    #: the router's default).
    batch_changes: int | None = None
    #: The micro-batch's byte limit it wants unless the router's batch settings give one
    #: (``None``: the router's default).
    batch_bytes: int | None = None
    #: CPUs its own writing keeps busy; the router starts that many fewer decode workers (at
    #: least one).
    writer_cpus: int = 0
    #: The records decode workers may encode for it: "changestream" or "original" (JSON
    #: lines), or ``module:attribute`` of its own
    #: :class:`~changestream.parallel.encodings.WorkerEncoding` (the Spark sink's Arrow
    #: frames); its batches then also hold :class:`~changestream.model.changes.EncodedRun`
    #: parts (``None``: changes only).
    encoded_format: str | None = None
    #: The schema history opens at the start (the adapter follows each DDL with the table's
    #: shape after it).
    wants_schema_history: bool = False
    #: It has ``history_storage()`` (called after ``open``), a
    #: :class:`~changestream.schema.store.HistoryStorage` where the schema history's states
    #: are kept beside the position it keeps itself.
    history_storage: bool = False
    #: It has ``durable_state() -> dict | None`` (what it has made durable, saved with every
    #: position) and ``restore(state)`` (called before ``open`` on a restart: it drops what
    #: it wrote after ``state``).
    durable_state: bool = False
    #: It has ``verify_schedule() -> (seconds, patterns) | None`` (its options ask for
    #: mirrors verified that often) and ``verify_target()``, a
    #: :class:`~changestream.verify.verifier.MirrorTarget` (docs/verify.md).
    verify_schedule: bool = False
    #: It has ``store_position(position)``, committing a position alone (``changestream
    #: schema reseed``).
    store_position: bool = False

    def __post_init__(self) -> None:
        for name in ("batch_changes", "batch_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigError(f"sink capabilities: {name} must be a positive int, "
                                  f"not {value!r}")
        if not isinstance(self.writer_cpus, int) or self.writer_cpus < 0:
            raise ConfigError(f"sink capabilities: writer_cpus must be an int >= 0, "
                              f"not {self.writer_cpus!r}")


DEFAULT_CAPABILITIES = SinkCapabilities()


class CutsBack(Protocol):
    """The hooks of an adapter that declares ``durable_state``."""

    def durable_state(self) -> dict[str, Any] | None: ...

    def restore(self, state: dict[str, Any] | None) -> None: ...


class KeepsHistory(Protocol):
    """The hook of an adapter that declares ``history_storage``."""

    def history_storage(self) -> Any: ...


class SetsPosition(Protocol):
    """The hook of an adapter that declares ``store_position``."""

    def store_position(self, position: Position) -> None: ...


def capabilities_of(sink: Any) -> SinkCapabilities:
    """``sink``'s declared :class:`SinkCapabilities` (the defaults when it declares none)."""
    declared = getattr(sink, "capabilities", DEFAULT_CAPABILITIES)
    if not isinstance(declared, SinkCapabilities):
        raise ConfigError(f"sink {type(sink).__name__}: capabilities must be a "
                          f"changestream.SinkCapabilities, not {type(declared).__name__}")
    return declared
