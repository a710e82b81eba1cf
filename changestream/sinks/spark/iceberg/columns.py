"""How an Iceberg table's columns follow the source's types: the types Iceberg keeps, the
changes it makes in place, and the statements for the ones it cannot make."""

from __future__ import annotations

import re

from .names import quote as _q

_INT_LIKE = {"tinyint": "int", "smallint": "int"}  # Iceberg keeps these as int
_WIDENS = {("int", "bigint"), ("float", "double")}


def iceberg_type(simple: str) -> str:
    """The type Iceberg keeps for a Spark type (its simple string)."""
    return _INT_LIKE.get(simple, simple)


def widens_in_place(old: str, new: str) -> bool:
    """Whether Iceberg changes a column of type ``old`` to ``new`` in place."""
    if (old, new) in _WIDENS:
        return True
    a = re.fullmatch(r"decimal\((\d+),(\d+)\)", old)
    b = re.fullmatch(r"decimal\((\d+),(\d+)\)", new)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) >= int(a.group(1)))


def retyped(name: str, column: str, spark_type: str, order: list[str]) -> list[str]:
    """Statements that give ``column`` of table ``name`` a type Iceberg cannot change it to
    in place: a new column filled with the old values cast, put where the old one was
    (``order``: the table's columns that stay, in order)."""
    temporary = f"{column}__retyped"
    place = order.index(column)
    where = f"AFTER {_q(order[place - 1])}" if place else "FIRST"
    return [f"ALTER TABLE {name} ADD COLUMN {_q(temporary)} {spark_type}",
            f"UPDATE {name} SET {_q(temporary)} = CAST({_q(column)} AS {spark_type})",
            f"ALTER TABLE {name} DROP COLUMN {_q(column)}",
            f"ALTER TABLE {name} RENAME COLUMN {_q(temporary)} TO {_q(column)}",
            f"ALTER TABLE {name} ALTER COLUMN {_q(column)} {where}"]
