"""A plan as ``tc`` commands (``isolane linux apply --dry-run``): run in order on devices with
their default qdisc, an HTB plan's build exactly the classes and filters :func:`~isolane.linux.apply.apply_plan`
makes (the same rates, bursts in ticks, priorities and u32 keys), a TBF plan's exactly the TBF
roots :func:`~isolane.linux.tbf_apply.apply_tbf` makes (the same rates, buffers in ticks, limits
and overheads)."""

from __future__ import annotations

from isolane.linux.htb import DEFAULT_MINOR, ROOT_HANDLE, HtbPlan, format_handle
from isolane.linux.tbf import TBF_HANDLE, TbfPlan
from isolane.linux.u32 import ETH_P_IP

_PROTOCOL_NAME = {ETH_P_IP: "ip"}


def _tc(netns: str | None) -> str:
    return f"tc -n {netns}" if netns else "tc"


def tc_commands(plan: HtbPlan, dev: str, netns: str | None = None) -> list[str]:
    """The commands, one per line: the root qdisc, the classes (parents first), the filters."""
    tc = _tc(netns)
    lines = [f"{tc} qdisc replace dev {dev} root handle {format_handle(ROOT_HANDLE)} htb default {DEFAULT_MINOR:x}"]
    for c in plan.classes:
        lines.append(
            f"{tc} class add dev {dev} parent {format_handle(c.parent)} classid {format_handle(c.classid)} htb"
            f" rate {c.rate * 8}bit ceil {c.ceil * 8}bit burst {c.burst}b cburst {c.cburst}b prio {c.prio}" + (f" overhead {c.overhead}" if c.overhead else "")
        )
    for f in plan.filters:
        matches = " ".join(f"match u32 0x{value:08x} 0x{mask:08x} at {offset}" for value, mask, offset in f.keys)
        protocol = _PROTOCOL_NAME.get(f.protocol, "ipv6")
        parent = format_handle(f.parent or ROOT_HANDLE)
        lines.append(f"{tc} filter add dev {dev} parent {parent} protocol {protocol} prio {f.prio} u32 {matches} flowid {format_handle(f.classid)}")
    return lines


def tbf_tc_commands(plan: TbfPlan, netns: str | None = None) -> list[str]:
    """One command per planned device: its TBF root (tc turns the burst into the same ticks as the kernel does for apply)."""
    return [
        f"{_tc(netns)} qdisc replace dev {q.dev} root handle {format_handle(TBF_HANDLE)} tbf rate {q.rate * 8}bit burst {q.burst}b limit {q.limit}b"
        + (f" overhead {q.overhead}" if q.overhead else "")
        for q in plan.qdiscs
    ]
