"""Finding a server's programs, and the installation prefix they come from."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from changestream.devserver.errors import ServerNotAvailableError

__all__ = ["find_program", "install_prefix"]


def find_program(given: str | os.PathLike[str] | None, name: str, default: str,
                 install: str) -> str:
    """The server program to run: ``given``, else ``name`` on the PATH, else ``default``;
    :class:`ServerNotAvailableError` (telling how to ``install`` it) if not executable."""
    candidate = str(given) if given else shutil.which(name) or default
    if not os.access(candidate, os.X_OK):
        raise ServerNotAvailableError(
            f"server program {name!r} not found (looked for {candidate}); {install}")
    return candidate


def install_prefix(program: str) -> Path | None:
    """``<prefix>`` of ``<prefix>/sbin/<program>`` when that is not the host's ``/usr``
    (its share and plugin directories are then given to the server explicitly)."""
    prefix = Path(program).parents[1]
    return None if prefix == Path("/usr") else prefix
