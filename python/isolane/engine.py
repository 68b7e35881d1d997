"""The classification engine: packets to tenants and to each tenant's first matching rule.

``Engine(policy)`` compiles a :class:`~isolane.policy.Policy` into Rust tables; ``classify``
runs without the GIL; ``update`` swaps in a new policy atomically while other threads keep
classifying, sharing the tables of tenants that did not change and patching a one-rule change
instead of rebuilding.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.parsing import PARSED_DTYPE, dtype_of, parse
from isolane.policy import CompiledPolicy, Policy


class Reason(enum.IntEnum):
    """Why a packet got its verdict (``verdicts["reason"]``)."""

    RULE = 0
    """A rule of the tenant matched."""
    DEFAULT = 1
    """No rule matched: the tenant's default action."""
    UNKNOWN_TENANT = 2
    """No tenant claims the packet: the policy's ``unknown_tenant`` action."""
    TRUNCATED = 3
    """The capture stopped before the headers needed: dropped."""
    MALFORMED = 4
    """Impossible headers: dropped."""
    NOT_IP = 5
    """The tenant's packet is not IP (ARP, ...): the tenant's default action."""


class Action(enum.IntEnum):
    DROP = 0
    ALLOW = 1


VERDICT_DTYPE: np.dtype = dtype_of(_core.verdict_layout())
"""One row of :meth:`Engine.classify`: ``tenant`` (-1 unknown), ``rule`` (index of the policy
rule within the tenant, -1 default), ``cls`` (class id within the tenant, -1 none), ``action``
(:class:`Action`), ``reason`` (:class:`Reason`)."""


@dataclasses.dataclass(frozen=True)
class UpdateReport:
    """How ``Engine.update`` applied a policy, tenant by tenant."""

    kept: int
    """Tenants whose tables were shared unchanged."""
    incremental: int
    """Tenants patched by one rule insertion, removal or replacement."""
    rebuilt: int
    """Tenants whose tables were built anew (new tenants, larger changes)."""


def _as_records(rows: npt.NDArray[np.void]) -> npt.NDArray[np.void]:
    """Records in PARSED_DTYPE's exact layout; arrays with the same fields (as numpy makes
    when it concatenates or slices records) are converted field by field."""
    if rows.dtype == PARSED_DTYPE:
        return rows
    names = rows.dtype.names or ()
    missing = [name for name in PARSED_DTYPE.names or () if name not in names]
    if missing:
        raise TypeError(f"classify takes a PacketBatch or records of isolane.PARSED_DTYPE; these lack {', '.join(missing)}")
    out = np.empty(rows.shape, dtype=PARSED_DTYPE)
    for name in PARSED_DTYPE.names or ():
        out[name] = rows[name]
    return out


def _spec(compiled: CompiledPolicy) -> dict[str, Any]:
    tenants = []
    for tables in compiled.tenants:
        tenant: dict[str, Any] = dict(tables.rule_arrays())
        tenant.update(
            name=tables.name,
            action=tables.action,
            cls=tables.cls,
            policy_rule=tables.policy_rule,
            default_action=tables.default_action,
            default_cls=tables.default_cls,
        )
        tenants.append(tenant)
    return {
        "tenants": tenants,
        "vnis": sorted(compiled.vni_tenant.items()),
        "vlans": sorted(compiled.vlan_tenant.items()),
        "sources": [(address, length, tenant) for tenant, address, length in compiled.source_prefixes],
        "unknown_action": compiled.unknown_action,
    }


class Engine:
    """Classifies packets against a policy; see the module documentation."""

    def __init__(self, policy: Policy) -> None:
        self._compiled = policy.compile()
        self._core = _core.Engine(_spec(self._compiled))
        self.policy = policy

    @property
    def tenant_names(self) -> list[str]:
        return self._compiled.tenant_names

    def classify(self, packets: _core.PacketBatch | npt.NDArray[np.void], **parse_options: Any) -> npt.NDArray[np.void]:
        """Verdicts (:data:`VERDICT_DTYPE`) for a :class:`~isolane.PacketBatch` (parsed first,
        with ``parse_options`` such as ``vxlan_ports``) or for records :func:`~isolane.parse`
        returned. One consistent policy applies to the whole call, even during an update."""
        rows = parse(packets, **parse_options) if isinstance(packets, _core.PacketBatch) else _as_records(packets)
        raw = self._core.classify_records(np.ascontiguousarray(rows).view(np.uint8))
        return raw.view(VERDICT_DTYPE)

    def update(self, policy: Policy) -> UpdateReport:
        """Swap in ``policy`` atomically: classifying threads finish their batch on the old
        tables and start the next on the new; counters run on by tenant name."""
        compiled = policy.compile()
        report = UpdateReport(*self._core.update(_spec(compiled)))
        self._compiled, self.policy = compiled, policy
        return report

    def counters(self) -> dict[str | None, dict[str, Any]]:
        """Per tenant name (``None``: packets no tenant claims) since the engine was made:
        ``packets`` and ``bytes`` as [dropped, allowed], and ``reasons`` counted by :class:`Reason`."""
        out: dict[str | None, dict[str, Any]] = {}
        for name, counts in self._core.counters().items():
            out[name] = {
                "packets": {"dropped": counts["packets"][0], "allowed": counts["packets"][1]},
                "bytes": {"dropped": counts["bytes"][0], "allowed": counts["bytes"][1]},
                "reasons": {Reason(i).name.lower(): n for i, n in enumerate(counts["reasons"]) if n},
            }
        return out
