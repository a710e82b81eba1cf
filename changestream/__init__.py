"""changestream: MySQL/MariaDB change-data-capture router.

The public API: :class:`Router` (run the change stream into a sink), :class:`TransactionStream`
(iterate over committed transactions, blocking or ``async for``), :func:`load_config`, and
the change model (:class:`Change`, :class:`TransactionPart`, :class:`Batch`,
:class:`Position`) that sink adapters (:class:`SinkAdapter`) receive.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from changestream.delivery.adapter import SinkAdapter, SinkCapabilities
    from changestream.model.changes import Batch, Change, Position, TransactionInfo, TransactionPart
    from changestream.model.errors import ChangestreamError, ConfigError, SinkError, SourceError
    from changestream.runtime.config import Config, load_config
    from changestream.runtime.router import Router, RouterSettings
    from changestream.runtime.stream import TransactionStream

# Imported when first used: a decode worker process imports only what decoding needs.
_HOMES = {
    "Batch": "model.changes", "Change": "model.changes", "Position": "model.changes",
    "TransactionInfo": "model.changes", "TransactionPart": "model.changes",
    "Config": "runtime.config", "load_config": "runtime.config",
    "ChangestreamError": "model.errors", "ConfigError": "model.errors",
    "SinkError": "model.errors", "SourceError": "model.errors",
    "Router": "runtime.router", "RouterSettings": "runtime.router",
    "SinkAdapter": "delivery.adapter", "SinkCapabilities": "delivery.adapter",
    "TransactionStream": "runtime.stream",
}

__all__ = [
    "Batch",
    "Change",
    "ChangestreamError",
    "Config",
    "ConfigError",
    "Position",
    "Router",
    "RouterSettings",
    "SinkAdapter",
    "SinkCapabilities",
    "SinkError",
    "SourceError",
    "TransactionInfo",
    "TransactionPart",
    "TransactionStream",
    "load_config",
]


def _version() -> str:
    """The version pyproject.toml gives, as installed (an editable install too); from
    pyproject.toml itself when run from a source tree that is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("changestream")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # looked up when asked for: importing stays quick
        globals()[name] = value = _version()
        return value
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'changestream' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"changestream.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES, "__version__"})
