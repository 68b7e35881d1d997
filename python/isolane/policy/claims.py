"""What a policy's tenants claim together, kept so that a one-tenant edit is checked against the
others without reading them: names, VNIs and VLAN ids by owner, the guarantees' sum, and the
inputs of the port weights (:class:`WeightInputs`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from isolane.policy.across import _guarantee, check_guarantees, port_weights
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
class WeightInputs:
    """What the tenants' port weights follow from, by position: each tenant's guarantee in
    bytes per second and its ``weight`` (0 where it has none)."""

    guarantees: npt.NDArray[np.uint64]
    explicit: npt.NDArray[np.uint32]

    @classmethod
    def of(cls, tenants: Sequence[Tenant]) -> WeightInputs:
        return cls(
            np.array([_guarantee(t) // 8 for t in tenants], dtype=np.uint64),
            np.array([t.weight or 0 for t in tenants], dtype=np.uint32),
        )

    def changed(self, change: TenantChange) -> WeightInputs:
        op, at, _, new = change
        if new is None:
            return WeightInputs(np.delete(self.guarantees, at), np.delete(self.explicit, at))
        values = (_guarantee(new) // 8, new.weight or 0)
        if op == "insert":
            return WeightInputs(np.insert(self.guarantees, at, values[0]), np.insert(self.explicit, at, values[1]))
        guarantees, explicit = self.guarantees.copy(), self.explicit.copy()
        guarantees[at], explicit[at] = values
        return WeightInputs(guarantees, explicit)

    @functools.cached_property
    def weights(self) -> npt.NDArray[np.uint32]:
        """Each tenant's share of the port's spare capacity (:func:`port_weights`)."""
        return port_weights(self.guarantees, self.explicit)
