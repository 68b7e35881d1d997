"""Tenants read once: a tenant read from equal data under equal policy-wide settings is the same
:class:`~isolane.policy.Tenant` object, so policies made from documents that share tenants share
them, and what is compiled from a tenant (kept on it) is compiled once. An engine updated to such
a policy recognises the tenants it already runs by identity.

Each tenant keeps a digest of what it was read from (``Tenant._source``). Reading a document
looks its tenants up among those of the policies alive then, in an index made for that read
(:func:`live_tenants`) and dropped after it: no table beside the tenants lives as long as they do.
A document far smaller than those policies is read afresh (:func:`tenants_to_share`).
``Policy.with_tenant`` looks only at the tenant it replaces.

A tenant found under other policy-wide settings (a document read again with its port changed) is
read again, since its checks depend on them, and is still the same object if that gives an equal
tenant with the same warnings: a change of the port alone leaves every tenant of the engine as it is."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from isolane import _core
from isolane.policy.model import Port, Tenant
from isolane.policy.validate import PlainRules, _Checker

if TYPE_CHECKING:
    from isolane.policy.policy import Policy

_LIVE: weakref.WeakValueDictionary[int, Policy] = weakref.WeakValueDictionary()
"""Every policy alive, by identity (``Policy.__post_init__`` adds each; a policy's hash would
hash every tenant)."""


Settings = tuple[int, "Port | None"]
"""The policy-wide settings a tenant's reading depends on: the largest frame and the port."""

Known = dict[Settings, dict[bytes, Tenant]]
"""Tenants that may be shared, by the settings they were read under, then by :func:`source_key`."""


def settings_of(ck: _Checker) -> Settings:
    return ck.largest_frame, ck.egress


def source_key(item: Any) -> bytes | None:
    """A digest of a tenant's data, as its ``repr`` spells it (which tells ``1`` from ``1.0``
    and ``True``, and keeps the order of keys): a 120-bit digest rather than the text, so that a
    tenant's key stays small, 48 bytes. ``None`` for data that is not plain (only documents'
    dicts are kept)."""
    if type(item) is not dict:
        return None
    try:
        return hashlib.blake2b(repr(item).encode("utf-8", "surrogatepass"), digest_size=15).digest()
    except (ValueError, RecursionError):  # an integer too long to print, data too deep: read it as it is
        return None


_SHARED_FROM = 16
"""Documents of this many tenants or more share every tenant they can (:func:`tenants_to_share`)."""
_SMALLER = 16


def tenants_to_share(items: Sequence[Any]) -> Known:
    """What a document of these tenants' ``items`` looks them up in: the tenants of the
    policies alive (:func:`live_tenants`). A document of fewer than 16 tenants that is also
    16 times smaller than the largest policy alive is read afresh instead: indexing the policies
    would cost more than reading it (one tenant beside 100,000: 25 ms against 0.05), and an engine
    keeps the state of an equal tenant read afresh all the same."""
    # A document being read is counted as far as the answer needs.
    document_tenants = items.available(_SHARED_FROM) if isinstance(items, _core.YamlStream) else len(items)
    if document_tenants < _SHARED_FROM and document_tenants * _SMALLER < max((len(p.tenants) for p in list(_LIVE.values())), default=0):
        return {}
    return live_tenants()


def live_tenants() -> Known:
    """The tenants of every policy alive, by the settings of that policy and the digest of what
    they were read from. Policies edited from one another share most of their chunks of
    tenants, which are visited once for each of their settings."""
    found: Known = {}
    seen: set[tuple[int, Settings]] = set()
    for policy in list(_LIVE.values()):
        settings: Settings = (policy.largest_frame, policy.port)
        index = found.setdefault(settings, {})
        for chunk in policy._tenants.chunks:
            if (id(chunk), settings) not in seen:
                seen.add((id(chunk), settings))
                index.update((digest, t) for t in chunk if (digest := source_digest(t)) is not None)
    return found


def source_digest(tenant: Tenant) -> bytes | None:
    """The digest of the data ``tenant`` was read from, if it was read from plain data."""
    source = tenant._source
    return source[0] if isinstance(source, tuple) else source


def read_tenant(
    ck: _Checker,
    item: Any,
    path: str,
    known: Known,
    digest: bytes | None = None,
    plain_rules: PlainRules | None = None,
) -> Tenant | None:
    """``ck.tenant(item, path)``, or the tenant in ``known`` read before from equal data under
    equal settings, its warnings reported again at ``path``; or one read under other settings,
    if reading ``item`` gives an equal tenant with the same warnings. ``digest``: its
    :func:`source_key`, and ``plain_rules``: what makes its plainly valid rules, if the YAML
    reader read them already."""
    key = digest or source_key(item)
    if key is None:
        return ck.tenant(item, path, plain_rules)
    settings = settings_of(ck)
    index = known.get(settings)
    tenant = index.get(key) if index is not None else None
    if tenant is not None:
        ck.warnings.extend(warnings_at(tenant, path))
        return tenant
    errors, warnings = len(ck.errors), len(ck.warnings)
    tenant = ck.tenant(item, path, plain_rules)
    if tenant is None or len(ck.errors) > errors:
        return tenant
    warned = tuple(ck.warnings[warnings:])
    for other, index in known.items():
        earlier = index.get(key) if other != settings else None
        if earlier is not None and earlier == tenant and warnings_at(earlier, path) == warned:
            return earlier
    object.__setattr__(tenant, "_source", (key, path, warned) if warned else key)
    return tenant


def warnings_at(tenant: Tenant, path: str) -> tuple[str, ...]:
    """What reading ``tenant`` warned, as if it had been read at ``path``."""
    source = tenant._source
    if not isinstance(source, tuple):
        return ()
    _, read_at, found = source
    return tuple(path + w[len(read_at) :] if w.startswith(read_at) else w for w in found)
