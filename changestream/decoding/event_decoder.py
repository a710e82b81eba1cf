"""From the bytes of one event to a decoded ``Event``: the single decoding path that the file
source and the live source share."""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import zstandard

from changestream.decoding import event_types as et
from changestream.decoding import field_types as ft
from changestream.decoding.charsets import UnknownCollationError
from changestream.decoding.events import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    BinlogCheckpointEvent,
    Event,
    EventHeader,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    IncidentEvent,
    MariadbGtidEvent,
    MariadbGtidListEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    RowsQueryEvent,
    TableMapEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    UserVarEvent,
    XaId,
    XaPrepareEvent,
    XidEvent,
)
from changestream.decoding.gtid_tagged import decode_gtid_tagged, decode_previous_gtids
from changestream.decoding.packed import read_packed_int
from changestream.decoding.query_status import query_charset
from changestream.decoding.row_values import UnsupportedColumnType, value_reader
from changestream.decoding.rows import RowImageDecoder, RowsFormatError
from changestream.decoding.table_map import TableMapFormatError, parse_table_map
from changestream.decoding.table_schema import TableSchema
from changestream.model.errors import (
    BinlogError,
    ChecksumMismatchError,
    TruncatedBinlogError,
    UnsupportedBinlogError,
)

HEADER = struct.Struct("<IBIIIH")
_HEADER = HEADER.unpack_from
_crc32 = zlib.crc32
HEADER_SIZE = 19
CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_I64 = struct.Struct("<q").unpack_from

# Post-header lengths assumed until a FORMAT_DESCRIPTION event says otherwise (MySQL 5.0+).
_DEFAULT_POST_HEADER = {et.QUERY: 13, et.ROTATE: 8, et.TABLE_MAP: 8, et.WRITE_ROWS_V1: 8,
                        et.UPDATE_ROWS_V1: 8, et.DELETE_ROWS_V1: 8, et.WRITE_ROWS: 10,
                        et.UPDATE_ROWS: 10, et.DELETE_ROWS: 10, et.PARTIAL_UPDATE_ROWS: 10}

# A schema resolver lets the ColumnInfo layer add what the TABLE_MAP did not log.
SchemaResolver = Callable[[TableSchema, EventHeader], TableSchema]


def _version_tuple(version: str) -> tuple[int, int, int]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (0, 0, 0)


def server_has_checksums(version: str) -> bool:
    """Whether a server of this version writes the checksum algorithm into its FDE."""
    split = (5, 3, 0) if "mariadb" in version.lower() else (5, 6, 1)
    return _version_tuple(version) >= split


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
        # Per table id and per TABLE_MAP bytes: [schema, its row decoder once one is needed].
        self._row_decoders: dict[int, list[Any]] = {}
        self._decoders: OrderedDict[bytes, list[Any]] = OrderedDict()
        self._table_cache_size = table_cache_size
        self._post_header = dict(_DEFAULT_POST_HEADER)
        self._zstd = zstandard.ZstdDecompressor()
        self._dispatch: dict[int, Callable[[EventHeader, bytes], Event]] = {
            et.FORMAT_DESCRIPTION: self._format_description,
            et.ROTATE: self._rotate,
            et.QUERY: self._query,
            et.MARIADB_QUERY_COMPRESSED: self._query,
            et.XID: self._xid,
            et.XA_PREPARE: self._xa_prepare,
            et.GTID: self._gtid,
            et.ANONYMOUS_GTID: self._gtid,
            et.GTID_TAGGED: self._gtid_tagged,
            et.PREVIOUS_GTIDS: self._previous_gtids,
            et.TABLE_MAP: self._table_map,
            et.ROWS_QUERY: self._rows_query,
            et.MARIADB_ANNOTATE_ROWS: self._annotate_rows,
            et.MARIADB_GTID: self._mariadb_gtid,
            et.MARIADB_GTID_LIST: self._mariadb_gtid_list,
            et.MARIADB_BINLOG_CHECKPOINT: self._binlog_checkpoint,
            et.TRANSACTION_PAYLOAD: self._transaction_payload,
            et.INCIDENT: self._incident,
            et.HEARTBEAT: self._heartbeat,
            et.HEARTBEAT_V2: self._plain,
            et.USER_VAR: self._user_var,
            et.MARIADB_START_ENCRYPTION: self._start_encryption,
            et.START_V3: self._start_v3,
        }
        for code in et.ROWS_KINDS:
            self._dispatch[code] = self._rows
        # Types whose bodies nobody reads here (checksums are still verified).
        for code in skipped_types:
            self._dispatch[code] = self._plain
        for code in (et.STOP, et.INTVAR, et.RAND, et.TRANSACTION_CONTEXT, et.VIEW_CHANGE,
                     et.BEGIN_LOAD_QUERY, et.EXECUTE_LOAD_QUERY, et.APPEND_BLOCK, et.DELETE_FILE,
                     et.IGNORABLE, et.SLAVE):
            self._dispatch[code] = self._plain

    def post_header_length(self, type_code: int) -> int:
        """The post-header length of ``type_code`` events, as the FORMAT_DESCRIPTION says."""
        return self._post_header.get(type_code, _DEFAULT_POST_HEADER.get(type_code, 0))

    def forget_table_maps(self) -> None:
        """Drop the cached TABLE_MAP schemas (after DDL: the same TABLE_MAP bytes may now
        stand for other column names), so the next ones are resolved again."""
        self._decoders.clear()

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
        self._post_header = dict(_DEFAULT_POST_HEADER)
        for i, n in enumerate(post):
            self._post_header[i + 1] = n
        event = FormatDescriptionEvent(h, binlog_version, server_version, create_ts,
                                       header_length, post, self.checksum_alg)
        self.format_description = event
        # A new FDE begins a new binlog (or a restarted server): table ids start over.
        self.tables.clear()
        self._row_decoders.clear()
        return event

    def _start_v3(self, h: EventHeader, body: bytes) -> Event:
        version = bytes(body[2:52]).split(b"\0", 1)[0].decode("ascii", "replace")
        raise UnsupportedBinlogError(
            f"binlog format v3 (START_EVENT_V3, server {version}) is not supported; "
            "changestream reads binlog v4 (MySQL 5.0 and later, MariaDB)", h.file, h.offset)

    def _start_encryption(self, h: EventHeader, body: bytes) -> Event:
        raise UnsupportedBinlogError(
            "encrypted binlog (START_ENCRYPTION event): the events after it cannot be read "
            "without the server's key; read it live from the server instead", h.file, h.offset)

    def _rotate(self, h: EventHeader, body: bytes) -> Event:
        post = self._post_header.get(et.ROTATE, 8)
        position = _U64(body, 0)[0] if post >= 8 else 4
        return RotateEvent(h, position, bytes(body[post:]).decode("utf-8", "replace"))

    def _plain(self, h: EventHeader, body: bytes) -> Event:
        return Event(h)

    def _heartbeat(self, h: EventHeader, body: bytes) -> Event:
        return HeartbeatEvent(h, bytes(body).decode("utf-8", "replace"))

    def _incident(self, h: EventHeader, body: bytes) -> Event:
        incident = _U16(body, 0)[0]
        n = body[2] if len(body) > 2 else 0
        return IncidentEvent(h, incident, bytes(body[3:3 + n]).decode("utf-8", "replace"))

    def _user_var(self, h: EventHeader, body: bytes) -> Event:
        n = _U32(body, 0)[0]
        name = bytes(body[4:4 + n]).decode("utf-8", "replace")
        return UserVarEvent(h, name, bool(body[4 + n]))

    # -- statements and transaction ends ----------------------------------------------------

    def _query(self, h: EventHeader, body: bytes) -> Event:
        post = self._post_header.get(et.QUERY, 13)
        thread_id, exec_time = _U32(body, 0)[0], _U32(body, 4)[0]
        db_len = body[8]
        error_code = _U16(body, 9)[0]
        status_len = _U16(body, 11)[0] if post >= 13 else 0
        status = body[post:post + status_len]
        pos = post + status_len
        database = bytes(body[pos:pos + db_len]).decode("utf-8", "replace")
        pos += db_len + 1
        raw = bytes(body[pos:])
        compressed = h.type_code == et.MARIADB_QUERY_COMPRESSED
        if compressed:
            raw = mariadb_uncompress(raw)
        charset = query_charset(status)
        return QueryEvent(h, thread_id, exec_time, error_code, database,
                          raw.decode("utf-8", "replace"), charset, compressed, raw,
                          bytes(status))

    def _xid(self, h: EventHeader, body: bytes) -> Event:
        return XidEvent(h, _U64(body, 0)[0])

    def _xa_prepare(self, h: EventHeader, body: bytes) -> Event:
        one_phase = bool(body[0])
        format_id = struct.unpack_from("<i", body, 1)[0]
        gl, bl = _U32(body, 5)[0], _U32(body, 9)[0]
        data = bytes(body[13:13 + gl + bl])
        return XaPrepareEvent(h, one_phase, XaId(format_id, data[:gl], data[gl:]))

    # -- GTIDs --------------------------------------------------------------------------------

    def _gtid(self, h: EventHeader, body: bytes) -> Event:
        commit_flag = body[0]
        sid = uuid.UUID(bytes=bytes(body[1:17]))
        gno = _I64(body, 17)[0]
        event = GtidEvent(h, h.type_code == et.ANONYMOUS_GTID, commit_flag, sid, gno)
        pos, end = 25, len(body)
        if pos < end and body[pos] == 2:  # logical clock timestamps (5.7+)
            event.last_committed = _I64(body, 26)[0]
            event.sequence_number = _I64(body, 34)[0]
            pos = 42
        if pos + 7 <= end:  # commit timestamps (8.0.1+)
            ts = int.from_bytes(body[pos:pos + 7], "little")
            pos += 7
            event.immediate_commit_ts = ts & ~(1 << 55)
            if ts & (1 << 55):
                event.original_commit_ts = int.from_bytes(body[pos:pos + 7], "little")
                pos += 7
            else:
                event.original_commit_ts = event.immediate_commit_ts
            if pos < end:
                event.transaction_length, pos = read_packed_int(body, pos)
            if pos + 4 <= end:
                v = _U32(body, pos)[0]
                pos += 4
                event.immediate_server_version = v & 0x7FFFFFFF
                if v & 0x80000000:
                    event.original_server_version = _U32(body, pos)[0]
                    pos += 4
                else:
                    event.original_server_version = event.immediate_server_version
        return event

    def _gtid_tagged(self, h: EventHeader, body: bytes) -> Event:
        return decode_gtid_tagged(h, body)

    def _previous_gtids(self, h: EventHeader, body: bytes) -> Event:
        return PreviousGtidsEvent(h, decode_previous_gtids(body))

    def _mariadb_gtid(self, h: EventHeader, body: bytes) -> Event:
        seq_no = _U64(body, 0)[0]
        domain_id = _U32(body, 8)[0]
        flags2 = body[12]
        event = MariadbGtidEvent(h, domain_id, seq_no, flags2)
        pos = 13  # without a commit id, 6 zero bytes pad the fixed part to 19 bytes
        if flags2 & FL_GROUP_COMMIT_ID:
            event.commit_id = _U64(body, 13)[0]
            pos = 21
        if flags2 & (FL_PREPARED_XA | FL_COMPLETED_XA):
            format_id = struct.unpack_from("<i", body, pos)[0]
            gl, bl = body[pos + 4], body[pos + 5]
            data = bytes(body[pos + 6:pos + 6 + gl + bl])
            event.xid = XaId(format_id, data[:gl], data[gl:])
            pos += 6 + gl + bl
        if pos < len(body):
            event.flags_extra = body[pos]
        return event

    def _mariadb_gtid_list(self, h: EventHeader, body: bytes) -> Event:
        count = _U32(body, 0)[0] & 0x0FFFFFFF
        gtids = [
            (_U32(body, 4 + 16 * i)[0], _U32(body, 8 + 16 * i)[0], _U64(body, 12 + 16 * i)[0])
            for i in range(count)
        ]
        return MariadbGtidListEvent(h, gtids)

    def _binlog_checkpoint(self, h: EventHeader, body: bytes) -> Event:
        n = _U32(body, 0)[0]
        return BinlogCheckpointEvent(h, bytes(body[4:4 + n]).decode("utf-8", "replace"))

    # -- tables and rows ----------------------------------------------------------------------

    def _rows_query(self, h: EventHeader, body: bytes) -> Event:
        return RowsQueryEvent(h, bytes(body[1:]).decode("utf-8", "replace"))

    def _annotate_rows(self, h: EventHeader, body: bytes) -> Event:
        return RowsQueryEvent(h, bytes(body).decode("utf-8", "replace"))

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
        :class:`TableMapFormatError` on a malformed body. ``header`` (where the event was
        read) is needed when the decoder has a schema resolver."""
        post = self._post_header.get(et.TABLE_MAP, 8)
        key = bytes(body[post - 2:])  # everything but the table id, which the cache ignores
        cached = self._decoders.get(key)
        if post == 6:
            table_id = _U32(body, 0)[0]
        else:
            table_id = int.from_bytes(body[0:6], "little")
        if cached is None:
            fde = self.format_description
            schema = parse_table_map(body, post, fde is not None and fde.is_mariadb)[2]
            if self.schema_resolver is not None:
                assert header is not None, "a schema resolver needs the event's header"
                schema = self.schema_resolver(schema, header)
            cached = [schema, None]
            self._decoders[key] = cached
            if len(self._decoders) > self._table_cache_size:
                self._decoders.popitem(last=False)
        else:
            self._decoders.move_to_end(key)
        self._row_decoders[table_id] = cached
        return table_id, _U16(body, post - 2)[0], cached[0]

    def rows_header(self, type_code: int, body: bytes) -> tuple[int, int, int]:
        """``(table_id, flags, offset of the column count)`` of a rows event body."""
        version = et.ROWS_KINDS[type_code][1]
        post = self._post_header.get(type_code, 10 if version == 2 else 8)
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
        if self.table_filter is not None and not self.table_filter(schema.database,
                                                                   schema.table):
            return RowsEvent(h, kind, table_id, flags, schema, (), None, [], partial,
                             compressed)
        try:
            decoder = self.row_decoder(table_id)
        except (UnknownCollationError, UnsupportedColumnType) as exc:
            raise UnsupportedBinlogError(f"cannot decode rows of {_column_of(schema)}: {exc}",
                                         h.file, h.offset) from None
        assert decoder is not None
        if compressed:
            body = _uncompress_rows(body, pos, kind)
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
        pos, end = 0, len(body)
        fields: dict[int, int] = {}
        while pos < end:
            kind, pos = read_packed_int(body, pos)
            if kind == 0:
                break
            length, pos = read_packed_int(body, pos)
            fields[kind], _ = read_packed_int(body, pos)
            pos += length
        compression = {0: "zstd", 255: "none"}.get(fields.get(2, 0))
        if compression is None:
            raise UnsupportedBinlogError(
                f"TRANSACTION_PAYLOAD compressed with unknown algorithm {fields.get(2)}",
                h.file, h.offset)
        payload = bytes(body[pos:])
        size = fields.get(3, 0)
        if compression == "zstd":
            data = self._zstd.decompressobj().decompress(payload)
        else:
            data = payload
        if size and len(data) != size:
            raise BinlogError(f"TRANSACTION_PAYLOAD unpacked to {len(data)} bytes, its header "
                              f"says {size}", h.file, h.offset)
        event = TransactionPayloadEvent(h, compression, fields.get(1, len(payload)), len(data))
        inner_pos, index = 0, 0
        while inner_pos < len(data):
            if inner_pos + HEADER_SIZE > len(data):
                raise TruncatedBinlogError("TRANSACTION_PAYLOAD ends inside an inner event "
                                           "header", h.file, h.offset)
            inner_size = _U32(data, inner_pos + 9)[0]
            if inner_size < HEADER_SIZE or inner_pos + inner_size > len(data):
                raise TruncatedBinlogError(
                    f"TRANSACTION_PAYLOAD inner event {index} claims {inner_size} bytes, "
                    f"{len(data) - inner_pos} left", h.file, h.offset)
            event.events.append(self.decode(data[inner_pos:inner_pos + inner_size], h.file,
                                            h.offset, index))
            inner_pos += inner_size
            index += 1
        return event


def mariadb_uncompress(data: bytes) -> bytes:
    """Unpack a MariaDB compressed field: a header byte ``0x80 | algorithm << 4 | n``, ``n``
    big-endian bytes of the unpacked length, then zlib data."""
    head = data[0]
    if head & 0xE0 != 0x80:
        raise ValueError(f"bad MariaDB compression header byte 0x{head:02x}")
    if head & 0x70:
        raise ValueError(f"unknown MariaDB compression algorithm {(head >> 4) & 7}")
    n = head & 0x07
    size = int.from_bytes(data[1:1 + n], "big")
    out = zlib.decompress(data[1 + n:])
    if len(out) != size:
        raise ValueError(f"compressed field unpacked to {len(out)} bytes, header says {size}")
    return out


def _uncompress_rows(body: bytes, pos: int, kind: str) -> bytes:
    """A MariaDB compressed rows body with its rows part (after the bitmaps) unpacked."""
    ncols, p = read_packed_int(body, pos)
    p += ((ncols + 7) >> 3) * (2 if kind == "update" else 1)
    return bytes(body[:p]) + mariadb_uncompress(body[p:])


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
