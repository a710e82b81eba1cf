"""The tables added to and paused in a router's included set while it runs (through the
control endpoint or ``changestream tables``), kept in every position after the change, so a
restart goes on with them: they count beside the configured filter, not in it.

An added table is delivered whatever the configured patterns say; a paused one is not (its
changes while paused are not delivered: resuming it reads it again by a snapshot, unless
asked not to). Names are ``db.table`` (patterns such as ``shop.*`` too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from changestream.model.record import record


@record(frozen=True)
class TableChanges:
    """Tables ``added`` to and ``paused`` in the configured set (see the module docstring)."""

    added: tuple[str, ...] = ()
    paused: tuple[str, ...] = ()

    def add(self, tables: Sequence[str]) -> TableChanges:
        """These tables delivered from now on (and no longer paused)."""
        return TableChanges(_union(self.added, tables), _without(self.paused, tables))

    def pause(self, tables: Sequence[str]) -> TableChanges:
        """These tables not delivered from now on."""
        return TableChanges(self.added, _union(self.paused, tables))

    def resume(self, tables: Sequence[str]) -> TableChanges:
        """These tables, paused, delivered again."""
        return TableChanges(self.added, _without(self.paused, tables))

    def __bool__(self) -> bool:
        return bool(self.added or self.paused)

    def as_dict(self) -> dict[str, Any]:
        return {"added": list(self.added), "paused": list(self.paused)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> TableChanges:
        data = data or {}
        return cls(tuple(str(t) for t in data.get("added") or ()),
                   tuple(str(t) for t in data.get("paused") or ()))


def _union(kept: tuple[str, ...], more: Sequence[str]) -> tuple[str, ...]:
    return kept + tuple(t for t in dict.fromkeys(more) if t not in kept)


def _without(kept: tuple[str, ...], gone: Sequence[str]) -> tuple[str, ...]:
    return tuple(t for t in kept if t not in gone)
