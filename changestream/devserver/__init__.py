"""Private database servers started on demand: for the quick-start demo and the tests.

An embedded server (:class:`EmbeddedMariaDB`, :class:`EmbeddedMySQL`, context managers) is
a real ``mariadbd`` or ``mysqld`` with its own data directory, port and socket under a
temporary folder, set up for change-data-capture (ROW binlog, full row images and metadata;
or ``binlog=False``: the schema history's shadow server), bound to 127.0.0.1 with an empty
``root`` password: for local use only. A program from another root runs through a
``launcher`` (the words put before it, e.g. that root's dynamic loader; share and plugin
directories are found next to the program). :mod:`.base` holds what every flavour shares."""

from changestream.devserver.base import EmbeddedServer
from changestream.devserver.errors import ServerNotAvailableError, ServerStartError
from changestream.devserver.mariadb import EmbeddedMariaDB
from changestream.devserver.mysql import EmbeddedMySQL
from changestream.devserver.options import ServerOptions, option_args
from changestream.devserver.process import free_port

__all__ = [
    "EmbeddedMariaDB",
    "EmbeddedMySQL",
    "EmbeddedServer",
    "ServerNotAvailableError",
    "ServerOptions",
    "ServerStartError",
    "free_port",
    "option_args",
]
