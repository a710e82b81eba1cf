"""The Spark sink's option rules: booleans and ages given as values or as text."""

from __future__ import annotations

import os
from pathlib import Path

from changestream.model.errors import SinkError
from changestream.model.setting import option_flag, parse_flag


def flag(option: str, value: bool | str) -> bool:
    """A boolean sink option given as a bool or as text, by the configuration's rule
    (:func:`changestream.model.setting.parse_flag`)."""
    return option_flag("spark sink", option, value)


def age(option: str, value: float | str | None) -> float:
    """A sink option that is an age (``90``, ``10m``, ``1h``) in seconds."""
    from .iceberg.maintenance import parse_age

    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_age(str(value), option)
    except ValueError as exc:
        raise SinkError(f"spark sink: option {exc}") from None


def class_cache(value: str | os.PathLike[str] | bool | None) -> Path | None:
    """The ``jvm_class_cache`` option: a folder, ``true``/``None`` for the default one,
    ``false`` (or empty) for none (see :mod:`.jvm.class_sharing`)."""
    from .jvm.class_sharing import default_folder

    text = "true" if value is None else str(value).strip()
    if isinstance(value, bool) or not text or parse_flag(text) is not None:
        return default_folder() if text and flag("jvm_class_cache", text) else None
    return Path(text).expanduser()


def java_cause(exc: BaseException) -> str:
    """The first line of the deepest cause of ``exc``, through a Java exception's causes
    when Spark (Py4J) raised it: the message that says what went wrong, not which call."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return short(exc)
    try:
        while java.getCause() is not None and java.getCause() != java:
            java = java.getCause()
        lines = str(java.toString()).strip().splitlines()
    except Exception:  # Py4J gone: the exception's own text
        return short(exc)
    return lines[0][:500] if lines else type(exc).__name__


def short(exc: BaseException) -> str:
    """The first line of an exception's text (Py4J's are long)."""
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__
