"""Equal immutable values shared: policies repeat their contracts, meters, classes, rates and
compiled rows from tenant to tenant, and one object for each value spares a copy a tenant."""

from __future__ import annotations

from typing import Any, TypeVar

_T = TypeVar("_T")

_SHARED: dict[tuple[type, Any], Any] = {}
"""Values by type and value (so that ``True`` is not taken for ``1``)."""
_SHARED_MOST = 1 << 16
"""Past this many values the table starts afresh (values already shared stay shared)."""


def shared(value: _T) -> _T:
    """The value equal to ``value`` (and of its type) shared before, else ``value``."""
    if len(_SHARED) >= _SHARED_MOST:
        _SHARED.clear()
    return _SHARED.setdefault((value.__class__, value), value)  # type: ignore[no-any-return]
