"""changestream: MySQL/MariaDB change-data-capture router."""

__version__ = "0.1.0"
