"""Extra server options as a caller gives them, and the command-line arguments they become."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["ServerOptions", "option_args"]

#: Extra server options: ``["--binlog-checksum=NONE"]`` or ``{"binlog_checksum": "NONE"}``.
#: In a mapping, ``True``/``False`` become ``ON``/``OFF`` and ``None`` a bare ``--flag``.
ServerOptions = Mapping[str, str | int | bool | None] | Sequence[str]


def option_args(options: ServerOptions | None) -> list[str]:
    """Turn extra server options into command-line arguments (given order kept)."""
    if not options:
        return []
    if isinstance(options, str):
        raise TypeError("server options must be a sequence or mapping, not a single string")
    if not isinstance(options, Mapping):
        return [str(option) for option in options]
    args = []
    for key, value in options.items():
        flag = "--" + key.lstrip("-").replace("_", "-")
        if value is None:
            args.append(flag)
        elif isinstance(value, bool):
            args.append(f"{flag}={'ON' if value else 'OFF'}")
        else:
            args.append(f"{flag}={value}")
    return args
