"""Binlog sources: raw events from files or a live server, decoded by one ``EventDecoder``."""

from changestream.sources.files import FileSource, binlog_files
from changestream.sources.raw import RawEvent

__all__ = ["FileSource", "RawEvent", "binlog_files"]
