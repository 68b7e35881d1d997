"""The VXLAN devices of a namespace, and a policy skeleton with one tenant per VNI
(``isolane linux discover``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from isolane.linux.netlink import open_netns


@dataclass(frozen=True)
class VxlanDevice:
    """A vxlan device: its VNI, UDP port, local and remote addresses (remote: the group or
    unicast peer; None when learned from the FDB), underlay device (None when not bound to one)
    and MTU."""

    name: str
    vni: int
    udp_port: int
    local: str | None
    remote: str | None
    underlay: str | None
    mtu: int


def discover_vxlan(netns: str | None = None) -> list[VxlanDevice]:
    """The vxlan devices of ``netns`` (this process's namespace for None), by name."""
    with open_netns(netns) as ipr:
        links = list(ipr.get_links())
    names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in links}
    found = []
    for link in links:
        info = link.get_attr("IFLA_LINKINFO")
        if info is None or info.get_attr("IFLA_INFO_KIND") != "vxlan":
            continue
        data = info.get_attr("IFLA_INFO_DATA")
        underlay = data.get_attr("IFLA_VXLAN_LINK")
        found.append(
            VxlanDevice(
                name=link.get_attr("IFLA_IFNAME"),
                vni=data.get_attr("IFLA_VXLAN_ID"),
                udp_port=data.get_attr("IFLA_VXLAN_PORT"),
                local=_first(data, "IFLA_VXLAN_LOCAL", "IFLA_VXLAN_LOCAL6"),
                remote=_first(data, "IFLA_VXLAN_GROUP", "IFLA_VXLAN_GROUP6"),
                underlay=names.get(underlay) if underlay else None,
                mtu=link.get_attr("IFLA_MTU"),
            )
        )
    return sorted(found, key=lambda d: d.name)


def _first(data: Any, *keys: str) -> str | None:
    for key in keys:
        value = data.get_attr(key)
        if value:
            return str(value)
    return None


def policy_skeleton(devices: list[VxlanDevice]) -> str:
    """A policy (YAML) with one tenant per VNI, named ``vni-N``, its devices in the description;
    the UDP ports and underlay devices as comments (``isolane linux apply`` takes them as options)."""
    by_vni: dict[int, list[VxlanDevice]] = {}
    for device in devices:
        by_vni.setdefault(device.vni, []).append(device)
    ports = sorted({d.udp_port for d in devices})
    underlays = sorted({d.underlay for d in devices if d.underlay})
    lines = ["# made by isolane linux discover: one tenant per VNI; add rates, ceilings and classes (docs/policy.md)"]
    if ports:
        lines.append(f"# VXLAN UDP ports: {', '.join(map(str, ports))} (isolane linux apply --vxlan-port)")
    if underlays:
        lines.append(f"# underlay devices: {', '.join(underlays)} (isolane linux apply --dev)")
    lines.append("tenants:" if by_vni else "tenants: []")
    for vni, members in sorted(by_vni.items()):
        description = "; ".join(_describe(d) for d in members)
        lines += [f"  - name: vni-{vni}", f"    description: {json.dumps(description)}", f"    vnis: [{vni}]"]
    return "\n".join(lines) + "\n"


def _describe(device: VxlanDevice) -> str:
    via = f" via {device.underlay}" if device.underlay else ""
    return f"{device.name}: {device.local or 'any'} -> {device.remote or 'learned'} port {device.udp_port}{via}, mtu {device.mtu}"
