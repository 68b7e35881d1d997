"""An HTB plan as ``tc`` commands (``isolane linux apply --dry-run``): run in order on a device
with its default qdisc, they build exactly the classes and filters :func:`~isolane.linux.apply.apply_plan`
makes (the same rates, bursts in ticks, priorities and u32 keys)."""

from __future__ import annotations

from isolane.linux.htb import DEFAULT_MINOR, ROOT_HANDLE, HtbPlan, format_handle
from isolane.linux.u32 import ETH_P_IP

_PROTOCOL_NAME = {ETH_P_IP: "ip"}


def tc_commands(plan: HtbPlan, dev: str, netns: str | None = None) -> list[str]:
    """The commands, one per line: the root qdisc, the classes (parents first), the filters."""
    tc = f"tc -n {netns}" if netns else "tc"
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
