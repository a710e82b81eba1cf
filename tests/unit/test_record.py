"""``@record`` behaves as the slotted dataclass it replaces, method for method."""

from __future__ import annotations

import dataclasses
import math
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from changestream.model.record import record


@record
class Point:
    x: int
    y: int = 0
    note: str = field(default="", compare=False, repr=False)


@dataclass(slots=True)
class PointDataclass:
    x: int
    y: int = 0
    note: str = field(default="", compare=False, repr=False)


@record(frozen=True)
class Key:
    name: str
    size: float
    tags: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class KeyDataclass:
    name: str
    size: float
    tags: tuple[str, ...] = ()


@record
class Point3(Point):
    z: int = 0


@record
class Own:
    value: int

    def __repr__(self) -> str:
        return "own"

    def __eq__(self, other: object) -> bool:
        return True


@record(frozen=True)
class OwnHash:
    value: int

    def __hash__(self) -> int:
        return 7


@record
class Empty:
    pass


def test_equality_follows_the_compared_fields_and_the_class() -> None:
    assert Point(1, 2, "a") == Point(1, 2, "b")
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != Point3(1, 2)
    assert Point(1, 2) != (1, 2)
    assert Point(1, 2).__eq__((1, 2)) is NotImplemented
    assert Empty() == Empty()


def test_text_is_the_dataclass_text() -> None:
    assert repr(Point(1, 2, "hidden")) == repr(PointDataclass(1, 2, "hidden")).replace(
        "PointDataclass", "Point")
    assert repr(Point3(1, 2, z=5)) == "Point3(x=1, y=2, z=5)"
    assert repr(Key("k", 1.5)) == "Key(name='k', size=1.5, tags=())"
    assert repr(Empty()) == "Empty()"


def test_a_frozen_record_hashes_its_fields_and_refuses_changes() -> None:
    assert hash(Key("k", 1.5, ("a",))) == hash(Key("k", 1.5, ("a",)))
    assert len({Key("k", 1.5), Key("k", 1.5), Key("j", 1.5)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        Key("k", 1.5).name = "j"  # type: ignore[misc]


def test_a_mutable_record_is_unhashable_as_a_dataclass_is() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(Point(1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(PointDataclass(1))


def test_a_field_equal_by_identity_compares_as_in_a_dataclass() -> None:
    nan = math.nan
    assert (Key("k", nan) == Key("k", nan)) == (KeyDataclass("k", nan) == KeyDataclass("k", nan))
    solo = record(type("Solo", (), {"__annotations__": {"v": float}}))
    assert solo(nan) == solo(nan)


def test_methods_the_class_defines_are_kept() -> None:
    assert repr(Own(1)) == "own"
    assert Own(1) == Own(2)
    assert Own.__hash__ is None
    assert hash(OwnHash(1)) == 7


def test_dataclass_functions_and_pickling_work() -> None:
    assert [f.name for f in dataclasses.fields(Point3)] == ["x", "y", "note", "z"]
    assert dataclasses.replace(Key("k", 1.0), size=2.0) == Key("k", 2.0)
    assert dataclasses.asdict(Point(1, 2)) == {"x": 1, "y": 2, "note": ""}
    assert pickle.loads(pickle.dumps(Key("k", 1.0, ("t",)))) == Key("k", 1.0, ("t",))
    assert pickle.loads(pickle.dumps(Point3(1, 2, z=3))) == Point3(1, 2, z=3)
    assert not hasattr(Point(1), "__dict__")


def _built(decorate: Any) -> Any:
    """The same class body under ``decorate``: ``@record`` and the dataclass it replaces."""

    @decorate
    class Built:
        name: str
        items: list[int] = field(default_factory=list)
        size: int = 3
        seen: dict[str, int] = field(init=False, default_factory=dict)
        mark: str = field(init=False, default="m")
        doubled: int = field(init=False)
        flag: bool = field(default=False, kw_only=True)

        def __post_init__(self) -> None:
            self.doubled = self.size * 2

    return Built


Built = _built(record)
BuiltDataclass = _built(dataclass(slots=True))


@record(frozen=True)
class Selfish:
    self: int
    other: tuple[int, ...] = field(default_factory=tuple)


def _state(obj: object) -> dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]


@pytest.mark.parametrize(("args", "kwargs"), [
    (("a",), {}), (("a", [1], 5), {}), (("a",), {"size": 7, "flag": True}),
    ((), {"name": "b", "items": [2]}),
])
def test_init_does_what_the_dataclass_init_does(args: tuple, kwargs: dict) -> None:
    assert _state(Built(*args, **kwargs)) == _state(BuiltDataclass(*args, **kwargs))


def test_init_errors_are_the_dataclass_errors() -> None:
    for call in (lambda cls: cls(), lambda cls: cls("a", [], 1, True),
                 lambda cls: cls("a", mark="x")):
        with pytest.raises(TypeError) as ours:
            call(Built)
        with pytest.raises(TypeError) as theirs:
            call(BuiltDataclass)
        assert str(ours.value).split("() ", 1)[1] == str(theirs.value).split("() ", 1)[1]


def test_each_instance_gets_its_own_factory_value() -> None:
    first, second = Built("a"), Built("b")
    first.items.append(1)
    first.seen["k"] = 1
    assert second.items == [] and second.seen == {}


def test_a_field_named_self_and_a_frozen_factory() -> None:
    made = Selfish(self=4)
    assert (made.self, made.other) == (4, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        del made.other
    assert pickle.loads(pickle.dumps(made)) == made


def test_a_non_default_field_after_a_default_is_refused_at_the_class() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        record(type("Bad", (), {"__annotations__": {"a": int, "b": int}, "a": 1}))
