"""Compilation: a policy's rules as the classification tables of ``docs/classify-contract.md``
(:class:`CompiledPolicy`, one :class:`TenantTables` per tenant)."""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from isolane.policy.addresses import PortRange, _mapped
from isolane.policy.constants import ACTION_ALLOW, ACTION_DROP, FRAME_RULE_DSCP, MAX_PORT, NO_CLASS, RULE_FIELDS
from isolane.policy.model import Tenant

if TYPE_CHECKING:
    from isolane.policy.policy import Policy

U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
I32 = npt.NDArray[np.int32]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


@dataclass(frozen=True, eq=False)
class TenantTables:
    """One tenant's compiled rules: the arrays of ``docs/classify-contract.md`` in priority
    order (first match wins), plus what each rule does. Arrays are read-only."""

    name: str
    src: U8
    """(n, 16) prefix addresses, IPv6 or IPv4-mapped (``::ffff:a.b.c.d``)."""
    src_len: U8
    """Prefix length over 128 bits (IPv4 /24 -> 120; any -> 0)."""
    dst: U8
    dst_len: U8
    src_port_lo: U16
    src_port_hi: U16
    dst_port_lo: U16
    dst_port_hi: U16
    proto: U8
    proto_mask: U8
    dscp: U8
    dscp_mask: U8
    action: U8
    """``ACTION_DROP`` (0) or ``ACTION_ALLOW`` (1)."""
    cls: U16
    """Class id (index in ``class_names``); ``NO_CLASS`` for drops."""
    policy_rule: I32
    """The index in ``Tenant.rules`` each table rule came from (lists expand into several)."""
    default_action: int
    default_cls: int
    class_names: list[str]
    vnis: tuple[int, ...] = ()
    """What selects the tenant's traffic (not part of the fingerprint): its VNIs, and for
    untunnelled traffic its outer VLAN ids and source prefixes (16-byte address, length over
    128 bits)."""
    vlans: tuple[int, ...] = ()
    sources: tuple[tuple[bytes, int], ...] = ()

    def __len__(self) -> int:
        return int(self.src_len.shape[0])

    @functools.cached_property
    def fingerprint(self) -> str:
        """A stable hash of the rules, what they do and the default, not of ``name``,
        ``class_names`` or the routes: equal fingerprints classify every packet alike."""
        return _fingerprint({name: getattr(self, name) for name in _FINGERPRINTED}, self.default_action, self.default_cls)

    def rule_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The twelve arrays, in ``RuleTable``'s argument order: ``RuleTable(**t.rule_arrays())``."""
        return {name: getattr(self, name) for name in RULE_FIELDS}


@dataclass(frozen=True, eq=False)
class CompiledPolicy:
    """A policy as tables. Tenant ids are indices into ``tenant_names`` / ``tenants``."""

    tenant_names: list[str]
    tenants: list[TenantTables]
    vni_tenant: dict[int, int]
    """VNI -> tenant id; a VNI not in it belongs to no tenant."""
    vlan_tenant: dict[int, int]
    """Outer VLAN id -> tenant id, for untunnelled traffic."""
    source_prefixes: list[tuple[int, bytes, int]]
    """(tenant id, 16-byte address, length over 128 bits) in policy order, for untunnelled
    traffic: the first prefix containing the outer source address wins."""
    unknown_action: int

    @property
    def fingerprints(self) -> dict[str, str]:
        """Tenant name -> its tables' fingerprint."""
        return {t.name: t.fingerprint for t in self.tenants}

    def changed_tenants(self, previous: CompiledPolicy) -> list[str]:
        """Names of this policy's tenants that are new or classify differently than in ``previous``."""
        before = previous.fingerprints
        return [t.name for t in self.tenants if before.get(t.name) != t.fingerprint]

    def tenant_id(self, name: str) -> int:
        return self.tenant_names.index(name)


_COLUMNS = (
    *("src_len", "dst_len", "src_port_lo", "src_port_hi", "dst_port_lo", "dst_port_hi"),
    *("proto", "proto_mask", "dscp", "dscp_mask", "action", "cls", "policy_rule"),
)
"""The rule columns but the addresses, in the order ``_tenant_tables`` makes each row's values."""
assert set(_COLUMNS) == set(RULE_FIELDS + ("action", "cls", "policy_rule")) - {"src", "dst"}
_DTYPES: dict[str, type[np.integer[Any]]] = {
    **{name: np.uint16 for name in ("src_port_lo", "src_port_hi", "dst_port_lo", "dst_port_hi", "cls")},
    "policy_rule": np.int32,
}


def _readonly(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.setflags(write=False)
    return array


def _tenant_tables(tenant: Tenant) -> TenantTables:
    class_ids = {c.name: i for i, c in enumerate(tenant.classes)}
    src: list[bytes] = []
    dst: list[bytes] = []
    columns: dict[str, list[int]] = {name: [] for name in _COLUMNS}
    appends = [column.append for column in columns.values()]
    any_ports: tuple[PortRange, ...] = ((0, MAX_PORT),)
    for index, rule in enumerate(tenant.rules):
        src_addr, src_len = _mapped(rule.src)
        dst_addr, dst_len = _mapped(rule.dst)
        action = ACTION_ALLOW if rule.action == "allow" else ACTION_DROP
        cls = class_ids[rule.class_name] if rule.class_name is not None else NO_CLASS
        protos: Sequence[int | None] = rule.proto or (None,)
        dscps: Sequence[int | None] = rule.dscp or (None,)
        src_ports = rule.src_ports or any_ports
        if rule.ethertype is not None:  # one row no IP packet matches, its EtherType as source port
            dscps, src_ports = (FRAME_RULE_DSCP,), ((rule.ethertype, rule.ethertype),)
        for proto, dscp, (sp_lo, sp_hi), (dp_lo, dp_hi) in itertools.product(protos, dscps, src_ports, rule.dst_ports or any_ports):
            src.append(src_addr)
            dst.append(dst_addr)
            dscp_mask = 0 if dscp is None else FRAME_RULE_DSCP if dscp == FRAME_RULE_DSCP else 0x3F
            row = (src_len, dst_len, sp_lo, sp_hi, dp_lo, dp_hi, proto or 0, 0 if proto is None else 0xFF, dscp or 0, dscp_mask, action, cls, index)
            for append, value in zip(appends, row):  # in _COLUMNS's order
                append(value)
    arrays: dict[str, npt.NDArray[Any]] = {
        "src": np.frombuffer(b"".join(src), dtype=np.uint8).reshape(len(src), 16),
        "dst": np.frombuffer(b"".join(dst), dtype=np.uint8).reshape(len(dst), 16),
    }
    for name, values in columns.items():
        arrays[name] = _readonly(np.array(values, dtype=_DTYPES.get(name, np.uint8)))
    default_action = ACTION_ALLOW if tenant.default == "allow" else ACTION_DROP
    default_cls = class_ids[tenant.default_class] if default_action == ACTION_ALLOW else NO_CLASS
    return TenantTables(
        name=tenant.name,
        default_action=default_action,
        default_cls=default_cls,
        class_names=tenant.class_names,
        vnis=tenant.vnis,
        vlans=tenant.vlans,
        sources=tuple(_mapped(prefix) for prefix in tenant.sources),
        **arrays,
    )


def tenant_tables(tenant: Tenant) -> TenantTables:
    """``tenant``'s tables, compiled once and kept on the tenant (which is immutable), so that
    policies sharing a tenant share its tables."""
    tables: TenantTables | None = tenant.__dict__.get("_tables")
    if tables is None:
        tables = tenant.__dict__["_tables"] = _tenant_tables(tenant)
    return tables


_FINGERPRINTED = RULE_FIELDS + ("action", "cls", "policy_rule")


def _fingerprint(arrays: Mapping[str, npt.NDArray[Any]], default_action: int, default_cls: int) -> str:
    digest = hashlib.blake2b(b"isolane-tenant-tables-v1", digest_size=16)
    for name in _FINGERPRINTED:
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"|{name}:{array.dtype.str}:{array.shape}|".encode())
        digest.update(array.tobytes())
    digest.update(f"|default:{default_action}:{default_cls}".encode())
    return digest.hexdigest()


def _compile(policy: Policy) -> CompiledPolicy:
    vni_tenant: dict[int, int] = {}
    vlan_tenant: dict[int, int] = {}
    sources: list[tuple[int, bytes, int]] = []
    for i, tenant in enumerate(policy.tenants):
        for vni in tenant.vnis:
            vni_tenant[vni] = i
        for vlan in tenant.vlans:
            vlan_tenant[vlan] = i
        for prefix in tenant.sources:
            addr, length = _mapped(prefix)
            sources.append((i, addr, length))
    return CompiledPolicy(
        tenant_names=policy.tenant_names,
        tenants=list(policy._tables),
        vni_tenant=vni_tenant,
        vlan_tenant=vlan_tenant,
        source_prefixes=sources,
        unknown_action=ACTION_ALLOW if policy.unknown_tenant == "allow" else ACTION_DROP,
    )
