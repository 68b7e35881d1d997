"""What the kernel offers, found by trying (``isolane linux probe``): each feature is created and
deleted in a scratch namespace, because a kernel without loadable modules has only what was
built in, and no configuration file says which."""

from __future__ import annotations

import errno
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from isolane.linux.htb import ROOT_HANDLE
from isolane.linux.netlink import (
    CREATE,
    RTM_DELQDISC,
    RTM_NEWTFILTER,
    LinuxError,
    link_index,
    open_netns,
    pyroute2_module,
    request,
    root_delete_message,
    u32_message,
)
from isolane.linux.u32 import ETH_P_IP

ETH_P_ALL = 0x0003
CLSACT_EGRESS = 0xFFFF_FFF3
FEATURES = ("veth", "vxlan", "htb", "tbf", "u32", "clsact", "mirred", "af_packet")
"""What isolane's Linux integration uses: veth and vxlan for tests and discovery, HTB and u32 for
``apply``, TBF for ``apply --mode tbf``, clsact and mirred for later enforcement paths, AF_PACKET for live capture."""
APPLY_NEEDS = ("htb", "u32")
TBF_NEEDS = ("tbf",)


@dataclass(frozen=True)
class Feature:
    """One probed feature: available, or why not (the kernel's error, or what it needed first)."""

    name: str
    available: bool
    reason: str = ""


@dataclass(frozen=True)
class Features:
    """The probe's findings, by :data:`FEATURES` name."""

    features: dict[str, Feature]

    def missing(self, needs: Iterable[str]) -> list[str]:
        """One line per needed feature that is not there, saying why."""
        return [f"{name}: {self.features[name].reason}" for name in needs if not self.features[name].available]

    def require(self, needs: Iterable[str], doing: str) -> None:
        """Raises :class:`LinuxError` naming every missing feature, before anything is changed."""
        missing = self.missing(needs)
        if missing:
            raise LinuxError(f"cannot {doing}: " + "; ".join(missing))

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {name: {"available": f.available, "reason": f.reason or None} for name, f in self.features.items()}

    def __str__(self) -> str:
        return "\n".join(f"{f.name:<10} {'yes' if f.available else 'no':<4} {f.reason}".rstrip() for f in self.features.values())


def probe_features(netns: str | None = None) -> Features:
    """Tries each of :data:`FEATURES` in a scratch namespace (made and deleted here; the namespace
    ``netns`` is only checked to exist, never changed)."""
    pyroute2 = pyroute2_module()
    if netns is not None:
        with open_netns(netns):
            pass
    scratch = f"isolane-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        pyroute2.netns.create(scratch)
    except OSError as err:
        reason = f"not probed: cannot make a scratch namespace ({err.strerror or err}; it takes root)"
        return Features({name: Feature(name, False, reason) for name in FEATURES} | {"af_packet": _probe_af_packet()})
    try:
        with open_netns(scratch) as ipr:
            found = _probe_in(ipr)
    finally:
        pyroute2.netns.remove(scratch)
    found["af_packet"] = _probe_af_packet()
    return Features({name: found[name] for name in FEATURES})


def _probe_in(ipr: Any) -> dict[str, Feature]:
    found: dict[str, Feature] = {}

    def attempt(name: str, action: Callable[[], object], needs: tuple[str, ...] = ()) -> None:
        absent = [need for need in needs if not found[need].available]
        if absent:
            found[name] = Feature(name, False, f"not probed: needs {', '.join(absent)}")
            return
        try:
            action()
            found[name] = Feature(name, True)
        except Exception as err:  # the kernel's refusal, whatever pyroute2 wraps it in
            found[name] = Feature(name, False, _reason(err))

    # qdiscs, filters and actions are tried on the namespace's own lo, so that they do not depend on veth
    lo = link_index(ipr, "lo")
    ipr.link("set", index=lo, state="up")
    attempt("veth", lambda: ipr.link("add", ifname="probe0", kind="veth", peer="probe1"))
    attempt("vxlan", lambda: _add_and_delete_vxlan(ipr))
    attempt("tbf", lambda: _add_and_delete_tbf(ipr, lo))
    attempt("htb", lambda: ipr.tc("add", "htb", lo, ROOT_HANDLE, default=0xFFFF))
    u32 = u32_message(lo, ROOT_HANDLE, 1, ETH_P_IP, ((0, 0, 0),), ROOT_HANDLE | 1)
    attempt("u32", lambda: request(ipr, u32, RTM_NEWTFILTER, CREATE, "adding a u32 filter"), ("htb",))
    attempt("clsact", lambda: ipr.tc("add", "clsact", lo))
    mirred = {"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": lo}
    attempt(
        "mirred",
        lambda: ipr.tc("add-filter", "u32", lo, parent=CLSACT_EGRESS, prio=1, protocol=ETH_P_ALL, target=0, keys=["0x0/0x0+0"], action=mirred),
        ("clsact", "u32"),
    )
    return found


def _add_and_delete_tbf(ipr: Any, index: int) -> None:
    ipr.tc("add", "tbf", index, ROOT_HANDLE, rate="1mbit", burst=16384, latency=50000)
    request(ipr, root_delete_message(index, ROOT_HANDLE, "tbf"), RTM_DELQDISC, 0, "deleting the TBF root")


def _add_and_delete_vxlan(ipr: Any) -> None:
    ipr.link("add", ifname="probevx", kind="vxlan", vxlan_id=42, vxlan_port=4789)
    ipr.link("del", index=link_index(ipr, "probevx"))


def _probe_af_packet() -> Feature:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)).close()
        return Feature("af_packet", True)
    except OSError as err:
        return Feature("af_packet", False, _reason(err))


def _reason(err: BaseException) -> str:
    """Why a probe failed. On the scratch namespace's lo, "no such file" can only mean an unknown
    qdisc, filter or action kind, and "not supported" an unknown device kind."""
    code = getattr(err, "code", None) or getattr(err, "errno", None)
    if code in (errno.ENOENT, errno.EOPNOTSUPP):
        return f"not built into this kernel ({os.strerror(code)})"
    return os.strerror(code) if isinstance(code, int) else str(err)
