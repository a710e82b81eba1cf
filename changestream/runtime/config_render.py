"""The configuration file with every key at its default and its doc as comments, rendered
from the section definitions (:mod:`changestream.runtime.config_sections`): what
``config/changestream.toml`` holds and ``changestream config defaults`` prints."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from typing import Any

from changestream.model.setting import doc_of

WIDTH = 92
HEADER = """\
# changestream configuration: the defaults, each key explained.
#
# Every key can be overridden by an environment variable CHANGESTREAM_<SECTION>_<KEY>,
# e.g. CHANGESTREAM_SOURCE_URL, CHANGESTREAM_BATCH_MAX_CHANGES, CHANGESTREAM_SOURCE_TLS_MODE
# (lists comma-separated), and the command line overrides both. Check a file with
#   changestream config check FILE
"""
_EXAMPLE = re.compile(r"^(\s|\w+ = )")


def render_defaults(config: Any) -> str:
    """The TOML text of ``config`` (a :class:`~changestream.runtime.config.Config`, its
    defaults), each key after its doc."""
    parts = [HEADER]
    for f in dataclasses.fields(config):
        parts.extend(_section(f.name, getattr(config, f.name)))
    return "\n".join(parts)


def _section(name: str, section: Any) -> list[str]:
    lines = [f"[{name}]"]
    nested: list[tuple[str, Any]] = []
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            nested.append((f"{name}.{f.name}", value))
        elif isinstance(value, dict):  # a table of free keys: its doc under its header
            nested.append((f"{name}.{f.name}", doc_of(f)))
        else:
            lines.extend(_comment(doc_of(f)))
            lines.append(f"{f.name} = {_toml(value)}")
    parts = ["\n".join(lines) + "\n"]
    for nested_name, inner in nested:
        if isinstance(inner, str):
            parts.append("\n".join([f"[{nested_name}]", *_comment(inner)]) + "\n")
        else:
            parts.extend(_section(nested_name, inner))
    return parts


def _comment(doc: str) -> list[str]:
    """``doc`` as comment lines: paragraphs wrapped, examples as they are."""
    lines: list[str] = []
    for paragraph in doc.split("\n") if doc else ():
        if _EXAMPLE.match(paragraph):
            lines.append(f"# {paragraph}")
        else:
            lines.extend(textwrap.wrap(paragraph, WIDTH, initial_indent="# ",
                                       subsequent_indent="# ", break_on_hyphens=False))
    return lines


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")
