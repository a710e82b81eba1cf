"""Where the schema history is stored: beside the position file, one file per state (or,
for a sink that keeps its own position, where the sink keeps it: :class:`HistoryStorage`).

A state is stored as ``<position file>.schema-<digest>.json`` before the position that
refers to it (the position file's ``schema_history`` key) is written, so a crash at any
moment leaves a position whose state is on disk. States no position refers to any more
are removed after the position moved on. DDL is rare, so most positions refer to the
state the one before them did and nothing is written for the history.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import orjson

from changestream.model.errors import ConfigError
from changestream.schema.history import HISTORY_FORMAT, SchemaHistory, SchemaState


class HistoryStorage(Protocol):
    """Where the states of a schema history are kept, each under its content digest; a
    position names the state at it (``Position.schema_history``)."""

    def describe(self, digest: str) -> str:
        """Where the state ``digest`` is, for messages."""
        ...

    def save(self, digest: str, data: bytes) -> None:
        """Store a state durably (before any position that names it is stored)."""
        ...

    def load(self, digest: str) -> tuple[str, SchemaState]:
        """The flavor and state stored under ``digest``."""
        ...

    def prune(self, keep: str) -> None:
        """Remove every stored state but ``keep`` (called once a position naming it is
        stored)."""
        ...

    def skips(self) -> set[str]:
        """``FILE:POS`` of DDL statements to leave out (``changestream schema skip``)."""
        ...


def decode_state(data: bytes, where: str) -> tuple[str, SchemaState]:
    """A stored state's flavor and tables; ``where`` names it in errors."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"schema history {where} is not JSON ({exc})") from None
    if parsed.get("format") != HISTORY_FORMAT:
        raise ConfigError(f"schema history {where} has format {parsed.get('format')!r}, "
                          f"this changestream reads {HISTORY_FORMAT}")
    return str(parsed.get("flavor")), SchemaState.from_dict(parsed)


class SchemaHistoryStore:
    """The stored states of one position file (a :class:`HistoryStorage`)."""

    def __init__(self, position_file: str | os.PathLike[str]):
        self.position_file = Path(position_file)
        self._written: str | None = None

    @property
    def skip_file(self) -> Path:
        """DDL statements to leave out (``changestream schema skip``), one FILE:POS a line."""
        return self.position_file.with_name(f"{self.position_file.name}.schema-skip")

    def skips(self) -> set[str]:
        try:
            lines = self.skip_file.read_text().splitlines()
        except FileNotFoundError:
            return set()
        return {line.strip() for line in lines if line.strip()}

    def add_skip(self, where: str) -> None:
        with open(self.skip_file, "a") as f:
            f.write(where + "\n")

    def describe(self, digest: str) -> str:
        return str(self.path(digest))

    def path(self, digest: str) -> Path:
        return self.position_file.with_name(f"{self.position_file.name}.schema-{digest}.json")

    def save(self, digest: str, data: bytes) -> None:
        """Store a state durably (write, fsync, rename) unless it is stored already."""
        if digest == self._written:
            return
        path = self.path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        self._written = digest

    def prune(self, keep: str) -> None:
        """Remove every stored state but ``keep`` (call after the position refers to it)."""
        prefix = f"{self.position_file.name}.schema-"
        for path in self.position_file.parent.glob(prefix + "*.json"):
            if path != self.path(keep):
                path.unlink(missing_ok=True)

    def load(self, digest: str) -> tuple[str, SchemaState]:
        """The flavor and state stored under ``digest``."""
        path = self.path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(
                f"position file {self.position_file} refers to the schema history {path}, "
                "which is missing; restore it, or remove the position's schema_history key "
                "to rebuild the history from the server") from None
        return decode_state(data, str(path))


class HistoryHome(Protocol):
    """The position file as the history's openers see it (a
    :class:`~changestream.delivery.position_store.PositionStore`): where the history's
    states are stored beside it, and the history whose state each position is saved with."""

    path: Path
    history_store: SchemaHistoryStore

    def keep_history(self, history: SchemaHistory | None) -> None:
        """Save ``history``'s state with every position from now on."""
        ...
