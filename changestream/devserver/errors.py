"""The errors of a private server: its program is missing, or it could not start."""

from __future__ import annotations

__all__ = ["ServerNotAvailableError", "ServerStartError"]


class ServerNotAvailableError(RuntimeError):
    """The server program is not installed (or not where it was said to be)."""


class ServerStartError(RuntimeError):
    """The server could not be initialised or did not start accepting connections."""
