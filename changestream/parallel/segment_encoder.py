"""A decode worker's fast path: plain DML transactions from a segment's bytes to records.

It makes none of the general path's event and change objects: it walks the segment's
bytes, reads TABLE_MAPs and row images with the decoder's parsers and generated row
readers, and writes each row's record once its transaction commits. It takes the common
case only (checksums that verify, rows events neither compressed nor partial JSON, images
of every column, no column filtered out, the changestream format); for anything else it
returns ``None`` and the worker runs the general path, which gives the records or the error."""

from __future__ import annotations

import datetime as dt
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from changestream.decoding import event_types as et
from changestream.decoding.event_decoder import CHECKSUM_CRC32, HEADER_SIZE, EventDecoder
from changestream.decoding.events import FormatDescriptionEvent
from changestream.decoding.rows import RowImageDecoder
from changestream.decoding.statements import BEGIN, COMMIT
from changestream.decoding.table_map import identity_start
from changestream.encoding.records import (
    JSON_OPTIONS,
    commit_time_text,
    json_default,
    row_record,
    shared_sql,
    transaction_fields,
)
from changestream.encoding.temporal_text import FormatCache
from changestream.model.gtid import mariadb_gtid
from changestream.native import compiled
from changestream.transactions.filters import ChangeFilter
from changestream.transactions.groups import (
    gtid_commit_time,
    transaction_id,
    utc_time,
)
from changestream.transactions.plain import (
    MYSQL_GTID_EVENTS,
    mariadb_group_is_plain,
    query_kind,
)
from changestream.transactions.row_changes import direct_images
from changestream.transactions.row_shapes import ShapeCache

_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_MARIADB_GTID = struct.Struct("<QIB").unpack_from  # seq_no, domain id, flags
_ANNOTATIONS = frozenset({et.ROWS_QUERY, et.MARIADB_ANNOTATE_ROWS})
_PLAIN_ROWS: dict[int, str] = {
    code: kind for code, (kind, version, compressed) in et.ROWS_KINDS.items()
    if version >= 1 and not compressed and code != et.PARTIAL_UPDATE_ROWS}


@dataclass(slots=True)
class EncodedTransaction:
    """A transaction a worker encoded: how many records it has (they follow those of the
    transaction before it), its GTID, its commit time, and where it ends in its file."""

    changes: int
    gtid: str | None
    commit_ts: dt.datetime | None
    end: int


class _NotPlain(Exception):
    """The segment needs the general path."""


# Stands for the row decoder of a table the filter leaves out: its rows are never decoded.
_EXCLUDED: Any = object()


class SegmentEncoder:
    """Encodes segments of plain transactions as the general path would (see the module
    docstring); shares ``decoder`` (format description, table maps) with that path."""

    def __init__(self, decoder: EventDecoder, change_filter: ChangeFilter | None,
                 include_sql: bool):
        self.decoder = decoder
        self.filter = None if change_filter is None or change_filter.everything \
            else change_filter
        self.include_sql = include_sql
        self._shapes = ShapeCache(self.filter)
        self._formats = FormatCache()
        self._table_maps: dict[bytes, RowImageDecoder | None] = {}
        self._format_description: FormatDescriptionEvent | None = None
        # The last segment's changes by (database, table, op), for the router's metrics.
        self.table_counts: dict[tuple[str, str, str], int] = {}

    def encode(self, file: str, data: bytes, offsets: Sequence[int], stamp: str,
               lines: list[bytes]) -> list[EncodedTransaction] | None:
        """The transactions of the events in ``data`` (read from ``file`` at ``offsets``),
        their records appended to ``lines``; ``None`` when the segment is not one this path
        takes (``lines`` may then hold some records: discard them)."""
        try:
            return self._encode(file, data, offsets, stamp, lines)
        # Anything wrong (an unknown collation too) is left to the general path, which
        # names the event.
        except (_NotPlain, LookupError, struct.error, ValueError, ArithmeticError):
            return None

    def _encode(self, file: str, data: bytes, offsets: Sequence[int], stamp: str,
                lines: list[bytes]) -> list[EncodedTransaction]:
        decoder = self.decoder
        crc = decoder.checksum_alg == CHECKSUM_CRC32
        verify = crc and decoder.verify_checksums
        tail = 4 if crc else 0
        view = memoryview(data)
        crc32 = zlib.crc32
        name = file.rsplit("/", 1)[-1]
        plain_rows = _PLAIN_ROWS
        table_filter = self.filter.table if self.filter is not None else None
        shape_of = self._shapes.shape
        formats_of = self._formats
        include_sql = self.include_sql
        if decoder.format_description is not self._format_description:
            self._format_description = decoder.format_description
            self._table_maps.clear()
        # TABLE_MAPs by their bytes but for the table id (the first 6 or 4 bytes of the
        # body), and this segment's table ids.
        table_maps = self._table_maps
        post = decoder.post_header_length(et.TABLE_MAP)
        short_ids = post == 6
        key_start = HEADER_SIZE + identity_start(post)
        query_post = decoder.post_header_length(et.QUERY)
        tables: dict[int, RowImageDecoder | None] = {}
        counts = self.table_counts = {}
        done: list[EncodedTransaction] = []
        changes: list[tuple[Any, ...]] = []
        inside = began = False  # in a transaction; after its BEGIN (MariaDB's have none)
        gtid: str | None = None
        server_id = start = 0
        commit_ts: dt.datetime | None = None
        sql: Any = None
        last_commit: dt.datetime | None = None
        commit_text: str | None = None
        at = 0
        for offset in offsets:
            size = _U32(data, at + 9)[0]
            end = at + size
            body_end = end - tail
            if verify and crc32(data[at:body_end] if size < 4096 else view[at:body_end]) \
                    != _U32(data, body_end)[0]:
                raise _NotPlain
            code = data[at + 4]
            kind = plain_rows.get(code)
            if kind is not None:
                if not inside:
                    raise _NotPlain
                body = data[at + HEADER_SIZE:body_end]
                table_id, _, pos = decoder.rows_header(code, body)
                rows_decoder = tables.get(table_id)
                if rows_decoder is None:
                    raise _NotPlain
                if rows_decoder is not _EXCLUDED:  # a filtered-out table's rows: not read
                    schema = rows_decoder.schema
                    decoded = rows_decoder.decode_body(body, pos, kind, False)
                    shape = shape_of(schema)
                    ncols = len(shape.names)
                    if not shape.direct or len(decoded.present) != ncols or (
                            decoded.present_after is not None
                            and len(decoded.present_after) != ncols):
                        raise _NotPlain
                    database, table, formats = schema.database, schema.table, \
                        formats_of(schema)
                    changes.extend([
                        (op, database, table, before, after, pk, sql, offset, i, formats)
                        for i, (op, before, after, pk) in enumerate(direct_images(
                            kind, shape.names, shape.direct_key, decoded.rows))])
                    counted = (schema.database, schema.table, kind)
                    counts[counted] = counts.get(counted, 0) + len(decoded.rows)
            elif code == et.TABLE_MAP:
                key = data[at + key_start:body_end]
                rows_decoder = table_maps.get(key)
                if rows_decoder is None:
                    table_id, _, schema = decoder.register_table_map(
                        data[at + HEADER_SIZE:body_end])
                    rows_decoder = table_maps[key] = _EXCLUDED if table_filter is not None \
                        and not table_filter(schema.database, schema.table) \
                        else decoder.row_decoder(table_id)
                    if len(table_maps) > 4096:
                        table_maps.clear()
                if short_ids:
                    tables[_U32(data, at + HEADER_SIZE)[0]] = rows_decoder
                else:
                    tables[int.from_bytes(data[at + HEADER_SIZE:at + HEADER_SIZE + 6],
                                          "little")] = rows_decoder
            elif code == et.MARIADB_GTID:
                seq_no, domain, flags = _MARIADB_GTID(data, at + HEADER_SIZE)
                if inside or not mariadb_group_is_plain(flags):
                    raise _NotPlain
                server_id = _U32(data, at + 5)[0]
                gtid = mariadb_gtid(domain, server_id, seq_no)
                inside, began, start, commit_ts, sql = True, True, offset, None, None
            elif code == et.XID or code == et.QUERY:
                xid = None
                if code == et.QUERY:
                    statement = query_kind(data[at:end], query_post, body_end - at)
                    if statement == BEGIN and inside and not began:
                        began = True
                        at = end
                        continue
                    if statement != COMMIT:
                        raise _NotPlain
                else:
                    xid = _U64(data, at + HEADER_SIZE)[0]
                if not inside:
                    raise _NotPlain
                if changes:
                    commit = commit_ts or utc_time(_U32(data, at)[0])
                    if commit is not last_commit:  # a busy second's commits share it
                        last_commit, commit_text = commit, commit_time_text(commit)
                    tid = transaction_id(gtid, server_id, name, start)
                    _encode_changes(lines, changes, tid, gtid, xid, commit_text, name, stamp)
                    done.append(EncodedTransaction(len(changes), gtid, commit, offset + size))
                    changes = []
                else:
                    done.append(EncodedTransaction(0, gtid, None, offset + size))
                inside = False
            elif code in MYSQL_GTID_EVENTS:
                if inside:
                    raise _NotPlain
                event: Any = decoder.decode(data[at:end], file, offset)
                gtid = event.gtid
                commit_ts = gtid_commit_time(event.original_commit_ts,
                                             event.immediate_commit_ts)
                server_id = event.header.server_id
                inside, began, start, sql = True, False, offset, None
            elif code in _ANNOTATIONS:
                if include_sql and inside:
                    annotation: Any = decoder.decode(data[at:end], file, offset)
                    sql = shared_sql(annotation.query)
            else:
                raise _NotPlain
            at = end
        if inside:
            raise _NotPlain
        return done


def segment_encoder(decoder: EventDecoder, change_filter: ChangeFilter | None,
                    include_sql: bool) -> Any:
    """The compiled encoder (:mod:`changestream.parallel._segment_rows`, the same records)
    where it was built and not turned off, else :class:`SegmentEncoder`."""
    module = compiled("changestream.parallel._segment_rows")
    encoder = SegmentEncoder if module is None else module.SegmentEncoder
    return encoder(decoder, change_filter, include_sql)


def _encode_changes(lines: list[bytes], changes: list[tuple[Any, ...]], tid: str,
                    gtid: str | None, xid: int | None, commit_ts: str | None, file: str,
                    stamp: str) -> None:
    """The records of one transaction's changes, appended to ``lines``."""
    dumps = orjson.dumps
    append = lines.append
    size = len(changes)
    last = size - 1
    for seq, (op, database, table, before, after, pk, sql, pos, row, formats) in \
            enumerate(changes):
        append(dumps(row_record(op, database, table, before, after, pk, sql,
                                transaction_fields(tid, gtid, xid, seq, size, seq == last,
                                                   commit_ts),
                                file, pos, row, stamp, formats),
                     default=json_default, option=JSON_OPTIONS))
