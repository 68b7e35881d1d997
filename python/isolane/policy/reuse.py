"""Tenants read once: a tenant read from equal data under equal policy-wide settings is the same
:class:`~isolane.policy.Tenant` object, so policies made from documents that share tenants share
them, and what is compiled from a tenant (kept on it) is compiled once. An engine updated to such
a policy recognises the tenants it already runs by identity.

Each tenant keeps a digest of what it was read from (``Tenant._source``). Reading a document
looks its tenants up among those of the policies alive then, in an index made for that read
(:func:`live_tenants`) and dropped after it: no table beside the tenants lives as long as they do.
A document far smaller than those policies is read afresh (:func:`tenants_to_share`).
``Policy.with_tenant`` looks only at the tenant it replaces."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from isolane.policy.model import Tenant
from isolane.policy.validate import _Checker

if TYPE_CHECKING:
    from isolane.policy.policy import Policy

_LIVE: weakref.WeakValueDictionary[int, Policy] = weakref.WeakValueDictionary()
"""Every policy alive, by identity (``Policy.__post_init__`` adds each; a policy's hash would
hash every tenant)."""


def source_key(ck: _Checker, item: Any) -> bytes | None:
    """A digest of what a tenant's reading depends on: its data, as its ``repr`` spells it
    (which tells ``1`` from ``1.0`` and ``True``, and keeps the order of keys), and the
    policy-wide settings the checker reads (a 120-bit digest rather than the text: a tenant's
    key stays small, 48 bytes). ``None`` for data that is not plain (only documents' dicts are kept)."""
    if type(item) is not dict:
        return None
    try:
        text = repr((ck.largest_frame, ck.egress, item))
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=15).digest()
    except (ValueError, RecursionError):  # an integer too long to print, data too deep: read it as it is
        return None


_SHARED_FROM = 16
"""Documents of this many tenants or more share every tenant they can (:func:`tenants_to_share`)."""
_SMALLER = 16


def tenants_to_share(document_tenants: int) -> dict[bytes, Tenant]:
    """What a document of ``document_tenants`` tenants looks its tenants up in: the tenants of
    the policies alive (:func:`live_tenants`). A document of fewer than 16 tenants that is also
    16 times smaller than the largest policy alive is read afresh instead: indexing the policies
    would cost more than reading it (one tenant beside 100,000: 25 ms against 0.05), and an engine
    keeps the state of an equal tenant read afresh all the same."""
    if document_tenants < _SHARED_FROM and document_tenants * _SMALLER < max((len(p.tenants) for p in list(_LIVE.values())), default=0):
        return {}
    return live_tenants()


def live_tenants() -> dict[bytes, Tenant]:
    """The tenants of every policy alive, by the digest of what they were read from. Policies
    edited from one another share most of their chunks of tenants, which are visited once."""
    found: dict[bytes, Tenant] = {}
    seen: set[int] = set()
    for policy in list(_LIVE.values()):
        for chunk in policy._tenants.chunks:
            if id(chunk) not in seen:
                seen.add(id(chunk))
                found.update((digest, t) for t in chunk if (digest := source_digest(t)) is not None)
    return found


def source_digest(tenant: Tenant) -> bytes | None:
    """The digest of the data ``tenant`` was read from, if it was read from plain data."""
    source = tenant._source
    return source[0] if isinstance(source, tuple) else source


def read_tenant(ck: _Checker, item: Any, path: str, known: Mapping[bytes, Tenant]) -> Tenant | None:
    """``ck.tenant(item, path)``, or the tenant in ``known`` read before from equal data, its
    warnings reported again at ``path``."""
    key = source_key(ck, item)
    tenant = known.get(key) if key is not None else None
    if tenant is not None:
        source = tenant._source
        _, read_at, found = source if isinstance(source, tuple) else (key, "", ())
        ck.warnings.extend(path + w[len(read_at) :] if w.startswith(read_at) else w for w in found)
        return tenant
    errors, warnings = len(ck.errors), len(ck.warnings)
    tenant = ck.tenant(item, path)
    if tenant is not None and key is not None and len(ck.errors) == errors:
        warned = tuple(ck.warnings[warnings:])
        object.__setattr__(tenant, "_source", (key, path, warned) if warned else key)
    return tenant
