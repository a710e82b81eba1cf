"""changestream: MySQL/MariaDB change-data-capture router.

The public API: :class:`Router` (run the change stream into a sink), :class:`TransactionStream`
(iterate over committed transactions, blocking or ``async for``), :func:`load_config`, and
the change model (:class:`Change`, :class:`TransactionPart`, :class:`Batch`,
:class:`Position`) that sink adapters (:class:`SinkAdapter`) receive.
"""

from changestream.changes import Batch, Change, Position, TransactionInfo, TransactionPart
from changestream.config import Config, load_config
from changestream.errors import (
    ChangestreamError,
    ConfigError,
    SinkError,
    SourceError,
)
from changestream.router import Router, RouterSettings
from changestream.sink import SinkAdapter
from changestream.stream import TransactionStream

__version__ = "0.1.0"

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
    "SinkError",
    "SourceError",
    "TransactionInfo",
    "TransactionPart",
    "TransactionStream",
    "load_config",
]
