"""Equal immutable values shared within one read or one compile: policies repeat their
contracts, meters, classes, rates and compiled rows from tenant to tenant, and one object for
each value spares a copy a tenant.

The tables live as long as the :func:`sharing` scope that made them, up to 1,024 entries each,
so that a policy whose values are all distinct (each tenant its own rate) holds no table beside
its tenants once read; outside a scope :func:`shared` gives the value itself. A cache of what was
read or compiled (:func:`remember`, :func:`recall`) keeps a scope's entries for the scope (as
many), and outside scopes the latest few: one-tenant edits, made outside a scope, often give a
contract given before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

_T = TypeVar("_T")


class _Scope:
    __slots__ = ("caches", "values")

    def __init__(self) -> None:
        self.values: dict[tuple[type, Any], Any] = {}
        """Values by type and value (so that ``True`` is not taken for ``1``)."""
        self.caches: dict[str, dict[Any, Any]] = {}


_SCOPE: ContextVar[_Scope | None] = ContextVar("isolane_sharing", default=None)


@contextmanager
def sharing() -> Iterator[None]:
    """Values shared and caches kept until the end of the outermost such block."""
    if _SCOPE.get() is not None:
        yield
        return
    token = _SCOPE.set(_Scope())
    try:
        yield
    finally:
        _SCOPE.reset(token)


def shared(value: _T) -> _T:
    """The value equal to ``value`` (and of its type) shared before in this scope, else ``value``."""
    scope = _SCOPE.get()
    if scope is None:
        return value
    return _room(scope.values).setdefault((value.__class__, value), value)  # type: ignore[no-any-return]


_SCOPE_MOST = 1024
"""Past this many entries a scope's table of values or a cache of its starts afresh. A policy of
distinct values (each tenant its own rate) would otherwise hold a key a tenant until the scope
ends, freed then among the tenants that stay: pages that stay resident, 0.5 KiB a tenant at
10,000 tenants. Tiers are still shared: an equal value is kept once again after each new start."""


def _room(table: dict[Any, Any], most: int = _SCOPE_MOST) -> dict[Any, Any]:
    """``table``, emptied if it holds ``most`` entries."""
    if len(table) >= most:
        table.clear()
    return table


_RECENT: dict[str, dict[Any, Any]] = {}
"""The latest entries of each cache, across scopes."""
_RECENT_MOST = 256
"""Past this many entries a cache's latest start afresh."""


def recall(cache: str, key: Any) -> Any | None:
    """What :func:`remember` kept under ``key`` in the cache called ``cache``, if it still has it."""
    scope = _SCOPE.get()
    found = scope.caches.get(cache, {}).get(key) if scope is not None else None
    return found if found is not None else _RECENT.get(cache, {}).get(key)


def remember(cache: str, key: Any, value: Any) -> None:
    scope = _SCOPE.get()
    if scope is not None:
        _room(scope.caches.setdefault(cache, {}))[key] = value
        return
    _room(_RECENT.setdefault(cache, {}), _RECENT_MOST)[key] = value
