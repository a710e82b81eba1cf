"""Private database servers started on demand: for the quick-start demo and the tests.

An embedded server is a real ``mariadbd`` or ``mysqld`` process with its own data
directory, port and socket under a temporary base directory, configured for
change-data-capture: ROW binlog format, full row images and full row metadata (or, with
``binlog=False``, no binlog at all: the schema history's shadow server). It binds to
127.0.0.1 only and its ``root`` user has an empty password, so it is for local use only.

A server program from another root (e.g. a newer distribution unpacked in a directory)
runs through a ``launcher``: the words put before the program, such as that root's
dynamic loader and its ``--library-path``. Its share and plugin directories are found
next to the program (``<prefix>/sbin/mysqld`` -> ``<prefix>/share/mysql``).

    with EmbeddedMariaDB() as server:
        server.execute(["CREATE DATABASE shop", "CREATE TABLE shop.t (id INT PRIMARY KEY)"])
        print(server.url, server.binlog_files())

:class:`EmbeddedServer` (:mod:`.base`) holds the process handling shared by every flavour;
a subclass (:mod:`.mariadb`, :mod:`.mysql`) says how to initialise a data directory and
which command line starts the server.
"""

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
