"""Finding sink adapters: built-ins by name, ``module:Class``, or the ``changestream.sinks``
entry-point group.

A sink spec is ``NAME[:ARGUMENT]``: ``stdout``, ``jsonl:/path/out.jsonl``,
``mypackage.sinks:MySink`` or ``mysink:ARG`` for an adapter registered under ``mysink`` in
the entry-point group. Built-in and entry-point factories are called as
``factory(argument, **options)`` (``argument`` is ``None`` when the spec has none); a
``module:Class`` as ``Class(**options)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from changestream.delivery.adapter import SinkAdapter, capabilities_of
from changestream.model.errors import ConfigError

ENTRY_POINT_GROUP = "changestream.sinks"


# The built-ins by name, as ``module:factory`` (loaded when named: the core imports no sink).
BUILTIN: dict[str, str] = {"jsonl": "changestream.sinks.jsonl:jsonl_sink",
                           "stdout": "changestream.sinks.jsonl:stdout_sink",
                           "spark": "changestream.sinks.spark:spark_sink"}


def _builtin(name: str, spec: str) -> Callable[..., SinkAdapter]:
    module_name, _, attr = BUILTIN[name].partition(":")
    try:
        factory: Callable[..., SinkAdapter] = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ConfigError(f"sink {spec!r} needs what it is not installed with (pip install "
                          f"'changestream[{name}]'): {exc}") from None
    return factory


def _load_object(module_name: str, attr: str, spec: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"sink {spec!r}: unknown sink {module_name!r} ({_known()}), and "
                          f"no module to load a class from ({exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"sink {spec!r}: {module_name} has no {attr}") from None


def _entry_points() -> Any:
    """The installed packages' sink entry points (imported here: a built-in sink, the usual
    case, does not pay for ``importlib.metadata`` at start)."""
    from importlib.metadata import entry_points

    return entry_points(group=ENTRY_POINT_GROUP)


def _known() -> str:
    names = sorted({*BUILTIN, *(ep.name for ep in _entry_points())})
    return "known: " + ", ".join(names)


def sink_factory(spec: str) -> tuple[Callable[..., SinkAdapter], str | None]:
    """The factory a sink spec names, to call as ``factory(argument, **options)``, and the
    argument (``None`` when the spec has none)."""
    name, sep, argument = spec.partition(":")
    arg = argument if sep else None
    if name in BUILTIN:
        return _builtin(name, spec), arg
    for ep in _entry_points():
        if ep.name == name:
            return ep.load(), arg
    if (sep and "." in name) or (sep and argument and argument.isidentifier()):
        # module:Class: the class takes the options only (the spec's text names it)
        cls = _load_object(name, argument, spec)
        return (lambda _argument, **options: cls(**options)), None
    raise ConfigError(f"sink {spec!r}: unknown sink {name!r} ({_known()}, or module:Class)")


def make_sink(spec: str, **options: Any) -> SinkAdapter:
    """A sink adapter from its spec; ``options`` are passed to its factory."""
    factory, argument = sink_factory(spec)
    try:
        sink = factory(argument, **options)
    except ConfigError:
        raise
    except ImportError as exc:  # an extra's package, imported when the sink is made
        raise ConfigError(f"sink {spec!r} needs what it is not installed with (pip install "
                          f"'changestream[spark]' for spark): {exc}") from None
    except Exception as exc:
        raise ConfigError(f"sink {spec!r}: cannot create it: {exc}") from None
    for method in ("open", "write", "close"):
        if not callable(getattr(sink, method, None)):
            raise ConfigError(f"sink {spec!r}: {type(sink).__name__} has no {method}() method")
    capabilities_of(sink)  # declared as such, or none at all
    return sink
