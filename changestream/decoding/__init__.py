"""Decoding of binlog events from their bytes: one path for files and live streams."""

from changestream.decoding.event_decoder import EventDecoder
from changestream.decoding.events import (
    Event,
    FormatDescriptionEvent,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RowsEvent,
    TableMapEvent,
    XaPrepareEvent,
    XidEvent,
)

__all__ = [
    "Event",
    "EventDecoder",
    "FormatDescriptionEvent",
    "GtidEvent",
    "MariadbGtidEvent",
    "QueryEvent",
    "RowsEvent",
    "TableMapEvent",
    "XaPrepareEvent",
    "XidEvent",
]
