"""From the bytes of one event to a decoded ``Event``: the single decoding path that the file
source and the live source share.

:class:`EventDecoder` frames each event (header, checksum), dispatches its body by type and
keeps the state decoding needs between events (format description, table maps, row
decoders). The stateless body decoders are in :mod:`.control_events`,
:mod:`.statement_events`, :mod:`.gtid_events`, :mod:`.gtid_tagged` and :mod:`.compression`;
the header layout and checksum algorithms in :mod:`.event_framing`.
"""

from __future__ import annotations

import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import zstandard

from changestream.decoding import control_events as ce
from changestream.decoding import event_types as et
from changestream.decoding import field_types as ft
from changestream.decoding import gtid_events as ge
from changestream.decoding import statement_events as se
from changestream.decoding.charsets import UnknownCollationError
from changestream.decoding.compression import (
    decode_transaction_payload,
    mariadb_uncompress,
    uncompress_rows,
)
from changestream.decoding.event_framing import (
    CHECKSUM_CRC32,
    CHECKSUM_OFF,
    DEFAULT_POST_HEADER,
    HEADER,
    HEADER_SIZE,
    server_has_checksums,
)
from changestream.decoding.events import (
    Event,
    EventHeader,
    FormatDescriptionEvent,
    RowsEvent,
    TableMapEvent,
    UnknownEvent,
)
from changestream.decoding.gtid_tagged import decode_gtid_tagged
from changestream.decoding.row_values import UnsupportedColumnType, value_reader
from changestream.decoding.rows import RowImageDecoder, RowsFormatError
from changestream.decoding.table_map import TableMapFormatError, identity_start, parse_table_map
from changestream.decoding.table_schema import TableSchema
from changestream.model.errors import (
    BinlogError,
    ChecksumMismatchError,
    TruncatedBinlogError,
    UnsupportedBinlogError,
)

__all__ = [
    "CHECKSUM_CRC32",
    "CHECKSUM_OFF",
    "HEADER",
    "HEADER_SIZE",
    "EventDecoder",
    "SchemaResolver",
    "mariadb_uncompress",
    "server_has_checksums",
]

_HEADER = HEADER.unpack_from
_crc32 = zlib.crc32
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from

# A schema resolver lets the ColumnInfo layer add what the TABLE_MAP did not log (the
# header: where the TABLE_MAP was read; ``None`` from a decode worker's compiled walk).
SchemaResolver = Callable[[TableSchema, EventHeader | None], TableSchema]


class EventDecoder:
    """Decodes events one at a time, keeping the state decoding needs between them: the
    format description (checksums, post-header lengths) and the table maps.

    ``checksum_alg`` is given for a live stream (the server's ``binlog_checksum``), whose
    first event arrives before any FORMAT_DESCRIPTION; for files it is learned from the FDE.
    ``table_filter(database, table)`` false: the table's rows events are not decoded (their
    RowsEvent has no rows), so a table nobody reads cannot stop the stream.
    """

    def __init__(
        self,
        *,
        verify_checksums: bool = True,
        checksum_alg: int | None = None,
        schema_resolver: SchemaResolver | None = None,
        table_cache_size: int = 4096,
        skipped_types: frozenset[int] = frozenset(),
        table_filter: Callable[[str, str], bool] | None = None,
    ):
        self.verify_checksums = verify_checksums
        self.table_filter = table_filter
        self.checksum_alg = checksum_alg
        self.schema_resolver = schema_resolver
        self.format_description: FormatDescriptionEvent | None = None
        self.tables: dict[int, TableMapEvent] = {}
        # Per table id and per TABLE_MAP bytes: [schema, its row decoder once one is needed,
        # whether the schema was resolved (tables the filter leaves out never are)].
        self._row_decoders: dict[int, list[Any]] = {}
        self._decoders: OrderedDict[bytes, list[Any]] = OrderedDict()
        self._table_cache_size = table_cache_size
        # Counts the times cached TABLE_MAP schemas were dropped or replaced: what keeps its
        # own cache of them (the segmenter, a worker's compiled walk) drops it on a change.
        self.table_maps_epoch = 0
        self._post_header = dict(DEFAULT_POST_HEADER)
        self._zstd = zstandard.ZstdDecompressor()
        self._dispatch: dict[int, Callable[[EventHeader, bytes], Event]] = {
            et.FORMAT_DESCRIPTION: self._format_description,
            et.ROTATE: self._rotate,
            et.QUERY: self._query,
            et.MARIADB_QUERY_COMPRESSED: self._query,
            et.XID: se.decode_xid,
            et.XA_PREPARE: se.decode_xa_prepare,
            et.GTID: ge.decode_gtid,
            et.ANONYMOUS_GTID: ge.decode_gtid,
            et.GTID_TAGGED: decode_gtid_tagged,
            et.PREVIOUS_GTIDS: ge.decode_previous_gtids_event,
            et.TABLE_MAP: self._table_map,
            et.ROWS_QUERY: se.decode_rows_query,
            et.MARIADB_ANNOTATE_ROWS: se.decode_annotate_rows,
            et.MARIADB_GTID: ge.decode_mariadb_gtid,
            et.MARIADB_GTID_LIST: ge.decode_mariadb_gtid_list,
            et.MARIADB_BINLOG_CHECKPOINT: ce.decode_binlog_checkpoint,
            et.TRANSACTION_PAYLOAD: self._transaction_payload,
            et.INCIDENT: ce.decode_incident,
            et.HEARTBEAT: ce.decode_heartbeat,
            et.HEARTBEAT_V2: ce.decode_plain,
            et.USER_VAR: se.decode_user_var,
            et.MARIADB_START_ENCRYPTION: ce.refuse_start_encryption,
            et.START_V3: ce.refuse_start_v3,
        }
        for code in et.ROWS_KINDS:
            self._dispatch[code] = self._rows
        # Types whose bodies nobody reads here (checksums are still verified).
        for code in skipped_types:
            self._dispatch[code] = ce.decode_plain
        for code in (et.STOP, et.INTVAR, et.RAND, et.TRANSACTION_CONTEXT, et.VIEW_CHANGE,
                     et.BEGIN_LOAD_QUERY, et.EXECUTE_LOAD_QUERY, et.APPEND_BLOCK, et.DELETE_FILE,
                     et.IGNORABLE, et.SLAVE):
            self._dispatch[code] = ce.decode_plain

    def post_header_length(self, type_code: int) -> int:
        """The post-header length of ``type_code`` events, as the FORMAT_DESCRIPTION says."""
        return self._post_header.get(type_code, DEFAULT_POST_HEADER.get(type_code, 0))

    def forget_table_maps(self) -> None:
        """Drop the cached TABLE_MAP schemas (after DDL: the same TABLE_MAP bytes may now
        stand for other column names), so the next ones are resolved again."""
        self._decoders.clear()
        self.table_maps_epoch += 1

    def preset_table_map(self, key: bytes, schema: TableSchema) -> bool:
        """Take ``schema`` as resolved for the TABLE_MAPs whose bytes but for the table id
        are ``key`` (a decode worker's decoder: the router resolved it); whether that changed
        what was cached."""
        cached = self._decoders.get(key)
        if cached is not None and cached[2] and cached[0] == schema:
            return False
        self._decoders[key] = [schema, None, True]
        if len(self._decoders) > self._table_cache_size:
            self._decoders.popitem(last=False)
        self.table_maps_epoch += 1
        return True

    # -- entry point -------------------------------------------------------------------

    def decode(self, data: bytes, file: str | None, offset: int,
               payload_index: int | None = None) -> Event:
        """Decode the complete event in ``data`` (header, body and any checksum)."""
        n = len(data)
        if n < HEADER_SIZE:
            raise TruncatedBinlogError(
                f"event header needs {HEADER_SIZE} bytes, {n} left", file, offset)
        timestamp, type_code, server_id, size, log_pos, flags = _HEADER(data, 0)
        if size != n:
            raise BinlogError(f"event size field says {size} bytes, got {n}", file, offset)
        header = EventHeader(timestamp, type_code, server_id, size, log_pos, flags, file,
                             offset, payload_index)
        body_end = size
        if type_code == et.FORMAT_DESCRIPTION:
            body_end = self._checksum_end_of_fde(data, header)
        elif self.checksum_alg == CHECKSUM_CRC32 and payload_index is None:
            body_end = size - 4
            if self.verify_checksums:
                expected = _U32(data, body_end)[0]
                # Small events are quicker to copy than to view.
                actual = _crc32(data[:body_end] if size < 4096 else memoryview(data)[:body_end])
                if expected != actual:
                    raise ChecksumMismatchError(
                        f"checksum mismatch in {header.type_name} event: stored "
                        f"0x{expected:08x}, computed 0x{actual:08x}", file, offset)
        handler = self._dispatch.get(type_code)
        if handler is None:
            if flags & et.LOG_EVENT_IGNORABLE_F:
                return UnknownEvent(header, bytes(data[HEADER_SIZE:body_end]))
            raise BinlogError(
                f"unknown event type {type_code} (not flagged ignorable), size {size}",
                file, offset)
        body = data[HEADER_SIZE:body_end]
        try:
            return handler(header, body)
        except BinlogError:
            raise
        except (LookupError, struct.error, ValueError, ArithmeticError, zlib.error,
                zstandard.ZstdError) as exc:
            raise BinlogError(f"corrupt {header.type_name} event: {exc}", file,
                              offset) from None

    def _checksum_end_of_fde(self, data: bytes, header: EventHeader) -> int:
        version = bytes(data[HEADER_SIZE + 2:HEADER_SIZE + 52]).split(b"\0", 1)[0]
        if not server_has_checksums(version.decode("ascii", "replace")):
            self.checksum_alg = None
            return header.size
        alg = data[header.size - 5]
        self.checksum_alg = alg
        if alg == CHECKSUM_CRC32 and self.verify_checksums:
            expected = _U32(data, header.size - 4)[0]
            # The server computes it with LOG_EVENT_BINLOG_IN_USE_F clear, sets the flag while
            # the file is open and clears it on close.
            signed = bytearray(data[:header.size - 4])
            signed[17] &= ~0x01
            actual = zlib.crc32(signed)
            if expected != actual:
                raise ChecksumMismatchError(
                    f"checksum mismatch in FORMAT_DESCRIPTION event: stored 0x{expected:08x}, "
                    f"computed 0x{actual:08x}", header.file, header.offset)
        return header.size - 5

    # -- format and positions ---------------------------------------------------------------

    def _format_description(self, h: EventHeader, body: bytes) -> Event:
        binlog_version = _U16(body, 0)[0]
        server_version = bytes(body[2:52]).split(b"\0", 1)[0].decode("ascii", "replace")
        if binlog_version < 4:
            raise UnsupportedBinlogError(
                f"binlog format v{binlog_version} (server {server_version}) is not supported; "
                "changestream reads binlog v4 (MySQL 5.0 and later, MariaDB)", h.file, h.offset)
        create_ts = _U32(body, 52)[0]
        header_length = body[56]
        post = bytes(body[57:])
        self._post_header = dict(DEFAULT_POST_HEADER)
        for i, n in enumerate(post):
            self._post_header[i + 1] = n
        event = FormatDescriptionEvent(h, binlog_version, server_version, create_ts,
                                       header_length, post, self.checksum_alg)
        self.format_description = event
        # A new FDE begins a new binlog (or a restarted server): table ids start over.
        self.tables.clear()
        self._row_decoders.clear()
        return event

    def _rotate(self, h: EventHeader, body: bytes) -> Event:
        return ce.decode_rotate(h, body, self._post_header.get(et.ROTATE, 8))

    # -- statements ---------------------------------------------------------------------------

    def _query(self, h: EventHeader, body: bytes) -> Event:
        return se.decode_query(h, body, self._post_header.get(et.QUERY, 13))

    # -- tables and rows ----------------------------------------------------------------------

    def _table_map(self, h: EventHeader, body: bytes) -> Event:
        try:
            table_id, flags, schema = self.register_table_map(body, h)
        except TableMapFormatError as exc:
            raise BinlogError(str(exc), h.file, h.offset) from None
        event = TableMapEvent(h, table_id, flags, schema)
        self.tables[table_id] = event
        return event

    def register_table_map(self, body: bytes, header: EventHeader | None = None
                           ) -> tuple[int, int, TableSchema]:
        """Read a TABLE_MAP body (without header and checksum) and make its table id known
        to the rows events after it: ``(table_id, flags, schema)``. Schemas and their row
        decoders are cached by the body's bytes but for the table id. Raises
        :class:`TableMapFormatError` on a malformed body. ``header``: where the event was
        read, for the schema resolver."""
        post = self._post_header.get(et.TABLE_MAP, 8)
        key = bytes(body[identity_start(post):])
        cached = self._decoders.get(key)
        if post == 6:
            table_id = _U32(body, 0)[0]
        else:
            table_id = int.from_bytes(body[0:6], "little")
        if cached is None:
            fde = self.format_description
            schema = parse_table_map(body, post, fde is not None and fde.is_mariadb)[2]
            cached = [schema, None, False]
            self._decoders[key] = cached
            if len(self._decoders) > self._table_cache_size:
                self._decoders.popitem(last=False)
        else:
            self._decoders.move_to_end(key)
        if not cached[2] and self._wanted(cached[0]):
            # Only a table whose rows are read is resolved: the names of a table the filter
            # leaves out may be known nowhere (the history keeps only the tables it reaches).
            if self.schema_resolver is not None:
                cached[0] = self.schema_resolver(cached[0], header)
            cached[1], cached[2] = None, True
        self._row_decoders[table_id] = cached
        return table_id, _U16(body, post - 2)[0], cached[0]

    def _wanted(self, schema: TableSchema) -> bool:
        """Whether the rows of ``schema``'s table are read (the table filter lets it in)."""
        return self.table_filter is None or self.table_filter(schema.database, schema.table)

    def rows_header(self, type_code: int, body: bytes) -> tuple[int, int, int]:
        """``(table_id, flags, offset of the column count)`` of a rows event body."""
        version = et.ROWS_KINDS[type_code][1]
        post = self.rows_post_header(type_code)
        if post == 6:
            table_id, pos = _U32(body, 0)[0], 4
        else:
            table_id, pos = int.from_bytes(body[0:6], "little"), 6
        flags = _U16(body, pos)[0]
        pos = post
        if version == 2:
            extra_len = _U16(body, post - 2)[0]
            pos = post + max(0, extra_len - 2)
        return table_id, flags, pos

    def rows_post_header(self, type_code: int) -> int:
        """The post-header length of rows events of ``type_code``."""
        return self._post_header.get(type_code,
                                     10 if et.ROWS_KINDS[type_code][1] == 2 else 8)

    def row_decoder(self, table_id: int) -> RowImageDecoder | None:
        """The row decoder of the table the last TABLE_MAP with ``table_id`` described,
        made when first asked for (it needs a codec for every column)."""
        entry = self._row_decoders.get(table_id)
        if entry is None:
            return None
        if entry[1] is None:
            entry[1] = RowImageDecoder(entry[0])
        return entry[1]

    def _rows(self, h: EventHeader, body: bytes) -> Event:
        kind, _, compressed = et.ROWS_KINDS[h.type_code]
        table_id, flags, pos = self.rows_header(h.type_code, body)
        entry = self._row_decoders.get(table_id)
        if entry is None:
            raise BinlogError(f"{h.type_name} event for table id {table_id}, which no "
                              "TABLE_MAP event before it described", h.file, h.offset)
        schema = entry[0]
        partial = h.type_code == et.PARTIAL_UPDATE_ROWS
        if not self._wanted(schema):
            return RowsEvent(h, kind, table_id, flags, schema, (), None, [], partial,
                             compressed)
        try:
            decoder = self.row_decoder(table_id)
        except (UnknownCollationError, UnsupportedColumnType) as exc:
            raise UnsupportedBinlogError(f"cannot decode rows of {_column_of(schema)}: {exc}",
                                         h.file, h.offset) from None
        assert decoder is not None
        if compressed:
            body = uncompress_rows(body, pos, kind)
        try:
            decoded = decoder.decode_body(body, pos, kind, h.type_code == et.PARTIAL_UPDATE_ROWS)
        except RowsFormatError as exc:
            raise BinlogError(str(exc) + _old_temporal_hint(decoder.schema, self),
                              h.file, h.offset) from None
        return RowsEvent(h, kind, table_id, flags, decoder.schema, decoded.present,
                         decoded.present_after, decoded.rows,
                         h.type_code == et.PARTIAL_UPDATE_ROWS, compressed)

    # -- compression --------------------------------------------------------------------------

    def _transaction_payload(self, h: EventHeader, body: bytes) -> Event:
        return decode_transaction_payload(h, body, self._zstd, self.decode)


def _column_of(schema: TableSchema) -> str:
    """The table and the first column no value reader can be made for."""
    for column in schema.columns:
        try:
            value_reader(column)
        except (UnknownCollationError, UnsupportedColumnType):
            return f"{schema.qualified_name} column {column.display_name}"
    return schema.qualified_name


def _old_temporal_hint(schema: TableSchema, decoder: EventDecoder) -> str:
    """Why a row may not fit: MariaDB 5.3-10.0 logs TIMESTAMP(n)/DATETIME(n)/TIME(n) in its
    own microsecond format under the old type codes, with no metadata giving the precision."""
    fde = decoder.format_description
    old = [c.display_name for c in schema.columns
           if c.type_code in (ft.TIMESTAMP, ft.DATETIME, ft.TIME)]
    if old and fde is not None and fde.is_mariadb:
        return (f"; columns {', '.join(old)} use MariaDB 5.3-10.0 temporal types, whose "
                "fractional-second precision the binlog does not record: unsupported")
    return ""
