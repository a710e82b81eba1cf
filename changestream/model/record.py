"""``@record``: a slotted dataclass that compiles nothing when its module is imported.

``dataclasses`` compiles every method it writes (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``): for the hundred classes
a run imports, that was about half of the command's own import time (``bench/start.py``).
Here ``__eq__``, ``__hash__``, ``__repr__`` and the frozen guards are shared functions, and
``__init__`` is compiled when the class is first instantiated.

The behaviour is the dataclass's: the same ``__init__`` (defaults, ``default_factory``,
``init=False`` fields, ``kw_only``, ``__post_init__``), equal when the other is of the same
class and the compared fields are equal, a frozen class hashes its compared fields and
refuses assignment, a mutable one is unhashable, and methods the class body defines are
kept. ``dataclasses.fields``, ``replace`` and ``asdict`` work as on any dataclass.
``InitVar`` pseudo-fields are not supported.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

_Class = TypeVar("_Class", bound=type)

#: The default of a parameter whose field has a ``default_factory``.
_FACTORY: Any = type("_FactoryDefault", (), {"__repr__": lambda self: "<factory>"})()


@overload
def record(cls: _Class, /) -> _Class: ...


@overload
def record(*, frozen: bool = False) -> Callable[[_Class], _Class]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """Make ``cls`` a slotted dataclass (frozen if asked) with shared comparison methods."""

    def make(cls: Any) -> Any:
        body = dict(cls.__dict__)
        if frozen and ("__setattr__" in body or "__delattr__" in body):
            raise TypeError(f"{cls.__qualname__}: a frozen record cannot define "
                            "__setattr__ or __delattr__")
        made = dataclasses.dataclass(cls, slots=True, init=False, repr=False, eq=False)
        _check_default_order(made)
        if "__init__" not in body:
            made.__init__ = _init_on_first_use(made, frozen)
        if frozen:
            _freeze(made, body)
        _add_shared_methods(made, body, frozen)
        return made

    return make if cls is None else make(cls)


def _add_shared_methods(cls: Any, body: dict[str, Any], frozen: bool) -> None:
    fields = dataclasses.fields(cls)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)
    if "__repr__" not in body:
        cls.__repr__ = _repr_of(shown)
    if "__eq__" not in body:
        cls.__eq__ = _eq_of(_values_of(compared))
    body_hash = body.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (body_hash is dataclasses.MISSING
                         or (body_hash is None and "__eq__" in body))
    if not explicit_hash:
        cls.__hash__ = _hash_of(_values_of(hashed)) if frozen else None


def _check_default_order(cls: Any) -> None:
    seen_default = False
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__qualname__}: non-default argument {f.name!r} follows "
                            "default argument")


def _init_on_first_use(cls: Any, frozen: bool) -> Callable[..., None]:
    """An ``__init__`` that compiles the class's real one, puts it in its place and runs it."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # no "self": a field may be named so
        real = _compile_init(cls, frozen)
        type.__setattr__(cls, "__init__", real)
        real(*args, **kwargs)

    return __init__


def _compile_init(cls: Any, frozen: bool) -> Callable[..., None]:
    """The ``__init__`` ``dataclasses`` would write for ``cls``."""
    fields = dataclasses.fields(cls)
    self_name = "__record_self__" if any(f.name == "self" for f in fields) else "self"
    names: dict[str, Any] = {"_FACTORY": _FACTORY, "_object_setattr": object.__setattr__}
    positional: list[str] = []
    keyword: list[str] = []
    lines: list[str] = []
    for f in fields:
        default = f"_default_{f.name}"
        if f.default_factory is not dataclasses.MISSING:
            names[default] = f.default_factory
            param = f"{f.name}=_FACTORY"
            value = (f"{default}() if {f.name} is _FACTORY else {f.name}" if f.init
                     else f"{default}()")
        elif f.default is not dataclasses.MISSING:
            names[default] = f.default
            param = f"{f.name}={default}"
            value = f.name if f.init else default
        else:
            param = f.name
            value = f.name if f.init else ""
        if f.init:
            (keyword if f.kw_only else positional).append(param)
        if value:
            lines.append(f"_object_setattr({self_name}, {f.name!r}, {value})" if frozen
                         else f"{self_name}.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        lines.append(f"{self_name}.__post_init__()")
    params = [self_name, *positional, *(["*", *keyword] if keyword else [])]
    body = "\n".join(f"    {line}" for line in lines or ["pass"])
    exec(f"def __init__({', '.join(params)}) -> None:\n{body}\n", names)
    made: Callable[..., None] = names["__init__"]
    made.__qualname__ = f"{cls.__qualname__}.__init__"
    return made


def _freeze(cls: Any, body: dict[str, Any]) -> None:
    """The frozen dataclass's guards, and pickling that does not go through them."""
    names = frozenset(f.name for f in dataclasses.fields(cls))
    ordered = tuple(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in ordered]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(ordered, state):
            object.__setattr__(self, name, value)

    cls.__setattr__ = __setattr__
    cls.__delattr__ = __delattr__
    if "__getstate__" not in body:
        cls.__getstate__ = __getstate__
    if "__setstate__" not in body:
        cls.__setstate__ = __setstate__


def _values_of(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an object's values of ``names`` as a tuple (always a tuple, so
    that comparison has a tuple's identity shortcut, as the dataclass's has)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _eq_of(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(values: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(values(self))

    return __hash__


def _repr_of(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__
