"""The :class:`Policy`: reading, checking and compiling a policy, on top of the other modules
(none of them imports this one at run time)."""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.pause_gc import gc_paused
from isolane.policy.across import _policy_warnings, _port_checks, _tenant_warnings, _tenant_weights
from isolane.policy.claims import Claims, Positions, TenantChange, WeightBasis
from isolane.policy.compile import CompiledPolicy, TenantTables, _compile, tenant_tables
from isolane.policy.constants import (
    _DSCP_NAME,
    _TOP_KEYS,
    ACTIONS,
    COUNT_MODES,
    DEFAULT_COLOR_MAP,
    DEFAULT_LARGEST_FRAME,
    SCHEMA_VERSION,
    ActionName,
    ColorName,
    CountMode,
)
from isolane.policy.errors import PolicyError, PolicyWarning, _int_text
from isolane.policy.model import RULE_SLOTS, Port, Tenant
from isolane.policy.qos import CompiledQos, _compile_qos
from isolane.policy.read import _read_file, yaml_errors
from isolane.policy.reuse import _LIVE, read_tenant, settings_of, source_digest, tenants_to_share
from isolane.policy.sharing import sharing
from isolane.policy.tenants import Tenants, as_tenants
from isolane.policy.units import format_size
from isolane.policy.validate import _Checker, _comparable_name, _spelt_apart


@dataclass(frozen=True)
class Policy:
    """A validated policy. Build it with :meth:`from_file` or :meth:`from_dict` (which check
    everything); ``to_dict`` gives the canonical data back (``from_dict(p.to_dict()) == p``)."""

    tenants: Sequence[Tenant] = ()
    """The tenants in order; kept as a :class:`Tenants` (equal to a tuple of the same tenants),
    which a one-tenant edit copies in part."""
    unknown_tenant: ActionName = "drop"
    description: str | None = None
    count: CountMode = "outer"
    """Which bytes meters (unless they say otherwise), shapers and the port count."""
    largest_frame: int = DEFAULT_LARGEST_FRAME
    """The largest frame in bytes: no default burst is smaller."""
    color_map: tuple[tuple[int, ColorName], ...] = DEFAULT_COLOR_MAP
    """The incoming colour of each DSCP for colour-aware meters: ``(dscp, colour)`` for the
    DSCPs that are not green, sorted."""
    port: Port | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The :class:`PolicyWarning` messages found when the policy was read."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenants", as_tenants(self.tenants))
        _LIVE[id(self)] = self  # its tenants may be read again from a document (isolane.policy.reuse)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Policy:
        """Read a policy from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file (chosen by the
        extension). Raises :class:`PolicyError` listing every problem, ``FileNotFoundError``
        if there is no such file; warns (:class:`PolicyWarning`) about rules that never match."""
        with gc_paused():
            with yaml_errors(path):
                policy = _build(_read_file(path, stream_tenants=True), os.fspath(path))
        _emit(policy.warnings)
        return policy

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build a policy from data shaped like the file (see ``docs/policy.md``)."""
        with gc_paused():
            policy = _build(data, None)
        _emit(policy.warnings)
        return policy

    def to_dict(self) -> dict[str, Any]:
        """The policy as plain data (str, int, bool, list, dict only; no ``None``), every default
        written out except the policy-wide QoS settings (``count``, ``largest_frame``,
        ``color_map``), which are written when they differ from the default; suitable for YAML,
        TOML or JSON."""
        out: dict[str, Any] = {"version": SCHEMA_VERSION}
        if self.description is not None:
            out["description"] = self.description
        out["unknown_tenant"] = self.unknown_tenant
        if self.count != "outer":
            out["count"] = self.count
        if self.largest_frame != DEFAULT_LARGEST_FRAME:
            out["largest_frame"] = format_size(self.largest_frame)
        if self.color_map != DEFAULT_COLOR_MAP:
            out["color_map"] = {_DSCP_NAME.get(dscp, str(dscp)): colour for dscp, colour in self.color_map}
        if self.port is not None:
            out["port"] = self.port.to_dict()
        out["tenants"] = [t.to_dict() for t in self.tenants]
        return out

    @property
    def tenant_names(self) -> list[str]:
        return [t.name for t in self.tenants]

    def tenant(self, name: str) -> Tenant:
        """The tenant called ``name`` (``KeyError`` if none)."""
        found = self._claims.names.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def _position(self, name: str) -> int | None:
        """Where the tenant called ``name`` is in :attr:`tenants` (None if nowhere)."""
        return self._positions.get(name)

    def _slot(self, old: Tenant | None) -> int:
        """Where ``old`` is in :attr:`tenants`; the end for no tenant (a new one goes there)."""
        at = self._position(old.name) if old is not None else None
        return len(self.tenants) if at is None else at

    def compile(self) -> CompiledPolicy:
        """The classification tables of this policy (``docs/classify-contract.md``)."""
        return _compile(self)

    def compile_qos(self) -> CompiledQos:
        """The QoS settings of this policy as integer arrays for the Rust meters, shapers and
        port scheduler, every default filled in (``docs/qos.md``); computed once."""
        return self._qos

    def with_tenant(self, tenant: Tenant | Mapping[str, Any]) -> Policy:
        """This policy with ``tenant`` (as written in a document, or a :class:`Tenant`) added at
        the end, or in place of the tenant of its name. Only that tenant is validated and
        compiled (with the checks across tenants: VNIs and VLANs claimed twice, guarantees over
        the port's line rate, weights on all tenants or none); every other tenant is shared, so
        that ``Engine.update`` with the result costs the one tenant. Raises
        :class:`PolicyError` with the tenant's place; warns about its rules that never match."""
        data = tenant.to_dict() if isinstance(tenant, Tenant) else tenant
        claims = self._claims
        name = data.get("name") if isinstance(data, Mapping) else None
        old = claims.names.get(name) if isinstance(name, str) else None
        at = self._slot(old)
        ck = _Checker()
        ck.largest_frame, ck.egress = self.largest_frame, self.port
        known = {settings_of(ck): {digest: old}} if old is not None and (digest := source_digest(old)) is not None else {}
        new = read_tenant(ck, data, f"tenants[{at}]", known)
        if new is not None and not ck.errors:
            old = claims.names.get(new.name)  # the name as read (normalised)
            at = self._slot(old)
            claims.check(ck, new, old, at, self)
        if new is None or ck.errors:
            raise PolicyError(ck.errors)
        tenants = self._tenants.replaced(at, new) if old is not None else self._tenants.inserted(at, new)
        return self._edited(tenants, ("replace" if old is not None else "insert", at, old, new), ck.warnings + _tenant_warnings(at, new))

    def without_tenant(self, name: str) -> Policy:
        """This policy without the tenant called ``name`` (``KeyError`` if none); every other
        tenant is shared (see :meth:`with_tenant`)."""
        old = self._claims.names.get(name)
        if old is None:
            raise KeyError(name)
        at = self._slot(old)
        return self._edited(self._tenants.removed(at), ("remove", at, old, None), [])

    @property
    def _tenants(self) -> Tenants:
        assert isinstance(self.tenants, Tenants)  # made so by __post_init__
        return self.tenants

    def _edited(self, tenants: Tenants, change: TenantChange, warnings: list[str]) -> Policy:
        policy = dataclasses.replace(self, tenants=tenants, warnings=tuple(warnings))
        policy.__dict__["_claims"] = self._claims.changed(change[2], change[3])
        policy.__dict__["_weight_basis"] = self._weight_basis.changed(change[2], change[3])
        policy.__dict__["_lineage"] = _lineage(self, _Edit(weakref.ref(self), change))
        positions: Positions | None = self.__dict__.get("_positions")
        if positions is not None and (moved := positions.changed(*change, len(self.tenants))) is not None:
            policy.__dict__["_positions"] = moved
        _emit(policy.warnings)
        return policy

    @functools.cached_property
    def _claims(self) -> Claims:
        return Claims.of(self.tenants)

    @functools.cached_property
    def _positions(self) -> Positions:
        return Positions.of(self.tenants)

    @functools.cached_property
    def _weight_basis(self) -> WeightBasis:
        return WeightBasis.of(self.tenants)

    def _carry_weight_basis(self, earlier: Policy, changes: Sequence[TenantChange]) -> None:
        """Takes ``earlier``'s weight basis with ``changes`` (those from it to this policy), when
        this policy has none yet and they are at most ``MOST_CARRIED``: a document read again
        then costs its changes, not a pass over every tenant."""
        if "_weight_basis" in self.__dict__ or len(changes) > MOST_CARRIED:
            return
        basis = earlier._weight_basis
        for _, _, old, new in changes:
            basis = basis.changed(old, new)
        self.__dict__["_weight_basis"] = basis

    @functools.cached_property
    def _port_weights(self) -> npt.NDArray[np.uint32]:
        """Every tenant's share of the port's spare capacity, by position (:func:`port_weights`)."""
        return np.array(_tenant_weights(self.tenants), dtype=np.uint32)

    def changes_since(self, earlier: Policy) -> list[TenantChange] | None:
        """The tenant changes (op, position, old tenant, new tenant) that :meth:`with_tenant`
        and :meth:`without_tenant` made from ``earlier`` to this policy, in order; ``None`` if
        this policy was not made from ``earlier`` so (or in more than ``MOST_EDITS``)."""
        if self is earlier:
            return []
        lineage: tuple[_Edit, ...] = self.__dict__.get("_lineage", ())
        for back, edit in enumerate(reversed(lineage)):
            if edit.parent() is earlier:
                return [edit.change for edit in lineage[len(lineage) - 1 - back :]]
        return None

    @functools.cached_property
    def _qos(self) -> CompiledQos:
        return _compile_qos(self)

    @functools.cached_property
    def _tables(self) -> tuple[TenantTables, ...]:
        return tuple(tenant_tables(t) for t in self.tenants)


MOST_EDITS = 256

MOST_CARRIED = 256
"""The most changes through which a policy takes another's weight basis (``_carry_weight_basis``)."""


@dataclass(frozen=True, slots=True)
class _Edit:
    """An edit that made a policy: the policy it was made from (held weakly, so that a chain of
    edits keeps no old policy alive) and the change."""

    parent: weakref.ref[Policy]
    change: TenantChange


def _lineage(parent: Policy, edit: _Edit) -> tuple[_Edit, ...]:
    """The latest ``MOST_EDITS`` edits that led to a policy, ``edit`` last. The edits
    themselves are held, so that a chain made in one expression
    (``p.without_tenant(a).with_tenant(b)``), whose middle policy is gone, still reads as its two
    changes."""
    before: tuple[_Edit, ...] = parent.__dict__.get("_lineage", ())
    return (*before[-(MOST_EDITS - 1) :], edit)


def _emit(messages: Iterable[str]) -> None:
    for message in messages:
        # stacklevel 3: the caller of Policy.from_file / from_dict
        warnings.warn(message, PolicyWarning, stacklevel=3)


def _label(index: int, name: str | None) -> str:
    """How a message names tenant ``index``: by its name if it has one."""
    return repr(name) if name is not None else f"tenants[{index}]"


def _owner_text(items: Sequence[Any], index: int, key: str, value: int) -> str:
    """The tenant that claimed a VNI or VLAN id first, and where: "'a' (tenants[0].vnis[1])",
    read again from its item (only a message needs it)."""
    raw = _raw_mapping(items[index])
    k = next(k for k, v in enumerate(raw[key]) if _is_int(v) and v == value)
    return f"{_label(index, _comparable_name(raw.get('name')))} (tenants[{index}].{key}[{k}])"


def _raw_mapping(item: Any) -> Mapping[str, Any]:
    """A tenant's item as far as the checks across tenants read it: a mapping, even if it is not one."""
    return item if type(item) is dict or isinstance(item, Mapping) else {}


def _is_int(value: Any) -> bool:
    return value.__class__ is int or (isinstance(value, int) and not isinstance(value, bool))


class _Settings(NamedTuple):
    """What a document says beside its tenants, as read."""

    unknown: ActionName
    description: str | None
    count_mode: CountMode
    largest_frame: int
    color_map: tuple[tuple[int, ColorName], ...]


@sharing()
def _build(data: Any, source: str | None) -> Policy:
    if isinstance(data, _core.YamlStream):
        return _build_streamed(data, source)
    ck = _Checker()
    top = _top(ck, data, source)
    settings = _read_settings(ck, top)
    items = ck.sequence(top["tenants"], "tenants", "tenants (mappings)") if "tenants" in top else None
    return _finish(ck, settings, _read_tenants(ck, items or ()), source)


def _build_streamed(stream: _core.YamlStream, source: str | None) -> Policy:
    """:func:`_build` of a YAML document while the core reads it: the tenants are read as they
    come, under the settings written before them. A document that sets its port or largest
    frame after its tenants, or has any problem, is read again whole, so that it reads as
    :func:`_build` reads it, its problems listed in the same order."""
    head = stream.head()
    if head is None:
        return _build(stream.document(), source)
    before = _Checker()
    _read_settings(before, head)
    ck = _Checker()
    ck.largest_frame, ck.egress = before.largest_frame, before.egress
    tenants = _read_tenants(ck, stream)  # type: ignore[arg-type]  # registered as a Sequence (isolane.policy.read)
    document = stream.document()
    whole = _Checker()
    settings = _read_settings(whole, _top(whole, document, source))
    if ck.errors or whole.errors or settings_of(whole) != settings_of(ck):
        return _build(document, source)
    whole.warnings.extend(ck.warnings)  # after the settings', as one reading would give them
    return _finish(whole, settings, tenants, source)


def _top(ck: _Checker, data: Any, source: str | None) -> dict[str, Any]:
    top = ck.mapping(data, "", _TOP_KEYS, required=("tenants",))
    if top is None:
        if data is None:
            ck.errors[-1] = ("", "the policy is empty: expected a mapping with 'tenants'")
        raise PolicyError(ck.errors, source)
    return top


def _read_settings(ck: _Checker, top: Mapping[str, Any]) -> _Settings:
    """The document's keys but its tenants; the settings the tenants are read under go to ``ck``."""
    if "version" in top:
        ck.version(top["version"], "version")
    description = ck.string(top["description"], "description") if "description" in top else None
    unknown = ck.choice(top["unknown_tenant"], "unknown_tenant", ACTIONS, "an action") if "unknown_tenant" in top else "drop"
    count = ck.choice(top["count"], "count", tuple(COUNT_MODES), "a byte count") if "count" in top else "outer"
    largest_frame = ck.largest_frame_setting(top["largest_frame"], "largest_frame") if "largest_frame" in top else DEFAULT_LARGEST_FRAME
    ck.largest_frame = largest_frame or DEFAULT_LARGEST_FRAME
    color_map = ck.color_map(top["color_map"], "color_map") if "color_map" in top else DEFAULT_COLOR_MAP
    ck.egress = ck.port_setting(top["port"], "port") if "port" in top else None
    # Where a setting has errors its value is never used: the errors raise first.
    return _Settings(unknown, description, count, largest_frame, color_map)  # type: ignore[arg-type]


def _read_tenants(ck: _Checker, items: Sequence[Any]) -> list[Tenant | None]:
    """Each tenant of ``items`` (None where it has errors), and the checks across tenants."""
    tenants: list[Tenant | None] = []
    # Each tenant name (NFC), VNI and VLAN id: the index of the tenant that has it first. Only
    # the index is kept (these live through the whole read, amid the tenants that stay): a
    # message reads the rest again from that tenant's item.
    names: dict[str, int] = {}
    vni_owner: dict[int, int] = {}
    vlan_owner: dict[int, int] = {}
    known = tenants_to_share(items)
    stream = items if isinstance(items, _core.YamlStream) else None  # its digests and plain rules taken as the core read them
    for i, item in enumerate(items):
        if stream is None:
            tenant = read_tenant(ck, item, f"tenants[{i}]", known)
        else:
            tenant = read_tenant(ck, item, f"tenants[{i}]", known, stream.repr_digest(i), functools.partial(stream.plain_rules, i, slots=RULE_SLOTS))
        tenants.append(tenant)
        # Cross-tenant checks, on what could be read even if the tenant has other errors.
        raw = _raw_mapping(item)
        name = _comparable_name(raw.get("name"))
        if name is not None:
            first = names.setdefault(name, i)
            if first != i:
                written = _raw_mapping(items[first])["name"]
                ck.error(f"tenants[{i}].name", f"{name!r} is already the name of tenants[{first}]{_spelt_apart(written, raw['name'])}")
        for key, owners, what in (("vnis", vni_owner, "VNI"), ("vlans", vlan_owner, "VLAN id")):
            values = raw.get(key)
            if values.__class__ is not list and not isinstance(values, (list, tuple)):
                continue
            for k, v in enumerate(values):
                if not _is_int(v):
                    continue
                owner = owners.setdefault(v, i)  # a tenant's own repeats are reported where it is read
                if owner != i:
                    ck.error(f"tenants[{i}].{key}[{k}]", f"{what} {_int_text(v)} is claimed by both {_owner_text(items, owner, key, v)} and {_label(i, name)}")
    return tenants


def _finish(ck: _Checker, settings: _Settings, tenants: list[Tenant | None], source: str | None) -> Policy:
    if not ck.errors:
        _port_checks(ck, [t for t in tenants if t is not None])
    if ck.errors:
        raise PolicyError(ck.errors, source)
    policy = Policy(
        tuple(t for t in tenants if t is not None),
        settings.unknown,
        settings.description,
        count=settings.count_mode,
        largest_frame=settings.largest_frame,
        color_map=settings.color_map,
        port=ck.egress,
    )
    found = ck.warnings + _policy_warnings(policy)
    if source is not None:
        found = [f"{source}: {w}" for w in found]
    object.__setattr__(policy, "warnings", tuple(found))
    return policy
