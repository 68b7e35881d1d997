"""How well the policy kept each tenant from the others (``docs/report.md``, "Isolation"):
per tenant the rate it achieved against what it was entitled to, its conforming packets lost,
and how much the others inflated its queueing delay at the port, measured by replaying it
alone through the same port; across tenants, Jain's fairness index."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

AUTO_ALONE_MAX = 16
"""Without a list of tenants to replay alone, every tenant is, up to this many tenants."""


@dataclasses.dataclass
class ClassDelay:
    """A class's p99 queueing delay with the others and alone (ns; None without packets sent)."""

    cls: int
    name: str
    p99_ns: int | None
    alone_p99_ns: int | None

    @property
    def inflation(self) -> float | None:
        """p99 with the others over p99 alone (1.0: no harm). None when either is missing, and
        when the class waited with the others but not at all alone (no finite ratio says that:
        :attr:`only_with_others`)."""
        if self.p99_ns is None or self.alone_p99_ns is None or self.only_with_others:
            return None
        return max(self.p99_ns, 1) / max(self.alone_p99_ns, 1)

    @property
    def only_with_others(self) -> bool:
        """It waited at the port (p99 above 0) only because of the others."""
        return bool(self.p99_ns) and self.alone_p99_ns == 0

    def to_json(self) -> dict[str, Any]:
        out = {"cls": self.cls, "class": self.name, "p99_ns": self.p99_ns, "alone_p99_ns": self.alone_p99_ns, "inflation": self.inflation}
        return out | {"only_with_others": self.only_with_others}


@dataclasses.dataclass
class TenantIsolation:
    tenant: str
    entitled_bps: int | None
    """The tenant's guarantee at the port (its ``rate``); None without one."""
    offered_bps: float
    achieved_bps: float
    """Rates over the capture's duration: bytes in, and bytes passed or re-marked."""
    conforming_dropped: int
    """Packets the meters coloured green (within the contract) that were dropped after."""
    delays: list[ClassDelay] = dataclasses.field(default_factory=list)
    """Only for tenants replayed alone."""

    @property
    def share(self) -> float | None:
        """Achieved over what it could claim: its guarantee, or what it offered if less.
        1.0 when it got all it was entitled to; None without a guarantee or traffic."""
        if not self.entitled_bps or not self.offered_bps:
            return None
        return self.achieved_bps / min(self.offered_bps, self.entitled_bps)

    @property
    def worst_inflation(self) -> float | None:
        values = [d.inflation for d in self.delays if d.inflation is not None]
        return max(values) if values else None

    def to_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "entitled_bps": self.entitled_bps,
            "offered_bps": self.offered_bps,
            "achieved_bps": self.achieved_bps,
            "share": self.share,
            "conforming_dropped": self.conforming_dropped,
            "delays": [d.to_json() for d in self.delays],
        }


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index, (sum x)^2 / (n sum x^2): 1.0 when all are equal, 1/n when one
    has everything; None for no values."""
    squares = sum(x * x for x in values)
    if not values or squares == 0:
        return None
    return sum(values) ** 2 / (len(values) * squares)


@dataclasses.dataclass
class Isolation:
    tenants: list[TenantIsolation]

    @property
    def fairness_index(self) -> float | None:
        """Jain's index over the tenants' shares (those with a guarantee and traffic)."""
        return jain_index([t.share for t in self.tenants if t.share is not None])

    def to_json(self) -> dict[str, Any]:
        return {"fairness_index": self.fairness_index, "tenants": [t.to_json() for t in self.tenants]}
