"""The changes from one policy to another, as an engine is given them: the edits that made
one from the other, else the tenants of two documents compared (tenants read from equal data are
the same object), matched by name where tenants were put in, taken out or moved."""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Sequence
from typing import NamedTuple

from isolane.policy.claims import TenantChange
from isolane.policy.model import Tenant
from isolane.policy.policy import Policy
from isolane.policy.tenants import as_tenants


def tenant_changes(before: Policy, after: Policy, everything: bool = False) -> list[TenantChange]:
    """Tenant changes from ``before`` to ``after``: the edits that made it; else a replacement of
    each position whose tenant is not the same object (tenants read from equal data are), when
    every such position keeps its tenant's name and the counts are equal; else the tenants that
    differ, matched by name (:func:`aligned`). ``everything``: a replacement of every position."""
    changes = None if everything else after.changes_since(before)
    if changes is not None:
        return changes
    old, new = before.tenants, after.tenants
    if everything:
        return _every_position(old, new)
    # A tenant put in, taken out or moved moves others: they are matched by name.
    if len(old) != len(new):
        return aligned(old, new)
    positions = as_tenants(old).differing(as_tenants(new))
    olds, news = (old, new) if len(positions) <= FEW_POSITIONS else (list(old), list(new))  # a list indexes faster
    if any(olds[i].name != news[i].name for i in positions):
        return aligned(old, new)
    return [("replace", i, olds[i], news[i]) for i in positions]


def _every_position(old: Sequence[Tenant], new: Sequence[Tenant]) -> list[TenantChange]:
    """A replacement of every position, with inserts or removals at the end."""
    common = min(len(old), len(new))
    found: list[TenantChange] = [("replace", i, a, b) for i, (a, b) in enumerate(zip(old, new))]
    found += [("insert", i, None, new[i]) for i in range(common, len(new))]
    return found + [("remove", i, old[i], None) for i in reversed(range(common, len(old)))]


_NAME = operator.attrgetter("name")

FEW_POSITIONS = 64
"""Up to this many differing positions are read from the tenants as they are; past it, from lists."""


def aligned(old: Sequence[Tenant], new: Sequence[Tenant]) -> list[TenantChange]:
    """The changes from ``old`` to ``new`` (the tenants of two documents; those read from equal
    data are the same object), as a document edited in places makes them: tenants put in or
    taken out anywhere, changed, renamed or moved. The tenants around the stretch that differs
    stay (those after it move); in it, each tenant is matched by name: replaced if it changed,
    put in or taken out, a name given in place of another replacing it, and the fewest tenants
    that moved past others (:func:`_moved`) taken out and put in again at their new places. The
    work is the stretch's, not the document's."""
    olds, news = list(old), list(new)
    shorter = min(len(olds), len(news))
    # The first differing position from either end, compared in C (100,000 tenants in a few ms).
    head = next(itertools.compress(itertools.count(), map(operator.is_not, olds, news)), shorter)
    tail = _same_run(olds, news, len(olds) - 1, len(news) - 1, shorter - head)
    old_end, new_end = len(olds) - tail, len(news) - tail
    old_names, new_names = set(map(_NAME, itertools.islice(olds, head, old_end))), set(map(_NAME, itertools.islice(news, head, new_end)))
    stretch = _Stretch(olds, news, head, old_end, new_end, old_names, new_names)
    found = _matched(stretch, set())
    changes = found if isinstance(found, list) else _with_moves(stretch, found)
    return changes if changes is not None else _every_position(old, new)  # (never: the fewest moved always match)


class _Stretch(NamedTuple):
    """Where two documents' tenants differ: ``olds[head:old_end]`` and ``news[head:new_end]``,
    and the names of their tenants."""

    olds: list[Tenant]
    news: list[Tenant]
    head: int
    old_end: int
    new_end: int
    old_names: set[str]
    new_names: set[str]


def _matched(stretch: _Stretch, moved: set[str]) -> list[TenantChange] | tuple[str, str]:
    """The changes of :func:`aligned` in ``stretch``, the tenants named in ``moved`` taken out
    and put in again; else the names of two other tenants of both that are in another order."""
    olds, news, head, old_end, new_end, old_names, new_names = stretch
    changes: list[TenantChange] = []
    # From the end of the stretch back, so that each change's position holds when it is made.
    i, j = old_end - 1, new_end - 1
    while i >= head and j >= head:
        was, now = olds[i], news[j]
        if was is now:
            run = _same_run(olds, news, i, j, min(i, j) - head + 1)
            i, j = i - run, j - run
        elif was.name == now.name or (was.name not in new_names and now.name not in old_names):
            changes.append(("replace", i, was, now))
            i, j = i - 1, j - 1
        elif was.name not in new_names or was.name in moved:
            changes.append(("remove", i, was, None))
            i -= 1
        elif now.name not in old_names or now.name in moved:
            changes.append(("insert", i + 1, None, now))
            j -= 1
        else:
            return was.name, now.name
    changes += [("remove", k, olds[k], None) for k in range(i, head - 1, -1)]
    return changes + [("insert", head, None, news[k]) for k in range(j, head - 1, -1)]


def _with_moves(stretch: _Stretch, disordered: tuple[str, str]) -> list[TenantChange] | None:
    """The changes of :func:`aligned` in ``stretch`` with one of the two tenants ``disordered``
    moved (a document with one tenant moved), else the fewest tenants moved (:func:`_moved`)."""
    for name in disordered:
        if isinstance(found := _matched(stretch, {name}), list):
            return found
    olds, news, head, old_end, new_end, _, _ = stretch
    found = _matched(stretch, _moved(olds[head:old_end], news[head:new_end]))
    return found if isinstance(found, list) else None


def _moved(gone: list[Tenant], given: list[Tenant]) -> set[str]:
    """The names of the fewest tenants of both ``gone`` and ``given`` (the old and the new
    stretch) that, taken out, leave the others in their old order: all but a longest run of
    increasing old positions (patience sorting, O(n log n))."""
    old_at = dict(zip(map(_NAME, gone), itertools.count()))
    common = [name for name in map(_NAME, given) if name in old_at]
    tails: list[int] = []  # the least old position ending a run of each length
    ends: list[int] = []  # which of ``common`` ends it
    before = [-1] * len(common)  # the one before each in its run
    for k, at in enumerate(map(old_at.__getitem__, common)):
        length = bisect.bisect_left(tails, at)
        if length == len(tails):
            tails.append(at)
            ends.append(k)
        else:
            tails[length], ends[length] = at, k
        before[k] = ends[length - 1] if length else -1
    kept, k = set(), ends[-1] if ends else -1
    while k >= 0:
        kept.add(common[k])
        k = before[k]
    return set(common) - kept


def _same_run(olds: list[Tenant], news: list[Tenant], i: int, j: int, most: int) -> int:
    """How many tenants are the same objects from ``olds[i]`` and ``news[j]`` back, up to
    ``most``, compared in C."""
    pairs = map(operator.is_not, itertools.islice(reversed(olds), len(olds) - 1 - i, None), itertools.islice(reversed(news), len(news) - 1 - j, None))
    return next(itertools.compress(itertools.count(), itertools.islice(pairs, most)), most)
