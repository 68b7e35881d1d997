"""Compilation: a policy's rules as the classification tables of ``docs/classify-contract.md``
(:class:`CompiledPolicy`, one :class:`TenantTables` per tenant)."""

from __future__ import annotations

import hashlib
import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.parsing import dtype_of
from isolane.policy.addresses import CompactPrefix, PortRange, _mapped
from isolane.policy.constants import ACTION_ALLOW, ACTION_DROP, FRAME_RULE_DSCP, MAX_PORT, NO_CLASS, RULE_FIELDS
from isolane.policy.model import Rule, Tenant
from isolane.policy.sharing import shared, sharing

if TYPE_CHECKING:
    from isolane.policy.policy import Policy

U8 = npt.NDArray[np.uint8]
U16 = npt.NDArray[np.uint16]
I32 = npt.NDArray[np.int32]
U32 = npt.NDArray[np.uint32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
_T = TypeVar("_T", bound=np.generic)


RULE_ROW_DTYPE: np.dtype = dtype_of(_core.rule_row_layout())
"""One table rule of :attr:`TenantTables.rows`: the rule arrays' fields, what the rule does and
the policy rule it came from; the layout comes from the Rust record that reads it."""


def _struct_format(dtype: np.dtype) -> str:
    """The :mod:`struct` format packing one ``dtype`` record (native order, no alignment)."""
    codes = {"u1": "B", "u2": "H", "i4": "i"}
    parts, at = ["="], 0
    for field, offset in sorted(dtype.fields.values(), key=lambda f: f[1]):  # type: ignore[union-attr]
        parts.append(f"{offset - at}x" if offset > at else "")
        parts.append(f"{field.itemsize}s" if field.subdtype is not None else codes[field.str[1:]])
        at = offset + field.itemsize
    parts.append(f"{dtype.itemsize - at}x")
    return "".join(parts)


_ROW = struct.Struct(_struct_format(RULE_ROW_DTYPE))
_RULE_SRC: CompactPrefix = Rule.__dict__["src"]
_RULE_DST: CompactPrefix = Rule.__dict__["dst"]
_PACKED: tuple[str, ...] = ("src", "dst", "policy_rule", "src_port_lo", "src_port_hi", "dst_port_lo", "dst_port_hi", "cls")
_PACKED += ("src_len", "dst_len", "proto", "proto_mask", "dscp", "dscp_mask", "action")
"""The fields in the order ``_tenant_tables`` gives ``_ROW`` a row's values: the record's order."""
assert _PACKED == tuple(sorted(RULE_ROW_DTYPE.names, key=lambda name: RULE_ROW_DTYPE.fields[name][1]))  # type: ignore[arg-type, index]


class _Column(Generic[_T]):
    """A field of :attr:`TenantTables.rows` as an attribute (a read-only view)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, tables: TenantTables, owner: type | None = None) -> npt.NDArray[_T]:
        return tables.rows[self.name]  # type: ignore[no-any-return]


@dataclass(frozen=True, eq=False, slots=True)
class TenantTables:
    """One tenant's compiled rules: the arrays of ``docs/classify-contract.md`` in priority
    order (first match wins), plus what each rule does; kept packed (one record a table rule,
    :data:`RULE_ROW_DTYPE`) and read as read-only arrays."""

    name: str
    packed_rows: bytes
    """The rows as :data:`RULE_ROW_DTYPE` records, back to back (what the Rust core reads)."""
    default_action: int
    default_cls: int
    class_names: tuple[str, ...]
    """Each class id's name (one tuple shared by the tenants whose classes are named alike)."""
    vnis: tuple[int, ...] = ()
    """What selects the tenant's traffic (not part of the fingerprint): its VNIs, and for
    untunnelled traffic its outer VLAN ids and source prefixes (16-byte address, length over
    128 bits)."""
    vlans: tuple[int, ...] = ()
    sources: tuple[tuple[bytes, int], ...] = ()

    src = _Column[np.uint8]()
    """(n, 16) prefix addresses, IPv6 or IPv4-mapped (``::ffff:a.b.c.d``)."""
    src_len = _Column[np.uint8]()
    """Prefix length over 128 bits (IPv4 /24 -> 120; any -> 0)."""
    dst = _Column[np.uint8]()
    dst_len = _Column[np.uint8]()
    src_port_lo = _Column[np.uint16]()
    src_port_hi = _Column[np.uint16]()
    dst_port_lo = _Column[np.uint16]()
    dst_port_hi = _Column[np.uint16]()
    proto = _Column[np.uint8]()
    proto_mask = _Column[np.uint8]()
    dscp = _Column[np.uint8]()
    dscp_mask = _Column[np.uint8]()
    action = _Column[np.uint8]()
    """``ACTION_DROP`` (0) or ``ACTION_ALLOW`` (1)."""
    cls = _Column[np.uint16]()
    """Class id (index in ``class_names``); ``NO_CLASS`` for drops."""
    policy_rule = _Column[np.int32]()
    """The index in ``Tenant.rules`` each table rule came from (lists expand into several)."""

    def __len__(self) -> int:
        return len(self.packed_rows) // RULE_ROW_DTYPE.itemsize

    @property
    def rows(self) -> npt.NDArray[np.void]:
        """The rows as a read-only structured array of :data:`RULE_ROW_DTYPE`."""
        return np.frombuffer(self.packed_rows, dtype=RULE_ROW_DTYPE)

    @property
    def fingerprint(self) -> str:
        """A stable hash of the rules, what they do and the default, not of ``name``,
        ``class_names`` or the routes: equal fingerprints classify every packet alike."""
        digest = hashlib.blake2b(b"isolane-tenant-rows-v2", digest_size=16)
        digest.update(f"{RULE_ROW_DTYPE.descr}|default:{self.default_action}:{self.default_cls}|".encode())
        digest.update(self.packed_rows)
        return digest.hexdigest()

    def rule_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The twelve arrays, in ``RuleTable``'s argument order: ``RuleTable(**t.rule_arrays())``."""
        rows = self.rows
        return {name: rows[name] for name in RULE_FIELDS}


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


def _readonly(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    array.setflags(write=False)
    return array


def _tenant_tables(tenant: Tenant) -> TenantTables:
    class_ids = {c.name: i for i, c in enumerate(tenant.classes)}
    rows: list[bytes] = []
    pack = _ROW.pack
    any_ports: tuple[PortRange, ...] = ((0, MAX_PORT),)
    for index, rule in enumerate(tenant.rules):
        src_addr, src_len = _RULE_SRC.mapped(rule)
        dst_addr, dst_len = _RULE_DST.mapped(rule)
        action = ACTION_ALLOW if rule.action == "allow" else ACTION_DROP
        cls = class_ids[rule.class_name] if rule.class_name is not None else NO_CLASS
        protos: Sequence[int | None] = rule.proto or (None,)
        dscps: Sequence[int | None] = rule.dscp or (None,)
        src_ports = rule.src_ports or any_ports
        if rule.ethertype is not None:  # one row no IP packet matches, its EtherType as source port
            dscps, src_ports = (FRAME_RULE_DSCP,), ((rule.ethertype, rule.ethertype),)
        for proto, dscp, (sp_lo, sp_hi), (dp_lo, dp_hi) in itertools.product(protos, dscps, src_ports, rule.dst_ports or any_ports):
            dscp_mask = 0 if dscp is None else FRAME_RULE_DSCP if dscp == FRAME_RULE_DSCP else 0x3F
            proto_mask = 0 if proto is None else 0xFF
            row = (src_addr, dst_addr, index, sp_lo, sp_hi, dp_lo, dp_hi, cls, src_len, dst_len, proto or 0, proto_mask, dscp or 0, dscp_mask, action)
            rows.append(pack(*row))  # in _PACKED's order
    return _tables_of(tenant, b"".join(rows), class_ids)


def keep_rows(tenant: Tenant, packed_rows: bytes) -> None:
    """Keeps on ``tenant`` its tables of the rows ``packed_rows``, packed already (the YAML
    reader packs a tenant's rows when it makes each of its rules: ``YamlStream.plain_rules``)."""
    object.__setattr__(tenant, "_tables", _tables_of(tenant, packed_rows, {c.name: i for i, c in enumerate(tenant.classes)}))


def _tables_of(tenant: Tenant, packed_rows: bytes, class_ids: dict[str, int]) -> TenantTables:
    default_action = ACTION_ALLOW if tenant.default == "allow" else ACTION_DROP
    default_cls = class_ids[tenant.default_class] if default_action == ACTION_ALLOW else NO_CLASS
    return TenantTables(
        name=tenant.name,
        packed_rows=packed_rows,
        default_action=default_action,
        default_cls=default_cls,
        class_names=shared(tuple(c.name for c in tenant.classes)),  # most tenants name their classes alike
        vnis=tenant.vnis,
        vlans=tenant.vlans,
        sources=tuple(_mapped(prefix) for prefix in tenant.sources),
    )


def tenant_tables(tenant: Tenant, keep: bool = True) -> TenantTables:
    """``tenant``'s tables, compiled once and kept on the tenant (which is immutable), so that
    policies sharing a tenant share its tables. ``keep=False``: tables for one use (an engine
    copies them into its core), not kept unless they were already: a small tenant's tables are
    as big as the tenant, and quick to compile again."""
    tables: TenantTables | None = tenant._tables
    if tables is None:
        tables = _tenant_tables(tenant)
        if keep:
            object.__setattr__(tenant, "_tables", tables)
    return tables


@sharing()
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
