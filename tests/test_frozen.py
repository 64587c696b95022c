"""`@frozen` behaves as `@dataclass(frozen=True, slots=True)` does: each shape of record below is
defined both ways and every behaviour a caller can see is compared."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, ClassVar

import pytest

from adapters.frozen import frozen


def both(make: Any) -> tuple[type, type]:
    """The class `make` defines, as @frozen and as the stdlib's frozen slotted dataclass, each
    named in this module's globals so that pickle finds it."""
    made = []
    for suffix, decorate in (("ours", frozen), ("theirs", dataclass(frozen=True, slots=True))):
        cls = make(decorate)
        cls.__qualname__ = cls.__name__ = f"{cls.__name__}_{suffix}"
        globals()[cls.__qualname__] = cls
        made.append(cls)
    return made[0], made[1]


def plain(decorate: Any) -> type:
    @decorate
    class Plain:
        """A record."""

        name: str
        count: int = 0
        tags: list[str] = field(default_factory=list)
        secret: str = field(default="", repr=False)
        note: str = field(default="", compare=False)
        limit: ClassVar[int] = 3

    return Plain


def bare(decorate: Any) -> type:
    @decorate
    class Bare:
        pass

    return Bare


def awkward(decorate: Any) -> type:
    @decorate
    class Awkward:
        """Fields named as what generated code might use."""

        self: int
        _set: int = 1
        object: list[int] = field(default_factory=list)

    return Awkward


def single(decorate: Any) -> type:
    @decorate
    class Single:
        value: object

    return Single


def keyword(decorate: Any) -> type:
    @decorate
    class Keyword:
        first: str
        second: int = field(default=2, kw_only=True)
        third: tuple[int, ...] = field(default_factory=tuple, kw_only=True)

    return Keyword


def hidden(decorate: Any) -> type:
    @decorate
    class Hidden:
        shown: int
        derived: int = field(default=0, init=False)
        made: list[int] = field(default_factory=lambda: [1], init=False)
        unset: int = field(init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "derived", self.shown * 2)
            object.__setattr__(self, "unset", -self.shown)

    return Hidden


def own_repr(decorate: Any) -> type:
    @decorate
    class OwnRepr:
        value: int

        def __repr__(self) -> str:
            return f"<{self.value}>"

    return OwnRepr


def _cases() -> list[tuple[str, tuple[type, type], list[tuple[tuple[Any, ...], dict[str, Any]]]]]:
    return [
        ("plain", both(plain), [(("a",), {}), (("a", 2, ["x"]), {"secret": "s", "note": "n"})]),
        ("bare", both(bare), [((), {})]),
        ("awkward", both(awkward), [((1,), {}), ((1, 2, [3]), {})]),
        ("single", both(single), [((1,), {}), (((1, 2),), {})]),
        ("keyword", both(keyword), [(("a",), {}), (("a",), {"second": 5, "third": (1,)})]),
        ("hidden", both(hidden), [((3,), {})]),
        ("own_repr", both(own_repr), [((7,), {})]),
    ]


CASES = _cases()


@pytest.mark.parametrize(("shape", "classes", "calls"), CASES, ids=[c[0] for c in CASES])
def test_a_frozen_record_behaves_as_the_frozen_dataclass(shape: str, classes: tuple[type, type], calls: Any) -> None:
    ours, theirs = classes
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    assert ours.__doc__ == theirs.__doc__
    assert ours.__match_args__ == theirs.__match_args__  # type: ignore[attr-defined]
    assert ours.__slots__ == theirs.__slots__  # type: ignore[attr-defined]
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    for args, kwargs in calls:
        a, b = ours(*args, **kwargs), theirs(*args, **kwargs)
        twin = ours(*args, **kwargs)
        assert repr(a) == repr(b).replace(theirs.__qualname__, ours.__qualname__)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert a == twin
        assert a != b  # another class
        assert a != object()
        try:
            hash(b)
        except TypeError:  # a list among the fields
            with pytest.raises(TypeError):
                hash(a)
        else:
            assert hash(a) == hash(twin)
        for target in ("name", "value", "shown", "first", "other"):
            with pytest.raises(FrozenInstanceError):
                setattr(a, target, 1)
            with pytest.raises(FrozenInstanceError):
                delattr(a, target)
        for clone in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
            assert clone == a and repr(clone) == repr(a)
        names = [f.name for f in dataclasses.fields(a) if f.init]
        if names:
            changed = dataclasses.replace(a, **{names[0]: args[0] if args else 1})
            assert changed == a


def test_equality_hash_and_repr_follow_each_fields_flags() -> None:
    Plain = plain(frozen)
    a, b = Plain("x", note="one", secret="hush"), Plain("x", note="two", secret="hush")
    assert a == b  # note is not compared
    assert "hush" not in repr(a) and "note='one'" in repr(a)
    assert Plain("x") != Plain("y")
    Single = single(frozen)
    assert hash(Single(1)) == hash(Single(1)) and Single(1) != Single(2)
    assert {Single(1): "a"}[Single(1)] == "a"


def test_defaults_are_fresh_and_the_post_init_runs() -> None:
    Plain = plain(frozen)
    first, second = Plain("a"), Plain("b")
    first.tags.append("mine")
    assert second.tags == []
    Hidden = hidden(frozen)
    record = Hidden(4)
    assert (record.derived, record.made, record.unset) == (8, [1], -4)
    with pytest.raises(TypeError):
        Hidden(4, derived=1)  # type: ignore[call-arg]
    Keyword = keyword(frozen)
    with pytest.raises(TypeError):
        Keyword("a", 5)  # type: ignore[misc]


def test_a_subclass_adds_fields_and_stays_frozen() -> None:
    @frozen
    class Base:
        text: str

    @frozen
    class Child(Base):
        extra: int = 0

    child = Child("t", 2)
    assert (child.text, child.extra) == ("t", 2) and repr(
        child
    ) == "test_a_subclass_adds_fields_and_stays_frozen.<locals>.Child(text='t', extra=2)"
    assert child != Base("t") and isinstance(child, Base)
    with pytest.raises(FrozenInstanceError):
        child.text = "u"  # type: ignore[misc]
    match child:
        case Child(text, extra):
            assert (text, extra) == ("t", 2)


def test_an_init_var_is_refused() -> None:
    with pytest.raises(TypeError, match="InitVar"):

        @frozen
        class Odd:
            seed: dataclasses.InitVar[int]
