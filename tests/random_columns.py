"""Random column types and values with their edges, for the differential test.

Each :class:`Column` knows its definition, how to write a random value of it as an SQL
literal (type limits, zero dates, maximum fraction and DECIMAL digits, empty and
maximum-length strings, characters outside the BMP, many ENUM/SET labels), how to read it
back from the server in a comparable form (``select``) and how to put the server's value and
a change record's JSON value into one canonical form (``canon_server``, ``canon_record``),
following the documented JSON forms of docs/records.md.
"""

from __future__ import annotations

import base64
import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Characters each character set can hold (the random strings are drawn from these).
_ASCII = "abcxyzABC019 _-'\\\"%"
ALPHABETS = {
    "latin1": _ASCII + "éàüßÿ\u00d7",
    "utf8mb4": _ASCII + "éü€Жж中文😀𝄞🎉",
    "utf8mb3": _ASCII + "éü€Жж中文",
    "cp1251": _ASCII + "ЖжЯяё",
    "gbk": _ASCII + "中文汉字",
    "sjis": _ASCII + "日本語カナ",
    "ucs2": _ASCII + "éü€Жж中",
    "utf16": _ASCII + "éü€Ж中😀",
    "greek": _ASCII + "αβγΩ",
    "ascii": _ASCII,
}


JSON_NULL = "<the JSON document null>"


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _hex(data: bytes) -> str:
    return f"X'{data.hex()}'" if data else "''"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _float32(value: float) -> bytes:
    return struct.pack("<f", value)


@dataclass
class Column:
    """One column of a random table (see the module docstring)."""

    name: str
    definition: str
    value: Callable[[random.Random], str]
    select: str = "{c}"
    canon_server: Callable[[Any], Any] = lambda v: v
    canon_record: Callable[[Any], Any] = lambda v: v
    nullable: bool = True
    blob: bool = False  # left out of NOBLOB images
    generated: bool = False  # the server computes it: never written
    invisible: bool = False
    family: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def sql_value(self, rng: random.Random) -> str:
        """A random value (NULL one time in ten where the column allows it)."""
        if self.nullable and rng.random() < 0.1:
            return "NULL"
        return self.value(rng)


def _int_column(name: str, rng: random.Random) -> Column:
    kind, bits = rng.choice([("TINYINT", 8), ("SMALLINT", 16), ("MEDIUMINT", 24),
                             ("INT", 32), ("BIGINT", 64)])
    unsigned = rng.random() < 0.4
    lo, hi = (0, 2 ** bits - 1) if unsigned else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)

    def value(r: random.Random) -> str:
        return str(r.choice([lo, hi, 0, -1 if lo < 0 else 1, r.randint(lo, hi)]))
    return Column(name, f"{kind}{' UNSIGNED' if unsigned else ''}", value, family="int")


def _decimal_column(name: str, rng: random.Random) -> Column:
    precision = rng.choice([1, 5, 10, 18, 19, 38, 65])
    scale = rng.randint(0, min(precision, 30))
    unsigned = rng.random() < 0.2

    def value(r: random.Random) -> str:
        whole = precision - scale
        if r.random() < 0.3:
            digits = "9" * precision
        else:
            digits = "".join(r.choice("0123456789") for _ in range(precision))
        text = (digits[:whole] or "0") + ("." + digits[whole:] if scale else "")
        sign = "-" if not unsigned and r.random() < 0.5 else ""
        return sign + text if r.random() < 0.9 else "0"

    return Column(name, f"DECIMAL({precision},{scale}){' UNSIGNED' if unsigned else ''}",
                  value, select="CAST({c} AS CHAR)", family="decimal")


def _float_column(name: str, rng: random.Random) -> Column:
    if rng.random() < 0.5:
        def value(r: random.Random) -> str:
            return r.choice(["0", "-1.5", "3.40282e38", "-3.40282e38", "1e-30", "5.6",
                             "16777217", repr(r.uniform(-1e6, 1e6))])
        return Column(name, "FLOAT", value, select="CAST({c} AS DOUBLE)",
                      canon_server=lambda v: None if v is None else _float32(v),
                      canon_record=lambda v: None if v is None else _float32(v),
                      family="float")

    def double(r: random.Random) -> str:
        return r.choice(["0", "-2.5", "1.7976931348623157e308", "-1.7976931348623157e308",
                         "2.2250738585072014e-308", "0.1", repr(r.uniform(-1e15, 1e15))])
    return Column(name, "DOUBLE", double, family="double")


def _temporal_column(name: str, rng: random.Random, flavor: str) -> Column:
    kind = rng.choice(["DATE", "DATETIME", "TIMESTAMP", "TIME", "YEAR"])
    fsp = rng.randint(0, 6) if kind in ("DATETIME", "TIMESTAMP", "TIME") else 0
    definition = f"{kind}({fsp})" if fsp else kind

    def frac(r: random.Random) -> str:
        return "." + "".join(r.choice("0123456789") for _ in range(6)) if fsp else ""

    def value(r: random.Random) -> str:
        if kind == "YEAR":
            return r.choice(["1901", "2155", "0", "2000", str(r.randint(1901, 2155))])
        if kind == "TIME":
            text = r.choice(["-838:59:59", "838:59:59", "00:00:00", "-00:00:01",
                             f"{r.randint(-838, 838)}:{r.randint(0, 59):02}:{r.randint(0, 59):02}"])
            return _quote(text + (frac(r) if abs(int(text.split(":")[0])) < 838 else ""))
        if kind == "TIMESTAMP":
            return _quote(r.choice(["1970-01-01 00:00:01", "2038-01-19 03:14:07",
                                    "0000-00-00 00:00:00", "2024-02-29 12:34:56",
                                    f"{r.randint(1971, 2037)}-{r.randint(1, 12):02}-"
                                    f"{r.randint(1, 28):02} 01:02:03"]) + frac(r))
        date = r.choice(["1000-01-01", "9999-12-31", "0000-00-00", "2024-02-29",
                         f"{r.randint(1000, 9999)}-{r.randint(1, 12):02}-{r.randint(1, 28):02}"])
        if kind == "DATE":
            return _quote(date)
        return _quote(date + r.choice([" 00:00:00", " 23:59:59", " 12:34:56"]) + frac(r))

    def record(v: Any) -> Any:
        if v is None or kind == "YEAR":
            return v
        return v.replace("T", " ").removesuffix("+00:00")
    if kind == "YEAR":
        return Column(name, definition, value, family="year")
    return Column(name, definition + (" NULL" if kind == "TIMESTAMP" else ""), value,
                  select="CAST({c} AS CHAR)", canon_record=record, family="temporal")


def _text_column(name: str, rng: random.Random, flavor: str) -> Column:
    charsets = list(ALPHABETS)
    if flavor == "mysql":
        charsets.remove("utf8mb3")  # deprecated name: utf8mb3 is still there as "utf8mb3"
        charsets.append("utf8mb3")
    charset = rng.choice(charsets)
    kind = rng.choice(["CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT"])
    length = {"CHAR": rng.choice([1, 10, 255]), "VARCHAR": rng.choice([1, 20, 300, 500]),
              "TINYTEXT": 63, "TEXT": 2000, "MEDIUMTEXT": 3000}[kind]
    definition = f"{kind}({length})" if kind in ("CHAR", "VARCHAR") else kind
    alphabet = ALPHABETS[charset]

    def value(r: random.Random) -> str:
        n = r.choice([0, 1, length, r.randint(0, length)])
        text = "".join(r.choice(alphabet) for _ in range(n))
        if kind == "TINYTEXT":  # 255 bytes: stay within it in every character set
            text = text[:63]
        return _quote(text.rstrip(" ") if kind == "CHAR" else text)
    return Column(name, f"{definition} CHARACTER SET {charset}", value,
                  blob=kind.endswith("TEXT"), family="text", extra={"charset": charset})


def _binary_column(name: str, rng: random.Random) -> Column:
    kind = rng.choice(["BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"])
    length = {"BINARY": rng.choice([1, 16, 255]), "VARBINARY": rng.choice([1, 300]),
              "TINYBLOB": 255, "BLOB": 3000, "MEDIUMBLOB": 3000, "LONGBLOB": 3000}[kind]
    definition = f"{kind}({length})" if kind in ("BINARY", "VARBINARY") else kind

    def value(r: random.Random) -> str:
        n = r.choice([0, 1, length, r.randint(0, length)])
        data = bytes(r.choice([0, 1, 0x20, 0x7f, 0xff, r.randint(0, 255)]) for _ in range(n))
        return _hex(data)
    return Column(name, definition, value, canon_server=_b64, blob="BLOB" in kind,
                  family="binary")


def _enum_column(name: str, rng: random.Random) -> Column:
    count = rng.choice([1, 2, 5, 255, 256, 300])
    labels = [f"l{i}" if rng.random() < 0.8 else f"é{i}😀" for i in range(count)]
    body = ",".join(_quote(label) for label in labels)

    def value(r: random.Random) -> str:
        return _quote(r.choice([labels[0], labels[-1], r.choice(labels)]))
    return Column(name, f"ENUM({body}) CHARACTER SET utf8mb4", value, family="enum")


def _set_column(name: str, rng: random.Random) -> Column:
    count = rng.choice([1, 3, 8, 9, 17, 33, 64])
    labels = [f"s{i}" for i in range(count)]

    def value(r: random.Random) -> str:
        chosen = [label for label in labels if r.random() < 0.3]
        return _quote(",".join(chosen))
    return Column(name, f"SET({','.join(map(_quote, labels))})", value,
                  canon_server=lambda v: None if v is None else sorted(
                      v if isinstance(v, (set, frozenset)) else v.split(",") if v else []),
                  canon_record=lambda v: None if v is None else sorted(v), family="set")


def _bit_column(name: str, rng: random.Random) -> Column:
    bits = rng.choice([1, 5, 8, 9, 31, 64])

    def value(r: random.Random) -> str:
        return str(r.choice([0, 2 ** bits - 1, r.randint(0, 2 ** bits - 1)]))
    return Column(name, f"BIT({bits})", value, select="CAST({c} AS UNSIGNED)", family="bit")


_JSON_DOCS = ['{"a": 1}', '[]', '{}', 'null', 'true', '"é😀"', '[1, 2.5, -3, "x", null]',
              '{"k": {"n": [1, {"d": 1.5e300}]}, "u": "\\u00e9"}', '18446744073709551615',
              '-9223372036854775808', '0.1', '{"": ""}', '"' + 'x' * 300 + '"']


def _json_column(name: str, rng: random.Random, flavor: str) -> Column:
    def value(r: random.Random) -> str:
        return _quote(r.choice(_JSON_DOCS))
    if flavor == "mariadb":  # LONGTEXT: its text as written
        return Column(name, "JSON", value, blob=True, family="json")

    def canon(v: Any) -> Any:
        if v is None:
            return None
        document = json.loads(v) if isinstance(v, (str, bytes)) else v
        return JSON_NULL if document is None else document

    def record(v: Any) -> Any:
        if isinstance(v, dict) and list(v) == ["$json"] and v["$json"] is None:
            return JSON_NULL
        return v
    return Column(name, "JSON", value, canon_server=canon, canon_record=record, blob=True,
                  family="json")


def _geometry_column(name: str, rng: random.Random) -> Column:
    kind = rng.choice(["GEOMETRY", "POINT", "LINESTRING"])

    def value(r: random.Random) -> str:
        x, y = r.uniform(-180, 180), r.uniform(-90, 90)
        if kind == "LINESTRING" or (kind == "GEOMETRY" and r.random() < 0.5):
            return f"ST_GeomFromText('LINESTRING(0 0, {x} {y})')"
        return f"ST_GeomFromText('POINT({x} {y})')"
    return Column(name, kind, value, canon_server=_b64, blob=True, family="geometry")


def _address_column(name: str, rng: random.Random) -> Column:
    kind = rng.choice(["UUID", "INET6", "INET4"])
    samples = {"UUID": ["00000000-0000-0000-0000-000000000000",
                        "ffffffff-ffff-4fff-bfff-ffffffffffff",
                        "123e4567-e89b-12d3-a456-426614174000"],
               "INET6": ["::", "::1", "::ffff:192.168.0.1", "2001:db8::1", "fe80::1:2:3:4"],
               "INET4": ["0.0.0.0", "255.255.255.255", "10.1.2.3"]}[kind]

    def value(r: random.Random) -> str:
        return _quote(r.choice(samples))
    return Column(name, kind, value, select="CAST({c} AS CHAR)", family="address")


def _vector_column(name: str, rng: random.Random) -> Column:
    size = rng.choice([1, 3, 16])

    def value(r: random.Random) -> str:
        return f"STRING_TO_VECTOR('[{','.join(repr(r.uniform(-1e3, 1e3)) for _ in range(size))}]')"

    def canon_server(v: Any) -> Any:  # the hex of the stored little-endian FLOATs
        if v is None:
            return None
        data = bytes.fromhex(v)
        return [data[i:i + 4] for i in range(0, len(data), 4)]

    def canon_record(v: Any) -> Any:
        return None if v is None else [_float32(x) for x in v]
    return Column(name, f"VECTOR({size})", value, select="HEX({c})",
                  canon_server=canon_server, canon_record=canon_record, blob=True,
                  family="vector")


def random_column(name: str, rng: random.Random, flavor: str, version: tuple[int, int]
                  ) -> Column:
    """A column of a random type for a server of ``flavor`` at ``version``."""
    makers: list[Callable[[], Column]] = [
        lambda: _int_column(name, rng), lambda: _int_column(name, rng),
        lambda: _decimal_column(name, rng), lambda: _float_column(name, rng),
        lambda: _temporal_column(name, rng, flavor), lambda: _temporal_column(name, rng, flavor),
        lambda: _text_column(name, rng, flavor), lambda: _text_column(name, rng, flavor),
        lambda: _binary_column(name, rng), lambda: _enum_column(name, rng),
        lambda: _set_column(name, rng), lambda: _bit_column(name, rng),
        lambda: _json_column(name, rng, flavor), lambda: _geometry_column(name, rng),
    ]
    if flavor == "mariadb" and version >= (10, 10):
        makers.append(lambda: _address_column(name, rng))
    if flavor == "mysql":
        makers.append(lambda: _vector_column(name, rng))
    column = rng.choice(makers)()
    column.nullable = rng.random() < 0.7
    if not column.nullable:
        column.definition = column.definition.removesuffix(" NULL") + " NOT NULL"
    return column
