"""Cutting one transaction out of binlog files into a standalone binlog file."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

from changestream.decoding import event_types as et
from changestream.decoding.boundary import TransactionBoundaryParser
from changestream.decoding.event_decoder import CHECKSUM_CRC32, HEADER_SIZE, EventDecoder
from changestream.decoding.events import GtidEvent, MariadbGtidEvent
from changestream.model.errors import BinlogError, SourceError, TruncatedBinlogError
from changestream.sources.files import _open, binlog_files
from changestream.sources.raw import BINLOG_MAGIC

_GTID_TYPES = (et.GTID, et.ANONYMOUS_GTID, et.GTID_TAGGED, et.MARIADB_GTID)
_SIZE = struct.Struct("<I")


def _relocate(data: bytes, new_offset: int, crc: bool, fde: bool = False) -> bytes:
    """The event with its end position set for ``new_offset`` and its checksum recomputed."""
    out = bytearray(data)
    _SIZE.pack_into(out, 13, new_offset + len(out))
    if fde:
        out[17] &= ~0x01  # the extracted file is complete, not "in use"
    if crc:
        _SIZE.pack_into(out, len(out) - 4, zlib.crc32(out[:-4]))
    return bytes(out)


class ExtractResult:
    """What ``extract_transaction`` found: the source file, offsets and event count."""

    def __init__(self, file: str, start: int, end: int, events: int, skipped: int):
        self.file, self.start, self.end, self.events = file, start, end, events
        self.skipped_by_length = skipped


def extract_transaction(paths: Iterable[str | Path], gtid: str, out: str | Path
                        ) -> ExtractResult:
    """Write the transaction with ``gtid`` as a standalone binlog (FDE + its events) at
    ``out``. Transactions whose GTID event carries ``transaction_length`` are jumped over
    without reading their events."""
    for path in binlog_files(paths):
        found = _extract_from(path, gtid, Path(out))
        if found is not None:
            return found
    raise SourceError(f"no transaction with GTID {gtid} in {', '.join(map(str, paths))}")


def _extract_from(path: Path, gtid: str, out: Path) -> ExtractResult | None:
    name = str(path)
    decoder = EventDecoder()
    skipped = 0
    with _open(path) as f:
        if f.read(4) != BINLOG_MAGIC:
            raise BinlogError("not a binlog file", name, 0)
        offset = 4
        fde_raw: bytes | None = None
        while True:
            header = f.read(HEADER_SIZE)
            if not header:
                return None
            if len(header) < HEADER_SIZE:
                raise TruncatedBinlogError("file ends inside an event header", name, offset)
            size = _SIZE.unpack_from(header, 9)[0]
            type_code = header[4]
            if type_code in _GTID_TYPES or type_code == et.FORMAT_DESCRIPTION:
                data = header + f.read(size - HEADER_SIZE)
                event = decoder.decode(data, name, offset)
                if type_code == et.FORMAT_DESCRIPTION:
                    fde_raw = data
                elif isinstance(event, GtidEvent | MariadbGtidEvent) and event.gtid == gtid:
                    assert fde_raw is not None
                    return _write(f, name, offset, data, fde_raw, decoder, out, skipped)
                elif isinstance(event, GtidEvent) and event.transaction_length:
                    f.seek(offset + event.transaction_length)
                    offset += event.transaction_length
                    skipped += 1
                    continue
            else:
                f.seek(size - HEADER_SIZE, 1)
            offset += size


def _write(f, name: str, start: int, gtid_raw: bytes, fde_raw: bytes, decoder: EventDecoder,
           out: Path, skipped: int) -> ExtractResult:
    crc = decoder.checksum_alg == CHECKSUM_CRC32
    parser = TransactionBoundaryParser()
    parser.feed(decoder.decode(gtid_raw, name, start))
    pieces = [BINLOG_MAGIC, _relocate(fde_raw, 4, crc, fde=True)]
    new_offset = 4 + len(fde_raw)
    offset = start
    data = gtid_raw
    events = 0
    while True:
        pieces.append(_relocate(data, new_offset, crc))
        new_offset += len(data)
        offset += len(data)
        events += 1
        if events > 1 and not parser.inside_transaction:
            break
        header = f.read(HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            raise TruncatedBinlogError("file ends inside the transaction", name, offset)
        size = _SIZE.unpack_from(header, 9)[0]
        data = header + f.read(size - HEADER_SIZE)
        if len(data) < size:
            raise TruncatedBinlogError("file ends inside the transaction", name, offset)
        parser.feed(decoder.decode(data, name, offset))
    out.write_bytes(b"".join(pieces))
    return ExtractResult(name, start, offset, events, skipped)
