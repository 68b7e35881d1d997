"""The checks that take every tenant at once (guarantees against the line rate, weights), and
the warnings about a policy (tenants no traffic reaches, sources and rules never used)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from isolane.policy.addresses import _mapped
from isolane.policy.compile import tenant_tables
from isolane.policy.constants import (
    MAX_WEIGHT,
)
from isolane.policy.model import Rule, Tenant
from isolane.policy.shadowed import _shadowed_rules
from isolane.policy.units import (
    format_rate,
)

if TYPE_CHECKING:
    from isolane.policy.policy import Policy
from isolane.policy.validate_shapes import _Shapes

_MASKS = [((1 << n) - 1) << (128 - n) for n in range(129)]


def _rule_label(path: str, rule: Rule) -> str:
    return f"{path} ({rule.name!r})" if rule.name else path

def _guarantee(tenant: Tenant) -> int:
    """A tenant's guarantee in bits per second: its rate, or what its classes are guaranteed."""
    if tenant.contract.rate_bps is not None:
        return tenant.contract.rate_bps
    return sum(c.contract.rate_bps or 0 for c in tenant.classes)


def _tenant_weights(tenants: Sequence[Tenant]) -> list[int]:
    guarantees = np.array([_guarantee(t) // 8 for t in tenants], dtype=np.uint64)
    explicit = np.array([t.weight or 0 for t in tenants], dtype=np.uint32)
    return port_weights(guarantees, explicit).tolist()


def weight_scale(unit: int, top: int, weighted: bool) -> tuple[int, int]:
    """How the tenants' shares (each its ``weight``, else its guarantee in bytes/s) become their
    port weights, ``(times, per)``: a share x times // per, at least 1 (the port's
    ``WeightScale``, which keeps it, so that a new scale re-weighs no tenant one by one). The
    weights as given (1/1) if tenants have them; else the guarantees over their greatest common
    divisor ``unit`` (0: no guarantee, every tenant one unit), scaled so that the largest,
    ``top``, is ``MAX_WEIGHT`` when that is not enough for 32 bits."""
    if weighted or not unit:
        return 1, 1
    if top // unit <= MAX_WEIGHT:
        return 1, unit
    return MAX_WEIGHT, top


def port_weights(guarantees: npt.NDArray[np.uint64], explicit: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Each tenant's share of the port's spare capacity, from its guarantee (bytes/s) and its
    ``weight`` (0: none), through :func:`weight_scale`: the weights if tenants have them (all or
    none do, checked), else in proportion to the guarantees (a tenant without one counts one
    unit)."""
    if explicit.any():
        return np.maximum(explicit, 1).astype(np.uint32)
    given = guarantees[guarantees > 0]
    times, per = weight_scale(int(np.gcd.reduce(given)) if len(given) else 0, int(given.max()) if len(given) else 0, False)
    if times == 1:
        return np.maximum(guarantees // np.uint64(per), 1).astype(np.uint32)
    return np.array([max(int(g) * times // per, 1) for g in guarantees], dtype=np.uint32)  # 32 bits: rare, kept exact


def _port_checks(ck: _Shapes, tenants: Sequence[Tenant]) -> None:
    """What takes every tenant at once: guarantees against the line rate, and weights."""
    if ck.egress is not None:
        guaranteed = sum(_guarantee(t) for t in tenants)
        check_guarantees(ck, guaranteed, ck.egress.rate_bps)
    weighted = [(i, t) for i, t in enumerate(tenants) if t.weight is not None]
    if weighted:
        first, tenant = weighted[0]
        for i, other in enumerate(tenants):
            if other.weight is None:
                ck.error(
                    f"tenants[{i}]",
                    f"{other.name!r} has no weight, but tenants[{first}] ({tenant.name!r}) has one: give every tenant a "
                    "weight, or none (spare capacity is then shared in proportion to the guarantees)",
                )
    _port_weight_checks(ck, tenants)


def check_guarantees(ck: _Shapes, guaranteed_bps: int, line_bps: int) -> None:
    """The tenants' guarantees must fit the port's line rate."""
    if guaranteed_bps > line_bps:
        ck.error(
            "port.rate",
            f"the tenants' guarantees add up to {format_rate(guaranteed_bps)}, more than the port's line rate "
            f"{format_rate(line_bps)}: they cannot all be met",
        )


def _port_weight_checks(ck: _Shapes, tenants: Sequence[Tenant]) -> None:
    """A class's queue at the port is weighed by its tenant's weight times its own (docs/qos.md,
    "The port in the engine"), which must fit the 32 bits of the port scheduler's weights."""
    for i, (tenant, tenant_weight) in enumerate(zip(tenants, _tenant_weights(tenants))):
        for k, tc in enumerate(tenant.classes):
            if tc.weight is not None and tenant_weight * tc.weight > MAX_WEIGHT:
                whose = "its tenant's weight" if tenant.weight is not None else "its tenant's weight from the guarantees"
                ck.error(
                    f"tenants[{i}].classes[{k}].weight",
                    f"the port weighs this class by {whose} times its own, {tenant_weight} x {tc.weight}, which is over {MAX_WEIGHT} (32 bits)",
                )
            burst_weight = tc.on_burst.weight if tc.on_burst is not None else None
            if burst_weight is not None and tenant_weight * burst_weight > MAX_WEIGHT:
                whose = "its tenant's weight" if tenant.weight is not None else "its tenant's weight from the guarantees"
                ck.error(
                    f"tenants[{i}].classes[{k}].on_burst.weight",
                    f"the port weighs this class by {whose} times its own, {tenant_weight} x {burst_weight}, which is over {MAX_WEIGHT} (32 bits)",
                )


def _policy_warnings(policy: Policy) -> list[str]:
    found = [w for i, tenant in enumerate(policy.tenants) for w in _no_traffic_warnings(i, tenant)]
    # Source prefixes are checked in policy order: one covered by an earlier one is never used.
    seen: dict[int, dict[int, str]] = {}
    for i, tenant in enumerate(policy.tenants):
        for k, source in enumerate(tenant.sources):
            addr, length = _mapped(source)
            value = int.from_bytes(addr, "big")
            here = f"tenants[{i}].sources[{k}]"
            cover = next(
                (seen[ln][value & _MASKS[ln]] for ln in sorted(seen) if ln <= length and value & _MASKS[ln] in seen[ln]),
                None,
            )
            if cover is not None:
                found.append(f"{here} ('{source}') is never used: {cover} covers it")
            else:
                seen.setdefault(length, {})[value] = f"{here} ('{source}')"
    found.extend(w for i, tenant in enumerate(policy.tenants) for w in _shadowed_warnings(i, tenant))
    return found


def _tenant_warnings(i: int, tenant: Tenant) -> list[str]:
    """The warnings about tenant ``i`` alone (a tenant added or replaced by itself)."""
    return _no_traffic_warnings(i, tenant) + _shadowed_warnings(i, tenant)


def _no_traffic_warnings(i: int, tenant: Tenant) -> list[str]:
    if tenant.vnis or tenant.vlans or tenant.sources:
        return []
    return [f"tenants[{i}] ({tenant.name!r}) has no vnis, vlans or sources: no traffic reaches it"]


def _shadowed_warnings(i: int, tenant: Tenant) -> list[str]:
    if len(tenant.rules) < 2:
        return []  # only an earlier rule can cover one
    found = []
    for rule_index, covering in _shadowed_rules(tenant_tables(tenant)):
        rule_path = f"tenants[{i}].rules[{rule_index}]"
        labels = [_rule_label(f"tenants[{i}].rules[{c}]", tenant.rules[c]) for c in covering]
        verb = "covers" if len(labels) == 1 else "cover"
        who = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
        found.append(f"{_rule_label(rule_path, tenant.rules[rule_index])} is never matched: {who} {verb} it")
    return found
