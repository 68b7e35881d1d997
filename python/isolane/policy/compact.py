"""Fields of a slotted dataclass held in a smaller form than the one they are read as.

A policy of 100,000 simple tenants holds 100,000 rule prefixes and 200,000 one-item tuples (each
tenant's VNIs and rules); held compactly they cost a few bytes instead of hundreds. Reading the
field makes the full value again, which costs less than a dictionary lookup. Fields that many
objects share can also be held together, in one object they share (:func:`held_together`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

_C = TypeVar("_C")


class CompactField:
    """A field stored through the dataclass's own slot as ``pack(value)``, read as ``expand(held)``."""

    __slots__ = ("_slot",)

    def __init__(self, slot: Any) -> None:
        self._slot = slot  # the dataclass's own slot, which holds the value

    def __get__(self, owner: Any, kind: type | None = None) -> Any:
        if owner is None:
            return self
        return self.expand(self._slot.__get__(owner, kind))

    def __set__(self, owner: Any, value: Any) -> None:
        self._slot.__set__(owner, self.pack(value))

    def held(self, owner: Any) -> Any:
        """The value as ``owner`` holds it."""
        return self._slot.__get__(owner, None)

    def pack(self, value: Any) -> Any:
        raise NotImplementedError

    def expand(self, held: Any) -> Any:
        raise NotImplementedError


class SingleItem(CompactField):
    """A tuple field that holds a tuple of one item as that item; other tuples as they are."""

    __slots__ = ()

    def pack(self, value: Any) -> Any:
        # Only the item of a one-item tuple that is not itself a tuple: reading it back must tell them apart.
        if value.__class__ is tuple and len(value) == 1 and value[0].__class__ is not tuple:
            return value[0]
        return value

    def expand(self, held: Any) -> Any:
        return held if held.__class__ is tuple else (held,)


def compact_fields(kind: type[CompactField], *names: str) -> Callable[[type[_C]], type[_C]]:
    """A class decorator for a slotted dataclass: its fields ``names`` are held as ``kind`` packs them."""

    def compact(cls: type[_C]) -> type[_C]:
        for name in names:
            setattr(cls, name, kind(cls.__dict__[name]))
        return cls

    return compact


def field_slots(cls: type) -> tuple[Any, ...]:
    """The member descriptor of each field of the slotted dataclass ``cls``, in their order (a
    compact field's own slot): what sets a field as the object holds it, past ``__init__``."""
    slots = (cls.__dict__[f.name] for f in dataclasses.fields(cls))
    return tuple(slot._slot if isinstance(slot, CompactField) else slot for slot in slots)


def held_together(slot: str, kind: type) -> Callable[[type[_C]], type[_C]]:
    """A class decorator for a frozen dataclass that holds the fields named as ``kind``'s (a
    dataclass) in one object of ``kind``, in its slot ``slot``: each such field is read from it.
    The class makes that object in its own ``__init__``, and lists only its other fields and
    ``slot`` in its ``__slots__``."""

    def hold(cls: type[_C]) -> type[_C]:
        for name in (f.name for f in dataclasses.fields(kind)):
            setattr(cls, name, property(attrgetter(f"{slot}.{name}")))
        return cls

    return hold
