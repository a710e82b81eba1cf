"""A configuration key defined in one place, as Debezium's ``Field`` definitions are: its
default, what it is for (the comment ``config/changestream.toml`` shows, rendered from it),
and its check, which says what is wrong with a value (``None``: nothing)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from changestream.model.errors import ConfigError, SinkError

Check = Callable[[Any], str | None]
"""A value's problem, in words that follow the key (``None``: it is fine)."""


def setting(default: Any = dataclasses.MISSING, doc: str = "", check: Check | None = None,
            *, factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field for a configuration key: ``default`` (or ``factory`` for a list or
    table), ``doc`` (paragraphs apart by a line break; a paragraph that is an example,
    ``key = value`` or indented, is shown as it is) and ``check``."""
    metadata = {"doc": doc, "check": check}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


FLAG_TRUE = ("1", "true", "yes", "on")
FLAG_FALSE = ("0", "false", "no", "off")


def parse_flag(text: str) -> bool | None:
    """A boolean written as text (``true``/``false``, ``yes``/``no``, ``on``/``off``,
    ``1``/``0``, any case), ``None`` when it is none of them: the one rule for the
    configuration, the environment and sink options."""
    lowered = text.strip().lower()
    return True if lowered in FLAG_TRUE else False if lowered in FLAG_FALSE else None


def option_flag(owner: str, option: str, value: bool | str) -> bool:
    """A boolean sink option given as a bool or as text (``--sink-option KEY=false``), by
    :func:`parse_flag`'s rule; anything else is a :class:`SinkError` naming ``owner``'s
    option."""
    if isinstance(value, bool):
        return value
    parsed = parse_flag(str(value))
    if parsed is None:
        raise SinkError(f"{owner}: option {option}={value!r} is not true or false")
    return parsed


def doc_of(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("doc") or "")


def check_of(f: dataclasses.Field[Any]) -> Check | None:
    check = f.metadata.get("check")
    return check if callable(check) else None


def default_of(section: type, name: str) -> Any:
    """The default of key ``name`` of configuration section ``section`` (where a program's
    own settings take the same default as the configuration file)."""
    f = next(f for f in dataclasses.fields(section) if f.name == name)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def check_key(section: type, name: str, value: Any, prefix: str) -> None:
    """Run the check of key ``name`` of section ``section`` on ``value`` (a program's own
    setting of it); a problem is a :class:`ConfigError` naming ``prefix`` + the key."""
    f = next(f for f in dataclasses.fields(section) if f.name == name)
    check = check_of(f)
    problem = check(value) if check is not None else None
    if problem is not None:
        raise ConfigError(f"{prefix}{name}: {problem}")


def check_section(section: Any, prefix: str) -> None:
    """Run the check of each key of ``section`` (a dataclass of settings) on its value; the
    first problem is a :class:`ConfigError` naming the key (``prefix`` + its name)."""
    for f in dataclasses.fields(section):
        check = check_of(f)
        problem = check(getattr(section, f.name)) if check is not None else None
        if problem is not None:
            raise ConfigError(f"{prefix}{f.name}: {problem}")


def positive(value: int) -> str | None:
    return None if value > 0 else f"must be positive, got {value}"


def not_negative(value: int) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def seconds(value: float) -> str | None:
    """A duration: finite, not negative (what every setting in seconds is by default)."""
    return None if math.isfinite(value) and value >= 0 else \
        f"must be a non-negative number of seconds, got {value}"


def positive_seconds(value: float) -> str | None:
    return None if math.isfinite(value) and value > 0 else \
        f"must be a positive number of seconds, got {value}"


def tcp_port(value: int) -> str | None:
    return None if 0 < value < 65536 else f"{value} is not a TCP port"
