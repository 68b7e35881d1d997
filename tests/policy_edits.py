"""Policies as dicts with one value changed, for tests that check what validation says."""

from __future__ import annotations

import copy
from typing import Any

#: As the value of :func:`edited`: delete the key instead.
DELETE = object()


def edited(policy: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """A deep copy of ``policy`` with the item at ``path`` set to ``value`` (or deleted)."""
    data = copy.deepcopy(policy)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data
