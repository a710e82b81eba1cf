"""Initialised data directories kept once per server build, copied for each new server."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from changestream.cache import cache_folder

logger = logging.getLogger("changestream")


def data_template(folder: str, key_parts: object, ready: str,
                  initialize: Callable[[Path, Path], None]) -> Path:
    """The template data directory for ``key_parts`` (the build and the options that shape
    the files) in cache folder ``folder``; made by ``initialize(data_dir, scratch)`` the
    first time, under a lock so that parallel processes make it once. ``ready`` names a
    file or folder only a complete data directory has."""
    key = hashlib.sha256(repr(key_parts).encode()).hexdigest()[:16]
    templates = cache_folder(folder)
    template = templates / key
    if (template / ready).exists():
        return template
    templates.mkdir(parents=True, exist_ok=True)
    with (templates / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / ready).exists():
            scratch = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=templates))
            try:
                started = time.monotonic()
                initialize(scratch / "data", scratch)
                (scratch / "data").rename(template)
                logger.info("template data directory %s initialised in %.2fs", template,
                            time.monotonic() - started)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return template
