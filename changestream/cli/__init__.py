"""The ``changestream`` command line (:func:`main`) and the binlog tools behind
``inspect`` and ``extract``."""

from changestream.cli.commands import main

__all__ = ["main"]
