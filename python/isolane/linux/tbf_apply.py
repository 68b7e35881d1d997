"""Pushing a TBF plan into the kernel and taking it out again (``isolane linux apply --mode tbf``
and ``remove --mode tbf``).

Apply reads the root qdisc of every vxlan device first: a root isolane did not make on a device
the plan wants (other than the device's default qdisc, which has no handle) is an error, and
nothing changes. Then, device by device, it replaces the default qdisc with the TBF root, changes
isolane's TBF root in place where its parameters differ, leaves it where they are equal (so a
second identical apply changes nothing), and deletes isolane's TBF root from the devices the plan
no longer has. All of it is one transaction (:mod:`isolane.linux.transaction`): on a failure
every device is put back as it was (a changed TBF root gets its old rate, buffer in ticks, limit
and overhead back exactly)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

from isolane.linux.discover import discover_vxlan
from isolane.linux.htb import format_handle
from isolane.linux.netlink import (
    NLM_F_CREATE,
    NLM_F_REPLACE,
    RTM_DELQDISC,
    RTM_NEWQDISC,
    KernelTbf,
    LinuxError,
    link_index,
    open_netns,
    request,
    root_delete_message,
    root_message,
    tbf_message,
    tbf_of,
)
from isolane.linux.probe import TBF_NEEDS, probe_features
from isolane.linux.tbf import TBF_HANDLE, TbfPlan, TbfQdisc
from isolane.linux.transaction import Transaction, remove_command, transaction


class _Root(NamedTuple):
    """A device's root qdisc: ``kind`` "" when it has none; ``tbf`` its parameters when it is isolane's."""

    ifindex: int
    kind: str
    handle: int
    tbf: KernelTbf | None

    def describe(self) -> str:
        return f"{self.kind or 'none'} {format_handle(self.handle)}" if self.handle else self.kind or "none"


def apply_tbf(plan: TbfPlan, netns: str | None = None, *, probe: bool = True) -> list[str]:
    """Makes each planned device's root the TBF qdisc of ``plan`` and deletes isolane's TBF root
    from the other vxlan devices the plan names; returns the changes made, one line each (none
    when the devices already had it). First probes the kernel (unless ``probe`` is False). On a
    failure every device is put back as it was and the error is raised; if that fails too,
    :class:`~isolane.linux.transaction.RollbackFailed` says which devices and how to clean up."""
    if probe:
        probe_features(netns).require(TBF_NEEDS, "apply TBF to the tenants' vxlan devices")
    with open_netns(netns) as ipr:
        roots = {dev: _read_root(ipr, dev) for dev in plan.devices()}
        foreign = [f"{q.dev} ({roots[q.dev].describe()})" for q in plan.qdiscs if roots[q.dev].handle and roots[q.dev].tbf is None]
        if foreign:
            raise LinuxError(f"root qdiscs isolane did not make: {', '.join(foreign)}: remove them first (nothing was changed)")
        with transaction(ipr, lambda dev: remove_command(dev, netns, "tbf")) as tx:
            for qdisc in plan.qdiscs:
                _put(tx, qdisc, roots[qdisc.dev])
            for dev in plan.unclaimed:
                stale = roots[dev].tbf
                if stale is not None:
                    _delete(tx, dev, roots[dev].ifindex, stale)
            return tx.done


def remove_tbf(devices: Sequence[str] | None = None, netns: str | None = None) -> list[str]:
    """Deletes isolane's TBF root from ``devices`` (by default every vxlan device of ``netns``),
    which take their default qdisc again; returns the devices it was deleted from (none on a
    second remove). Any other root qdisc is left alone."""
    names = [d.name for d in discover_vxlan(netns)] if devices is None else list(devices)
    removed = []
    with open_netns(netns) as ipr:
        for dev in names:
            root = _read_root(ipr, dev)
            if root.tbf is not None:
                request(ipr, root_delete_message(root.ifindex, TBF_HANDLE, "tbf"), RTM_DELQDISC, 0, f"deleting the TBF root of {dev}")
                removed.append(dev)
    return removed


def read_tbf(ipr: Any, dev: str) -> KernelTbf | None:
    """The parameters of ``dev``'s TBF root if isolane's (kind tbf, handle ``1:``), else None."""
    return _read_root(ipr, dev).tbf


def _read_root(ipr: Any, dev: str) -> _Root:
    index = link_index(ipr, dev)
    message = root_message(ipr, index)
    if message is None:
        return _Root(index, "", 0, None)
    kind, handle = message.get_attr("TCA_KIND"), int(message["handle"])
    return _Root(index, kind, handle, tbf_of(message) if (kind, handle) == ("tbf", TBF_HANDLE) else None)


def _put(tx: Transaction, qdisc: TbfQdisc, root: _Root) -> None:
    want, dev, index = qdisc.as_kernel(), qdisc.dev, root.ifindex
    settings = f"rate {want.rate * 8:,} bit/s burst {qdisc.burst:,} B limit {want.limit:,} B overhead {want.overhead} B ({qdisc.tenant_name}, VNI {qdisc.vni})"
    build = partial(tbf_message, index, TBF_HANDLE, want, qdisc.burst)
    if root.tbf is None:
        inverse = (f"deleting the TBF root of {dev}", lambda: root_delete_message(index, TBF_HANDLE, "tbf"), RTM_DELQDISC, 0)
        doing = f"replace the root qdisc ({root.describe()}) of {dev} with TBF 1: {settings}"
        tx.change(doing, build, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE, inverse, dev)
    elif root.tbf != want:
        have = root.tbf
        inverse = (f"restoring the TBF root of {dev}", lambda: tbf_message(index, TBF_HANDLE, have, None), RTM_NEWQDISC, 0)
        tx.change(f"change the TBF root of {dev}: {settings}", build, RTM_NEWQDISC, 0, inverse, dev)


def _delete(tx: Transaction, dev: str, index: int, have: KernelTbf) -> None:
    """Deletes isolane's TBF root from a device no tenant of the plan has (any more)."""
    inverse = (f"restoring the TBF root of {dev}", lambda: tbf_message(index, TBF_HANDLE, have, None), RTM_NEWQDISC, NLM_F_CREATE | NLM_F_REPLACE)
    tx.change(f"delete the TBF root of {dev} (no tenant's)", lambda: root_delete_message(index, TBF_HANDLE, "tbf"), RTM_DELQDISC, 0, inverse, dev)
