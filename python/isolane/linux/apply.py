"""Pushing an HTB plan into the kernel and taking it out again (``isolane linux apply`` and
``remove``).

Apply compares what the device has with the plan and changes only what differs, so a second
identical apply changes nothing. The HTB root qdisc stays once made (the kernel cannot replace an
HTB root in place); classes are added, changed or deleted, filters added or deleted. Every change
is recorded with its inverse; when one fails, the recorded ones are undone in reverse order, so
the device is left as it was (netlink has no transaction across messages; :mod:`isolane.linux.transaction`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from isolane.linux.htb import DEFAULT_MINOR, ROOT_HANDLE, HtbClass, HtbPlan, format_handle
from isolane.linux.netlink import (
    CREATE,
    NLM_F_CREATE,
    NLM_F_REPLACE,
    RTM_DELQDISC,
    RTM_DELTCLASS,
    RTM_DELTFILTER,
    RTM_NEWQDISC,
    RTM_NEWTCLASS,
    RTM_NEWTFILTER,
    KernelClass,
    KernelFilter,
    LinuxError,
    class_delete_message,
    filter_delete_message,
    htb_class_message,
    htb_classes,
    link_index,
    open_netns,
    qdisc_message,
    request,
    root_delete_message,
    root_qdisc,
    u32_filters,
    u32_message,
)
from isolane.linux.probe import APPLY_NEEDS, probe_features
from isolane.linux.transaction import Transaction, remove_command, transaction
from isolane.linux.u32 import U32Filter


def apply_plan(plan: HtbPlan, dev: str, netns: str | None = None, *, probe: bool = True) -> list[str]:
    """Makes ``dev``'s root an HTB tree equal to ``plan``; returns the changes made, one line
    each (none when the device already had it). First probes the kernel (unless ``probe`` is
    False) and raises :class:`LinuxError` naming what it lacks, before changing anything. On a
    failure the changes made are undone and the error is raised; if undoing fails too,
    :class:`~isolane.linux.transaction.RollbackFailed` says what is left and how to clean up."""
    if probe:
        probe_features(netns).require(APPLY_NEEDS, f"apply an HTB tree to {dev}")
    with open_netns(netns) as ipr, transaction(ipr, lambda failed_dev: remove_command(failed_dev, netns)) as tx:
        tx.dev, tx.index = dev, link_index(ipr, dev)
        _ensure_root(tx, dev)
        _sync(tx, plan)
        return tx.done


def remove(dev: str, netns: str | None = None) -> bool:
    """Deletes isolane's HTB root from ``dev``, which takes its default qdisc again; True if
    there was one to delete (so a second remove is a no-op). Any other root qdisc is left alone."""
    with open_netns(netns) as ipr:
        index = link_index(ipr, dev)
        if root_qdisc(ipr, index) != ("htb", ROOT_HANDLE, DEFAULT_MINOR):
            return False
        request(ipr, root_delete_message(index, ROOT_HANDLE, "htb"), RTM_DELQDISC, 0, f"deleting the HTB root of {dev}")
        return True


def _ensure_root(tx: Transaction, dev: str) -> None:
    kind, root, default = root_qdisc(tx.ipr, tx.index)
    if (kind, root, default) == ("htb", ROOT_HANDLE, DEFAULT_MINOR):
        return
    if kind == "htb":
        raise LinuxError(f"{dev} has an HTB root that isolane did not make ({format_handle(root)} default {default or 0:x}): remove it first")
    if root:  # not the device's default qdisc (handle 0:): deleting isolane's root on a rollback would not bring it back
        raise LinuxError(f"{dev} has a root qdisc that isolane did not make ({kind} {format_handle(root)}): remove it first")
    tx.change(
        f"replace the root qdisc ({kind or 'none'}) of {dev} with HTB 1: default {DEFAULT_MINOR:x}",
        lambda: qdisc_message(tx.index, DEFAULT_MINOR),
        RTM_NEWQDISC,
        NLM_F_CREATE | NLM_F_REPLACE,
        (f"deleting the HTB root of {dev}", lambda: root_delete_message(tx.index, ROOT_HANDLE, "htb"), RTM_DELQDISC, 0),
    )


def as_kernel(cls: HtbClass) -> KernelClass:
    """A planned class as the kernel will report it."""
    return KernelClass(cls.classid, cls.parent, cls.rate, cls.ceil, cls.buffer, cls.cbuffer, cls.prio, cls.overhead)


def as_kernel_filter(planned: U32Filter) -> KernelFilter:
    """A planned filter as the kernel will report it (but for its handle)."""
    return KernelFilter(planned.parent or ROOT_HANDLE, planned.prio, planned.protocol, planned.keys, planned.classid)


def device_filters(ipr: Any, index: int, classes: list[KernelClass]) -> list[KernelFilter]:
    """The u32 filters of the root and of every inner class (HTB runs no leaf's filters)."""
    inner = {k.parent for k in classes} & {k.classid for k in classes}
    return [f for parent in (ROOT_HANDLE, *sorted(inner)) for f in u32_filters(ipr, index, parent)]


def _sync(tx: Transaction, plan: HtbPlan) -> None:
    """Filters out first (a class a filter points to cannot be deleted), then stale classes
    (children first), then classes in (parents first), then filters in."""
    index = tx.index
    existing = {k.classid: k for k, _ in htb_classes(tx.ipr, index)}
    wanted = {c.classid: as_kernel(c) for c in plan.classes}
    wanted_filters = Counter(as_kernel_filter(f).same_as() for f in plan.filters)
    for kernel_filter in device_filters(tx.ipr, index, list(existing.values())):
        key = kernel_filter.same_as()
        if wanted_filters[key] > 0:
            wanted_filters[key] -= 1
        else:
            _delete_filter(tx, kernel_filter)
    stale = [k for k in existing.values() if k.classid not in wanted or wanted[k.classid].parent != k.parent]
    for kernel_class in sorted(stale, key=lambda k: -_depth(k, existing)):
        _delete_class(tx, kernel_class)
    kept = {k.classid: k for k in existing.values() if k not in stale}
    for cls in plan.classes:
        _put_class(tx, wanted[cls.classid], kept.get(cls.classid))
    for f in plan.filters:
        key = as_kernel_filter(f).same_as()
        if wanted_filters[key] > 0:
            wanted_filters[key] -= 1
            _add_filter(tx, f)


def _depth(cls: KernelClass, classes: dict[int, KernelClass]) -> int:
    depth, parent = 0, cls.parent
    while parent in classes and depth < 16:
        depth, parent = depth + 1, classes[parent].parent
    return depth


def _put_class(tx: Transaction, want: KernelClass, have: KernelClass | None) -> None:
    name = format_handle(want.classid)
    if have is None:
        inverse = (f"deleting class {name}", lambda: class_delete_message(tx.index, want.classid, want.parent), RTM_DELTCLASS, 0)
        tx.change(f"add class {name}", lambda: htb_class_message(tx.index, want), RTM_NEWTCLASS, CREATE, inverse)
    elif have != want:
        inverse = (f"restoring class {name}", lambda: htb_class_message(tx.index, have), RTM_NEWTCLASS, 0)
        tx.change(f"change class {name}", lambda: htb_class_message(tx.index, want), RTM_NEWTCLASS, 0, inverse)


def _delete_class(tx: Transaction, have: KernelClass) -> None:
    name = format_handle(have.classid)
    inverse = (f"restoring class {name}", lambda: htb_class_message(tx.index, have), RTM_NEWTCLASS, CREATE)
    tx.change(f"delete class {name}", lambda: class_delete_message(tx.index, have.classid, have.parent), RTM_DELTCLASS, 0, inverse)


def _add_filter(tx: Transaction, planned: U32Filter) -> None:
    owner = f" ({planned.tenant})" if planned.tenant else ""
    doing = f"add u32 filter: {planned.label} to {format_handle(planned.classid)}{owner}"
    want = as_kernel_filter(planned)
    tx.change(
        doing,
        lambda: u32_message(tx.index, want.parent, want.prio, want.protocol, want.keys, want.classid),
        RTM_NEWTFILTER,
        CREATE,
        (f"deleting a u32 filter prio {want.prio}", lambda: _added_filter_delete(tx, want), RTM_DELTFILTER, 0),
    )


def _added_filter_delete(tx: Transaction, want: KernelFilter) -> Any:
    """The delete request for a filter added earlier (the kernel chose its handle)."""
    for have in u32_filters(tx.ipr, tx.index, want.parent):
        if have.same_as() == want.same_as():
            return filter_delete_message(tx.index, have.parent, have.prio, have.protocol, have.handle)
    raise LinuxError(f"the u32 filter prio {want.prio} to {format_handle(want.classid)} is gone")


def _delete_filter(tx: Transaction, have: KernelFilter) -> None:
    tx.change(
        f"delete u32 filter prio {have.prio} to {format_handle(have.classid)}",
        lambda: filter_delete_message(tx.index, have.parent, have.prio, have.protocol, have.handle),
        RTM_DELTFILTER,
        0,
        ("restoring a u32 filter", lambda: u32_message(tx.index, have.parent, have.prio, have.protocol, have.keys, have.classid), RTM_NEWTFILTER, CREATE),
    )
