"""The binlog source a router reads, built from its source URL and settings, and the
shape the listener reads it in."""

from __future__ import annotations

from collections.abc import Iterator

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import Event
from changestream.model.errors import ConfigError
from changestream.runtime.settings import RouterSettings
from changestream.sources.files import FileSource
from changestream.sources.live import LiveSource, StartPosition
from changestream.sources.raw import RawEvent
from changestream.sources.source_url import SourceSpec


def open_source(spec: SourceSpec, settings: RouterSettings, start: StartPosition,
                decoder: EventDecoder, follow: bool | None = None) -> FileSource | LiveSource:
    """The source ``spec`` names, from ``start``; ``follow`` (default: unless ``until`` is
    set) waits for new events at the end instead of ending there."""
    if follow is None:
        follow = settings.until is None
    if spec.kind == "files":
        if start.kind == "gtid":
            raise ConfigError("a file source starts at 'earliest' or FILE:POS, not a GTID")
        return FileSource(spec.paths, start_file=start.file if start.kind == "file" else None,
                          start_pos=start.pos if start.kind == "file" else 4,
                          follow=follow, decoder=decoder)
    return LiveSource(spec.connection, start, server_id=settings.server_id,
                      blocking=follow, heartbeat_seconds=settings.heartbeat_seconds,
                      verify_checksums=settings.verify_checksums, decoder=decoder,
                      annotations=settings.include_sql)


class SourceStream:
    """A source as the listener reads it: events, then ``None`` whenever it is idle."""

    def __init__(self, source: FileSource | LiveSource, decoder: EventDecoder):
        self.source = source
        self.decoder = decoder

    def stream(self) -> Iterator[Event | None]:
        return self.source.stream()

    def raw_stream(self) -> Iterator[RawEvent | None]:
        return self.source.raw_events(idle=True)

    def raw_batches(self) -> Iterator[list[RawEvent] | None]:
        return self.source.raw_batches(idle=True)

    def stop(self) -> None:
        self.source.stop()
