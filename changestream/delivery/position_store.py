"""Where the router keeps its resume position: a small JSON file written atomically."""

from __future__ import annotations

import contextlib
import json
import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

from changestream.delivery.adapter import CutsBack, SinkAdapter, capabilities_of
from changestream.model.changes import Position
from changestream.model.errors import ConfigError
from changestream.schema.history import SchemaHistory
from changestream.schema.store import SchemaHistoryStore


class PositionStore:
    """A position file, replaced atomically (write, fsync, rename, fsync the folder), so a
    crash at any moment leaves either the old or the new position, never a torn one.

    With a schema history attached (:meth:`keep_history`), each position is saved with the
    history's state at that position, stored beside it first.

    ``sink_state`` is what the sink had made durable at the saved position
    (:attr:`Position.sink`), or, before the first position, the sink's state when the router
    first opened it (:meth:`save_baseline`): a sink restored from it cuts off what a crash
    left after it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.last_batch_id = 0
        self.history: SchemaHistory | None = None
        self.history_store = SchemaHistoryStore(self.path)
        self._pruned: str | None = None
        self.sink_state: dict[str, Any] | None = None

    def keep_history(self, history: SchemaHistory | None) -> None:
        """Save ``history``'s state with every position from now on."""
        self.history = history

    def load(self) -> Position | None:
        """The saved position, or ``None`` when nothing was saved yet."""
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            self.last_batch_id = int(data.get("batch_id") or 0)
            sink = data.get("sink")
            if sink is not None and not isinstance(sink, dict):
                raise ValueError("'sink' is not a JSON object")
            self.sink_state = sink
            if "file" not in data and sink is not None:
                return None  # only the sink's state from before the first position
            return Position.from_dict(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"position file {self.path} is not a changestream position "
                              f"({exc}); remove it or start with --start") from None

    def save_baseline(self, sink_state: dict[str, Any]) -> None:
        """Before the first position is saved: keep the sink's state as the router opened
        it, so that a crash before the first position cuts the sink back to it."""
        self.sink_state = sink_state
        self._write({"sink": sink_state})

    def save(self, position: Position, batch_id: int | None = None) -> None:
        """Replace the saved position (and the id of the last batch written)."""
        data = position.as_dict()
        digest = None
        if self.history is not None:
            digest, state = self.history.stored_at(position.file, position.pos)
            self.history_store.save(digest, state)
            data["schema_history"] = digest
        if batch_id is not None:
            data["batch_id"] = self.last_batch_id = batch_id
        self.sink_state = position.sink
        self._write(data)
        if digest is not None and digest != self._pruned:
            self.history_store.prune(keep=digest)
            self._pruned = digest

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def open_sink(sink: SinkAdapter, store: PositionStore | None, saved: Position | None,
              fence: AbstractContextManager[Any] | None = None) -> Position | None:
    """Open ``sink`` and return what its ``open`` returns. A sink that cuts its output back
    on a restart gets the state saved with the last position first, and on the first start
    its state is saved at once (see :mod:`changestream.delivery.adapter`). All of it happens
    inside ``fence`` when given (a standby router's lease: one that lost it cuts nothing)."""
    with fence or contextlib.nullcontext():
        return _open_sink(sink, store, saved)


def _open_sink(sink: SinkAdapter, store: PositionStore | None,
               saved: Position | None) -> Position | None:
    cuts_back = capabilities_of(sink).durable_state
    if store is not None and cuts_back:
        cast(CutsBack, sink).restore(store.sink_state)
    sink_position = sink.open()
    if store is not None and saved is None and cuts_back:
        baseline = cast(CutsBack, sink).durable_state()
        if baseline is not None:
            try:
                store.save_baseline(baseline)
            except BaseException:
                sink.close()
                raise
    return sink_position
