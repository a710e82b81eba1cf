"""TABLE_MAP event bodies: column types, their metadata and the optional metadata block."""

from __future__ import annotations

from typing import Any

from changestream.decoding import field_types as ft
from changestream.decoding.packed import read_packed_int
from changestream.decoding.table_schema import Column, TableSchema

# Optional metadata field types (MySQL 8.0.1+, MariaDB 10.5+).
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12


class TableMapFormatError(ValueError):
    """The TABLE_MAP body does not follow the format."""



def identity_start(post_header: int) -> int:
    """Where, in a TABLE_MAP body, the bytes that say which table and columns it maps
    begin: everything after the table id (which a server may change for the same table).
    Table maps are cached by these bytes (the decoder's schemas, the segmenter's and the
    decode workers' caches)."""
    return post_header - 2

def _column_shape(type_code: int, meta: bytes, pos: int) -> tuple[dict[str, int], int]:
    """Read one column's type metadata; return its fields and the new offset."""
    if type_code in (ft.FLOAT, ft.DOUBLE, ft.BLOB, ft.GEOMETRY, ft.JSON, ft.VECTOR,
                     ft.TINY_BLOB, ft.MEDIUM_BLOB, ft.LONG_BLOB):
        n = meta[pos]
        return {"metadata": n, "length_bytes": n}, pos + 1
    if type_code in (ft.TIMESTAMP2, ft.DATETIME2, ft.TIME2):
        return {"metadata": meta[pos], "fsp": meta[pos]}, pos + 1
    if type_code in (ft.VARCHAR, ft.VAR_STRING):
        n = meta[pos] | (meta[pos + 1] << 8)
        return {"metadata": n, "max_length": n}, pos + 2
    if type_code == ft.NEWDECIMAL:
        return {"metadata": (meta[pos] << 8) | meta[pos + 1], "precision": meta[pos],
                "scale": meta[pos + 1]}, pos + 2
    if type_code == ft.BIT:
        bits, nbytes = meta[pos], meta[pos + 1]
        if bits > 7 or nbytes * 8 + bits > 64:
            raise TableMapFormatError(f"BIT column of {nbytes} bytes and {bits} bits "
                                      "(BIT holds at most 64)")
        return {"metadata": (nbytes << 8) | bits, "bits": nbytes * 8 + bits}, pos + 2
    if type_code in (ft.STRING, ft.ENUM, ft.SET):
        b0, b1 = meta[pos], meta[pos + 1]
        if b0 in (ft.ENUM, ft.SET):
            return {"type_code": b0, "metadata": (b0 << 8) | b1, "length_bytes": b1}, pos + 2
        # CHAR longer than 255 bytes keeps two high length bits in the type byte.
        real = b0 | 0x30
        length = b1 | (((b0 & 0x30) ^ 0x30) << 4)
        return {"type_code": real, "metadata": (b0 << 8) | b1, "max_length": length}, pos + 2
    return {}, pos


def _bits_msb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _read_str_list(data: bytes, pos: int, end: int) -> tuple[list[str], int]:
    count, pos = read_packed_int(data, pos)
    values = []
    for _ in range(count):
        n, pos = read_packed_int(data, pos)
        values.append(bytes(data[pos:pos + n]).decode("utf-8", "replace"))
        pos += n
    return values, pos


def _charsets(data: bytes, start: int, end: int, count: int, default_form: bool) -> list[int]:
    """Collations for ``count`` columns from a DEFAULT_CHARSET or COLUMN_CHARSET field."""
    if not default_form:
        out = []
        pos = start
        while pos < end:
            v, pos = read_packed_int(data, pos)
            out.append(v)
        return out
    default, pos = read_packed_int(data, start)
    out = [default] * count
    while pos < end:
        idx, pos = read_packed_int(data, pos)
        coll, pos = read_packed_int(data, pos)
        if idx < count:
            out[idx] = coll
    return out


def parse_table_map(body: bytes, post_header_len: int,
                    mariadb: bool = False) -> tuple[int, int, TableSchema]:
    """Parse a TABLE_MAP body (after the common header, before any checksum); ``mariadb``:
    written by MariaDB, which lists GEOMETRY columns among those with a character set.

    Returns ``(table_id, flags, schema)``.
    """
    try:
        if post_header_len == 6:
            table_id = int.from_bytes(body[0:4], "little")
            flags = int.from_bytes(body[4:6], "little")
        else:
            table_id = int.from_bytes(body[0:6], "little")
            flags = int.from_bytes(body[6:8], "little")
        pos = post_header_len
        n = body[pos]
        database = bytes(body[pos + 1:pos + 1 + n]).decode("utf-8", "replace")
        pos += n + 2
        n = body[pos]
        table = bytes(body[pos + 1:pos + 1 + n]).decode("utf-8", "replace")
        pos += n + 2
        ncols, pos = read_packed_int(body, pos)
        types = bytes(body[pos:pos + ncols])
        pos += ncols
        meta_len, pos = read_packed_int(body, pos)
        meta_end = pos + meta_len
        shapes = []
        for t in types:
            shape, pos = _column_shape(t, body, pos)
            shapes.append(shape)
        if pos != meta_end:
            raise TableMapFormatError(
                f"column metadata of {database}.{table} is {meta_len} bytes, "
                f"read {pos - meta_end + meta_len}"
            )
        nullable = _bits_lsb_first(body[pos:pos + (ncols + 7) // 8], ncols)
        pos += (ncols + 7) // 8
        optional = _parse_optional(body, pos, len(body))
    except (IndexError, ValueError) as exc:
        if isinstance(exc, TableMapFormatError):
            raise
        raise TableMapFormatError(f"malformed TABLE_MAP: {exc}") from None
    return table_id, flags, _build_schema(database, table, types, shapes, nullable, body, optional,
                                          mariadb)


def _bits_lsb_first(data: bytes, count: int) -> list[bool]:
    return [bool(data[i >> 3] & (1 << (i & 7))) for i in range(count)]


def _parse_optional(body: bytes, pos: int, end: int) -> dict[int, tuple[int, int]]:
    fields: dict[int, tuple[int, int]] = {}
    while pos < end:
        kind = body[pos]
        length, pos = read_packed_int(body, pos + 1)
        fields[kind] = (pos, pos + length)
        pos += length
    return fields


def _build_schema(
    database: str,
    table: str,
    types: bytes,
    shapes: list[dict[str, int]],
    nullable: list[bool],
    body: bytes,
    optional: dict[int, tuple[int, int]],
    mariadb: bool,
) -> TableSchema:
    ncols = len(types)
    real_types = [shape.get("type_code", t) for t, shape in zip(types, shapes, strict=True)]
    numeric = [i for i, t in enumerate(real_types) if t in ft.SIGNEDNESS_TYPES]
    # MariaDB gives GEOMETRY columns a (binary) charset entry; MySQL gives them none, but
    # gives its VECTOR columns one.
    charset_types = ft.CHARACTER_TYPES | ({ft.GEOMETRY} if mariadb else {ft.VECTOR})
    character = [i for i, t in enumerate(real_types) if t in charset_types]
    enum_set = [i for i, t in enumerate(real_types) if t in ft.ENUM_SET_TYPES]
    enums = [i for i, t in enumerate(real_types) if t == ft.ENUM]
    sets = [i for i, t in enumerate(real_types) if t == ft.SET]
    geometries = [i for i, t in enumerate(real_types) if t == ft.GEOMETRY]
    extra: list[dict[str, object]] = [{} for _ in range(ncols)]

    if SIGNEDNESS in optional:
        start, _ = optional[SIGNEDNESS]
        for i, flag in zip(numeric, _bits_msb_first(body[start:], len(numeric)), strict=True):
            if real_types[i] != ft.YEAR:  # YEAR takes a bit but is neither signed nor not
                extra[i]["unsigned"] = flag
    for kind, targets in ((DEFAULT_CHARSET, character), (COLUMN_CHARSET, character),
                          (ENUM_AND_SET_DEFAULT_CHARSET, enum_set),
                          (ENUM_AND_SET_COLUMN_CHARSET, enum_set)):
        if kind in optional:
            start, end = optional[kind]
            default_form = kind in (DEFAULT_CHARSET, ENUM_AND_SET_DEFAULT_CHARSET)
            for i, coll in zip(targets, _charsets(body, start, end, len(targets), default_form),
                               strict=False):
                if real_types[i] not in (ft.GEOMETRY, ft.VECTOR):
                    extra[i]["collation"] = coll
    if COLUMN_NAME in optional:
        pos, end = optional[COLUMN_NAME]
        for i in range(ncols):
            n, pos = read_packed_int(body, pos)
            extra[i]["name"] = bytes(body[pos:pos + n]).decode("utf-8", "replace")
            pos += n
    for kind, targets, key in ((ENUM_STR_VALUE, enums, "enum_values"),
                               (SET_STR_VALUE, sets, "set_values")):
        if kind in optional:
            pos, end = optional[kind]
            for i in targets:
                values, pos = _read_str_list(body, pos, end)
                extra[i][key] = tuple(values)
    if GEOMETRY_TYPE in optional:
        pos, _ = optional[GEOMETRY_TYPE]
        for i in geometries:
            extra[i]["geometry_type"], pos = read_packed_int(body, pos)
    primary_key: tuple[int, ...] | None = None
    if SIMPLE_PRIMARY_KEY in optional:
        pos, end = optional[SIMPLE_PRIMARY_KEY]
        key_columns: list[int] = []
        while pos < end:
            idx, pos = read_packed_int(body, pos)
            key_columns.append(idx)
        primary_key = tuple(key_columns)
    elif PRIMARY_KEY_WITH_PREFIX in optional:
        pos, end = optional[PRIMARY_KEY_WITH_PREFIX]
        key_columns = []
        while pos < end:
            idx, pos = read_packed_int(body, pos)
            _prefix, pos = read_packed_int(body, pos)
            key_columns.append(idx)
        primary_key = tuple(key_columns)
    if primary_key and max(primary_key) >= ncols:
        raise TableMapFormatError(f"primary key of {database}.{table} names column "
                                  f"{max(primary_key)} of {ncols}")
    if COLUMN_VISIBILITY in optional:
        start, _ = optional[COLUMN_VISIBILITY]
        for i, flag in enumerate(_bits_msb_first(body[start:], ncols)):
            extra[i]["visible"] = flag

    columns = []
    for i in range(ncols):
        fields: dict[str, Any] = dict(shapes[i])
        fields.setdefault("type_code", types[i])
        fields.update(extra[i])
        columns.append(Column(index=i, nullable=nullable[i], **fields))
    return TableSchema(
        database=database,
        table=table,
        columns=tuple(columns),
        primary_key=primary_key,
        names_logged=COLUMN_NAME in optional,
        signedness_logged=SIGNEDNESS in optional or not numeric,
        charsets_logged=(DEFAULT_CHARSET in optional or COLUMN_CHARSET in optional
                         or not character),
    )
