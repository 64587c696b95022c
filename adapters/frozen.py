"""`@frozen`: the immutable records of the whole server (events, settings, results), built as
`@dataclass(frozen=True, slots=True)` builds them, only faster to define.

On Python 3.11 a frozen dataclass compiles six generated functions from source when its class
is defined (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`); with
about a hundred such classes that is 25-30 ms of every start of the server, a fifth of its cold
start. Here `dataclasses` still reads the fields and makes the slots (so `fields`, `replace`,
`asdict` and pattern matching work as for any dataclass), only `__init__` is compiled, and the
rest are closures over the field names: the same behaviour, from one compile instead of six.

What is kept, as `dataclass(frozen=True, slots=True)` has it: the `__init__` signature
(defaults, `default_factory`, `kw_only`, `init=False` fields, `__post_init__`); `repr`,
`compare` and `hash` of each field; equality only with the same class; a hash of the compared
fields; `FrozenInstanceError` on assigning or deleting an attribute; copy and pickle; a
method the class defines itself is left alone. `__dataclass_params__` is what `dataclasses`
was asked for underneath (no init, repr, eq or frozen): read the class, not that. `InitVar`
fields are refused (none of ours has one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError
from operator import attrgetter
from typing import Any, TypeVar, cast, dataclass_transform, overload

T = TypeVar("T", bound=type)


class _Factory:
    """The default of a field with a `default_factory`, in the signature: shown as dataclasses shows it."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


@overload
def frozen(cls: T, /) -> T: ...
@overload
def frozen(*, kw_only: bool = False) -> Callable[[T], T]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, Field))
def frozen(cls: type | None = None, /, *, kw_only: bool = False) -> Any:
    """`@frozen` or `@frozen(kw_only=True)` on a class, as `@dataclass(frozen=True, slots=True)`."""

    def build(cls: type) -> type:
        return _build(cls, kw_only=kw_only)

    return build if cls is None else build(cls)


def _build(cls: type, *, kw_only: bool) -> type:
    documented = cls.__doc__ is not None
    if not documented:
        cls.__doc__ = "-"  # else dataclasses reads the signature of object.__init__ for one: 4 ms at the first
    underneath = dataclasses.dataclass(init=False, repr=False, eq=False, slots=True, kw_only=kw_only)
    made: type[Any] = underneath(cast("type[Any]", cls))
    fields = dataclasses.fields(made)
    declared: dict[str, Field[Any]] = getattr(made, "__dataclass_fields__")  # noqa: B009
    pseudo = [f for f in declared.values() if f not in fields]  # ClassVars and InitVars
    if any("InitVar" in str(f.type) for f in pseudo):
        raise TypeError(f"{made.__qualname__}: @frozen takes no InitVar fields")
    names = tuple(f.name for f in fields)
    shown_names = tuple(f.name for f in fields if f.repr)
    shown = _values(shown_names)
    compared = _values(tuple(f.name for f in fields if f.compare))
    hashed = _values(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
    every = _values(names)

    def __repr__(self: Any) -> str:
        pairs = zip(shown_names, shown(self), strict=True)
        return f"{self.__class__.__qualname__}({', '.join(f'{name}={value!r}' for name, value in pairs)})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is made or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(made, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is made or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(made, self).__delattr__(name)

    def __getstate__(self: Any) -> tuple[object, ...]:
        return every(self)

    def __setstate__(self: Any, state: tuple[object, ...]) -> None:
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    methods: list[Callable[..., Any]] = [
        _init(made, fields),
        __repr__,
        __eq__,
        __hash__,
        __setattr__,
        __delattr__,
        __getstate__,
        __setstate__,
    ]
    for method in methods:
        if method.__name__ not in made.__dict__:
            method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
            setattr(made, method.__name__, method)
    if not documented:
        import inspect  # loaded by dataclasses already

        made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
    return made


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[object, ...]]:
    """A function giving an instance's values of `names`, as a tuple."""

    if len(names) > 1:
        values: Callable[[Any], tuple[object, ...]] = attrgetter(*names)
        return values
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda _: ()


def _init(cls: type, fields: tuple[Field[Any], ...]) -> Callable[..., None]:
    """`__init__`, compiled as dataclasses compiles a frozen one: each field set through
    `object.__setattr__`, defaults and factories taken from the fields."""
    # Every name of ours in the generated code is one no field has: a field may be called `self`.
    namespace: dict[str, Any] = {"__frozen_set__": object.__setattr__, "__frozen_factory__": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        name = f.name
        if f.default is not MISSING:
            namespace[f"__frozen_default_{name}__"] = f.default
            value = name if f.init else f"__frozen_default_{name}__"
            default = f"=__frozen_default_{name}__"
        elif f.default_factory is not MISSING:
            namespace[f"__frozen_factory_{name}__"] = f.default_factory
            produced = f"__frozen_factory_{name}__()"
            value = f"{produced} if {name} is __frozen_factory__ else {name}" if f.init else produced
            default = "=__frozen_factory__"
        else:
            if not f.init:
                continue  # set by __post_init__, or never
            value, default = name, ""
        if f.init:
            (keyword if f.kw_only else positional).append(name + default)
        body.append(f"    __frozen_set__(__frozen_self__, {name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    __frozen_self__.__post_init__()")
    parameters = ", ".join(["__frozen_self__", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({parameters}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, namespace)  # noqa: S102  # the names are a class's own field names
    init: Callable[..., None] = namespace["__init__"]
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init
