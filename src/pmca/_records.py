"""attrs' ``__repr__``, ``__eq__`` and ``__hash__``, written once instead of generated per class.

attrs writes and compiles these methods anew for every class it decorates:
about 0.2 ms per class, and a session imports dozens of small records. A
class decorated with ``repr=False, eq=False`` that derives from one of these
bases behaves as attrs would have made it, from one implementation driven by
the class's ``__attrs_attrs__`` (each field's ``repr``, ``eq``, ``eq_key``
and ``hash`` options honoured):

- :class:`Record`: attrs' repr; equal only to itself (what ``eq=False`` gives);
- :class:`Value`: repr and field-by-field equality, unhashable (``@define``);
- :class:`FrozenValue`: the same, hashable (``@frozen``).

attrs still writes ``__init__`` (validators, converters, defaults) and
everything else; only these three methods are shared.
"""

from __future__ import annotations

import threading
from typing import Any

from attrs import NOTHING

__all__ = ["FrozenValue", "Record", "Value"]

_repr_guard = threading.local()


def _fields(instance: object) -> tuple[Any, ...]:
    fields: tuple[Any, ...] = type(instance).__attrs_attrs__  # type: ignore[attr-defined]
    return fields


def _compared(instance: object, hashing: bool = False) -> tuple[object, ...]:
    values = []
    for field in _fields(instance):
        if not (field.hash if hashing and field.hash is not None else field.eq):
            continue
        value = getattr(instance, field.name)
        values.append(value if field.eq_key is None else field.eq_key(value))
    return tuple(values)


class Record:
    """An attrs class with attrs' ``repr`` (declare it ``repr=False, eq=False``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        try:
            active: set[int] = _repr_guard.active
        except AttributeError:
            active = _repr_guard.active = set()
        if id(self) in active:
            return "..."  # a record that contains itself, as attrs prints it
        active.add(id(self))
        try:
            parts = []
            for field in _fields(self):
                if field.repr is False:
                    continue
                show = repr if field.repr is True else field.repr
                value = (
                    getattr(self, field.name) if field.init else getattr(self, field.name, NOTHING)
                )
                parts.append(f"{field.name}={show(value)}")
        finally:
            active.discard(id(self))
        name = type(self).__qualname__.rsplit(">.", 1)[-1]
        return f"{name}({', '.join(parts)})"


class Value(Record):
    """A :class:`Record` equal to records of its own class with equal fields; unhashable."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return _compared(self) == _compared(other)


class FrozenValue(Value):
    """A :class:`Value` for ``@frozen`` classes: hashable, by the fields that are compared."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash((self.__class__, *_compared(self, hashing=True)))
