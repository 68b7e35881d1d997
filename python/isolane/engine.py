"""The classification engine: packets to tenants and to each tenant's first matching rule.

``Engine(policy)`` compiles a :class:`~isolane.policy.Policy` into Rust tables; ``classify``
runs without the GIL; ``update`` swaps in a new policy atomically while other threads keep
classifying, sharing the tables of tenants that did not change and patching a one-rule change
instead of rebuilding.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.parsing import PARSED_DTYPE, dtype_of, parse
from isolane.policy import CompiledPolicy, Policy, PolicyError, _Checker, _tenant_tables


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

    def insert_rule(self, tenant: str, index: int, rule: Mapping[str, Any]) -> None:
        """Insert ``rule`` (as written in a policy file) before rule ``index`` of ``tenant``:
        only that rule is validated and compiled and only that tenant's tables patched, so
        the change reaches the data path in about a millisecond even in a large policy.
        Whole-policy checks (rules never matched) are left to ``update``."""
        self._edit(tenant, "insert", index, rule)

    def replace_rule(self, tenant: str, index: int, rule: Mapping[str, Any]) -> None:
        """Replace rule ``index`` of ``tenant``; see :meth:`insert_rule`."""
        self._edit(tenant, "replace", index, rule)

    def remove_rule(self, tenant: str, index: int) -> None:
        """Remove rule ``index`` of ``tenant``; later rules move up by one."""
        self._edit(tenant, "remove", index, None)

    def _edit(self, tenant_name: str, op: str, index: int, data: Mapping[str, Any] | None) -> None:
        position = self.policy.tenant_names.index(tenant_name) if tenant_name in self.policy.tenant_names else -1
        if position < 0:
            raise KeyError(f"no tenant {tenant_name!r}")
        tenant = self.policy.tenants[position]
        limit = len(tenant.rules) + (op == "insert")
        if not 0 <= index < limit:
            raise IndexError(f"tenants[{position}].rules[{index}]: {tenant_name!r} has {len(tenant.rules)} rules")
        rules = list(tenant.rules)
        rows = None
        if data is not None:
            checker = _Checker()
            rule = checker.rule(data, f"tenants[{position}].rules[{index}]", tenant.class_names, tenant.default_class)
            if rule is None or checker.errors:
                raise PolicyError(checker.errors)
            tables = _tenant_tables(dataclasses.replace(tenant, rules=(rule,)))
            rows = dict(tables.rule_arrays(), action=tables.action, cls=tables.cls)
            rules[index : index + (op == "replace")] = [rule]
        else:
            del rules[index]
        self._core.edit_tenant(tenant_name, op, index, rows)
        tenants = list(self.policy.tenants)
        tenants[position] = dataclasses.replace(tenant, rules=tuple(rules))
        self.policy = dataclasses.replace(self.policy, tenants=tuple(tenants), warnings=())

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
