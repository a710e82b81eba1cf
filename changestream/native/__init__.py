"""The compiled parts (Cython, built by the install script) and the switch between them and
the Python paths they stand in for."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_VARIABLE = "CHANGESTREAM_PURE_PYTHON"


def compiled(module: str) -> ModuleType | None:
    """The compiled module ``module`` (e.g. ``changestream.parallel._segment_rows``) when it
    was built and the Python paths are not asked for (``CHANGESTREAM_PURE_PYTHON=1``)."""
    if os.environ.get(PURE_PYTHON_VARIABLE) == "1":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
