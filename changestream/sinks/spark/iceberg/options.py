"""The Iceberg sink's own options, checked when the sink is made (before any Spark starts)
by the Spark options' shared rules (:mod:`..options`)."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

from changestream.model.errors import SinkError
from changestream.model.record import record

from ..options import age, flag
from .names import CONTROL_NAMESPACE


@record(frozen=True)
class IcebergOptions:
    """What docs/sinks.md ("Options") describes, parsed: ``jar`` (the Iceberg runtime
    jar), ``append_new_keys``, ``arrow_appends``, ``position_deletes`` (``mirror_deletes
    = position``; ``equality`` otherwise), ``maintain_every``/``maintain_expire_after``
    (seconds; upkeep between batches when the first is set), ``verify_every``/
    ``verify_tables`` (docs/verify.md) and ``control_namespace``."""

    jar: str | None = None
    append_new_keys: bool = True
    arrow_appends: bool = True
    position_deletes: bool = True
    maintain_every: float | None = None
    maintain_expire_after: float = 3600.0
    verify_every: float | None = None
    verify_tables: tuple[str, ...] = ("*.*",)
    control_namespace: str = CONTROL_NAMESPACE

    @classmethod
    def parse(cls, *, jar: str | None = None, append_new_keys: bool | str = True,
              arrow_appends: bool | str = True, mirror_deletes: str = "position",
              maintain_every: float | str | None = None,
              maintain_expire_after: float | str = 3600.0,
              verify_every: float | str | None = None, verify_tables: str = "*.*",
              control_namespace: str = CONTROL_NAMESPACE) -> IcebergOptions:
        """The options as given (values, or text from the configuration); a
        :class:`SinkError` names the option that is wrong."""
        if mirror_deletes not in ("position", "equality"):
            raise SinkError(f"spark sink: option mirror_deletes={mirror_deletes!r} is not "
                            "'position' or 'equality'")
        if not re.fullmatch(r"[A-Za-z0-9_]+", str(control_namespace)):
            raise SinkError(f"spark sink: option control_namespace={control_namespace!r} is "
                            "not a namespace name (letters, digits and _)")
        tables = tuple(p.strip() for p in str(verify_tables).split(",") if p.strip())
        every = age("verify_every", verify_every) if _set(verify_every) else None
        if every is not None and not tables:
            raise SinkError("spark sink: option verify_tables names no table (patterns "
                            "like shop.orders or shop.*, separated by commas)")
        return cls(jar=jar, append_new_keys=flag("append_new_keys", append_new_keys),
                   arrow_appends=flag("arrow_appends", arrow_appends),
                   position_deletes=mirror_deletes == "position",
                   maintain_every=age("maintain_every", maintain_every)
                   if _set(maintain_every) else None,
                   maintain_expire_after=age("maintain_expire_after", maintain_expire_after),
                   verify_every=every, verify_tables=tables,
                   control_namespace=str(control_namespace))

    @staticmethod
    def keywords_in(settings: dict[str, Any]) -> dict[str, Any]:
        """The Iceberg options' keywords among ``settings``, taken out of it (the rest are
        the session's)."""
        return {name: settings.pop(name) for name in KEYWORDS if name in settings}


def _set(value: float | str | None) -> bool:
    return value not in (None, "", 0, "0")


#: The keywords :meth:`IcebergOptions.parse` takes: the fields, but ``mirror_deletes`` for
#: ``position_deletes``.
KEYWORDS = tuple("mirror_deletes" if f.name == "position_deletes" else f.name
                      for f in fields(IcebergOptions))
