"""Tenants read once: a tenant read from equal data under equal policy-wide settings is the same
:class:`~isolane.policy.Tenant` object, so policies made from documents that share tenants share
them, and what is compiled from a tenant (kept on it) is compiled once. An engine updated to such
a policy recognises the tenants it already runs by identity."""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

from isolane.policy.model import Tenant
from isolane.policy.validate import _Checker

_READ: weakref.WeakValueDictionary[bytes, Tenant] = weakref.WeakValueDictionary()
"""A digest of (settings, source text) -> the tenant read from it, while some policy holds it."""


def _source_key(ck: _Checker, item: Any) -> bytes | None:
    """A digest of what a tenant's reading depends on: its data, as its ``repr`` spells it
    (which tells ``1`` from ``1.0`` and ``True``, and keeps the order of keys), and the
    policy-wide settings the checker reads (a 160-bit digest rather than the text: a tenant's
    key stays small). ``None`` for data that is not plain (only documents' dicts are kept)."""
    if type(item) is not dict:
        return None
    try:
        text = repr((ck.largest_frame, ck.egress, item))
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest()
    except (ValueError, RecursionError):  # an integer too long to print, data too deep: read it as it is
        return None


def read_tenant(ck: _Checker, item: Any, path: str) -> Tenant | None:
    """``ck.tenant(item, path)``, or the tenant read before from equal data, its warnings
    reported again at ``path``."""
    key = _source_key(ck, item)
    tenant = _READ.get(key) if key is not None else None
    if tenant is not None:
        read_at, found = tenant._read or ("", ())
        ck.warnings.extend(path + w[len(read_at) :] if w.startswith(read_at) else w for w in found)
        return tenant
    errors, warnings = len(ck.errors), len(ck.warnings)
    tenant = ck.tenant(item, path)
    if tenant is not None and key is not None and len(ck.errors) == errors:
        if len(ck.warnings) > warnings:
            object.__setattr__(tenant, "_read", (path, tuple(ck.warnings[warnings:])))
        _READ[key] = tenant
    return tenant
