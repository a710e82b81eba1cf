"""Errors raised by changestream, each saying what went wrong and where."""

from __future__ import annotations


class ChangestreamError(Exception):
    """Base class of every error changestream raises on purpose. Its message is one line:
    line breaks and other unprintable characters from what it quotes (names, statements,
    a server's text) are written as escapes."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(one_line(a) if isinstance(a, str) else a for a in args))


def one_line(text: str) -> str:
    """``text`` with each unprintable character (line breaks among them) as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


class ConfigError(ChangestreamError):
    """A configuration value is missing, unknown or of the wrong type."""


class SourceError(ChangestreamError):
    """The binlog source (a server or files) cannot be read."""


class ConnectionLostError(SourceError):
    """The server cannot be reached or went away (the router reconnects when it had been
    connected before)."""


class BinlogError(SourceError):
    """A binlog cannot be decoded at a given place.

    The message is one line: what is wrong, then ``file at offset N``.
    """

    def __init__(self, message: str, file: str | None = None, offset: int | None = None):
        self.reason = one_line(message)
        self.file = file
        self.offset = offset
        where = ""
        if file is not None or offset is not None:
            where = f" ({file or '<stream>'} at offset {offset if offset is not None else '?'})"
        super().__init__(message + where)


class TruncatedBinlogError(BinlogError):
    """The binlog ends inside an event."""


class ChecksumMismatchError(BinlogError):
    """An event's CRC32 does not match its bytes."""


class UnsupportedBinlogError(BinlogError):
    """The binlog uses a format or feature changestream refuses to read (encrypted, v1/v3)."""


class PurgedPositionError(SourceError):
    """The server no longer has the binlog the requested position is in."""


class SinkError(ChangestreamError):
    """A sink failed to make a batch durable."""


class SinkStoppedError(SinkError):
    """The sink is being closed by its owner: the batch is not written and not retried."""
