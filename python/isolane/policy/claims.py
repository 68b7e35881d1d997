"""What a policy's tenants claim together, kept so that a one-tenant edit is checked against the
others without reading them: names, VNIs and VLAN ids by owner, the guarantees' sum, and the
basis of the port weights (:class:`WeightBasis`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from isolane.policy.across import _guarantee, check_guarantees, weight_scale
from isolane.policy.model import Tenant
from isolane.policy.validate import _Checker

if TYPE_CHECKING:
    from isolane.policy.policy import Policy

K = TypeVar("K", str, int)
V = TypeVar("V")

TenantChange = tuple[Literal["replace", "insert", "remove"], int, Tenant | None, Tenant | None]
"""(op, position, the tenant before, the tenant after) of one tenant edit."""


_ABSENT = object()  # not among the changes: look in the base
_GONE = object()  # removed by a change


class Layered(Generic[K, V]):
    """A mapping made from another by a few changes without copying it: a lookup tries the
    changes, then the base. Every 256 changes they are folded into a new base, so a change
    costs O(1) amortised and lookups stay two probes."""

    __slots__ = ("base", "changes")
    base: dict[K, V]
    changes: dict[K, object]

    def __init__(self, base: dict[K, V], changes: dict[K, object] | None = None) -> None:
        self.base, self.changes = base, changes or {}

    def get(self, key: K) -> V | None:
        found = self.changes.get(key, _ABSENT) if self.changes else _ABSENT
        if found is _ABSENT:
            return self.base.get(key)
        return None if found is _GONE else found  # type: ignore[return-value]

    def keys(self) -> list[K]:
        """Every key, the changes' with the base's."""
        changes = self.changes
        return [k for k in self.base if k not in changes] + [k for k, v in changes.items() if v is not _GONE]  # type: ignore[misc]

    def changed(self, removed: Iterable[K], added: dict[K, V]) -> Layered[K, V]:
        changes: dict[K, object] = {**self.changes, **dict.fromkeys(removed, _GONE), **added}
        if len(changes) < 256:
            return Layered(self.base, changes)
        base = dict(self.base)
        for key, value in changes.items():
            if value is _GONE:
                base.pop(key, None)
            else:
                base[key] = value  # type: ignore[assignment]
        return Layered(base)


MOST_MOVES = 64


class Positions:
    """Each tenant's position by name, kept across edits, those that move tenants too: the
    positions when the map was made (or, for a tenant put in since, its position then and how
    many moves it had seen) and the moves since, each (first position moved, by), applied on
    lookup. At most :data:`MOST_MOVES` moves: past them the policy makes the map afresh."""

    __slots__ = ("at", "moves")

    def __init__(self, at: Layered[str, int | tuple[int, int]], moves: tuple[tuple[int, int], ...] = ()) -> None:
        self.at, self.moves = at, moves

    @classmethod
    def of(cls, tenants: Iterable[Tenant]) -> Positions:
        return cls(Layered({t.name: i for i, t in enumerate(tenants)}))

    def get(self, name: str) -> int | None:
        found = self.at.get(name)
        if found is None:
            return None
        at, seen = found if isinstance(found, tuple) else (found, 0)
        for first, by in self.moves[seen:]:
            if at >= first:
                at += by
        return at

    def changed(self, op: str, at: int, old: Tenant | None, new: Tenant | None, count: int) -> Positions | None:
        """After ``op`` at position ``at`` of ``count`` tenants (``old`` out, ``new`` in);
        ``None`` once there would be too many moves."""
        if op == "replace":
            return self
        last = at == count - (op == "remove")  # nothing after it moves
        moves = self.moves if last else (*self.moves, (at, 1) if op == "insert" else (at + 1, -1))
        if len(moves) > MOST_MOVES:
            return None
        if op == "insert" and new is not None:
            return Positions(self.at.changed((), {new.name: (at, len(moves))}), moves)
        return Positions(self.at.changed([old.name] if old is not None else [], {}), moves)


@dataclass(frozen=True)
class Claims:
    names: Layered[str, Tenant]
    vnis: Layered[int, Tenant]
    vlans: Layered[int, Tenant]
    guaranteed_bps: int
    weighted: int
    """How many tenants have a ``weight``."""

    @classmethod
    def of(cls, tenants: Sequence[Tenant]) -> Claims:
        return cls(
            names=Layered({t.name: t for t in tenants}),
            vnis=Layered({v: t for t in tenants for v in t.vnis}),
            vlans=Layered({v: t for t in tenants for v in t.vlans}),
            guaranteed_bps=sum(_guarantee(t) for t in tenants),
            weighted=sum(t.weight is not None for t in tenants),
        )

    def changed(self, old: Tenant | None, new: Tenant | None) -> Claims:
        """The claims once ``old`` (if any) gives way to ``new`` (if any)."""
        names = self.names.changed([old.name] if old else [], {new.name: new} if new else {})
        vnis = self.vnis.changed(old.vnis if old else (), dict.fromkeys(new.vnis, new) if new else {})
        vlans = self.vlans.changed(old.vlans if old else (), dict.fromkeys(new.vlans, new) if new else {})
        guaranteed = self.guaranteed_bps - (_guarantee(old) if old else 0) + (_guarantee(new) if new else 0)
        weighted = self.weighted - (old is not None and old.weight is not None) + (new is not None and new.weight is not None)
        return Claims(names, vnis, vlans, guaranteed, weighted)

    def check(self, ck: _Checker, new: Tenant, old: Tenant | None, at: int, policy: Policy) -> None:
        """Reports in ``ck`` what ``new`` in place of ``old`` (at position ``at``) would break
        across the policy's tenants."""
        path = f"tenants[{at}]"
        for key, values, owners, what in (("vnis", new.vnis, self.vnis, "VNI"), ("vlans", new.vlans, self.vlans, "VLAN id")):
            for k, value in enumerate(values):
                owner = owners.get(value)
                if owner is not None and owner is not old:
                    where = f"tenants[{policy._position(owner.name)}]"
                    ck.error(f"{path}.{key}[{k}]", f"{what} {value} is claimed by both {owner.name!r} ({where}) and {new.name!r}")
        weighted = self.weighted - (old is not None and old.weight is not None) + (new.weight is not None)
        if weighted not in (0, len(policy.tenants) + (old is None)):
            ck.error(path, "give every tenant a weight, or none (spare capacity is then shared in proportion to the guarantees)")
        guaranteed = self.guaranteed_bps - (_guarantee(old) if old else 0) + _guarantee(new)
        if policy.port is not None:
            check_guarantees(ck, guaranteed, policy.port.rate_bps)


@dataclass(frozen=True, eq=False)
class WeightBasis:
    """What every tenant's port weight follows from beyond its own share (:func:`port_weights`),
    kept so that a one-tenant edit finds the port's weight scale without reading every tenant:
    how many tenants have each guarantee (bytes per second), their greatest common divisor,
    the largest, and how many tenants have a ``weight``."""

    counts: Layered[int, int]
    unit: int
    """The greatest common divisor of the guarantees that are not 0 (0: there are none)."""
    top: int
    weighted: int

    @classmethod
    def of(cls, tenants: Iterable[Tenant]) -> WeightBasis:
        counts: dict[int, int] = {}
        weighted = 0
        for t in tenants:
            g = _guarantee(t) // 8
            counts[g] = counts.get(g, 0) + 1
            weighted += bool(t.weight)
        return cls._from_counts(Layered(counts), weighted)

    @classmethod
    def _from_counts(cls, counts: Layered[int, int], weighted: int) -> WeightBasis:
        given = [g for g in counts.keys() if g]
        return cls(counts, math.gcd(*given), max(given, default=0), weighted)

    @property
    def weight_scale(self) -> tuple[int, int]:
        """How every tenant's share becomes its port weight (:func:`weight_scale`)."""
        return weight_scale(self.unit, self.top, bool(self.weighted))

    def changed(self, old: Tenant | None, new: Tenant | None) -> WeightBasis:
        """The basis once ``old`` (if any) gives way to ``new`` (if any)."""
        counts, weighted, unit, top, gone = self.counts, self.weighted, self.unit, self.top, False
        if old is not None:
            g = _guarantee(old) // 8
            left = (counts.get(g) or 1) - 1
            counts = counts.changed([g], {}) if not left else counts.changed((), {g: left})
            weighted -= bool(old.weight)
            gone = not left and g > 0  # a distinct guarantee left: the divisor may grow, the top fall
        if new is not None:
            g = _guarantee(new) // 8
            counts = counts.changed((), {g: (counts.get(g) or 0) + 1})
            weighted += bool(new.weight)
            if g:
                unit, top = math.gcd(unit, g), max(top, g)
        if gone:
            return WeightBasis._from_counts(counts, weighted)
        return WeightBasis(counts, unit, top, weighted)
