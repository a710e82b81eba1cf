"""Where changestream keeps what it makes once per machine and reuses (server templates,
jars, class-data archives): the XDG base directory rule."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder(name: str) -> Path:
    """``$XDG_CACHE_HOME/changestream/<name>``; an unset or empty ``XDG_CACHE_HOME`` means
    ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "changestream" / name
