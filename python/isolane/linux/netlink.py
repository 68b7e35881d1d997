"""Netlink through pyroute2: a socket in a namespace, the tc messages isolane sends, and the
classes and filters read back as plain tuples.

Two messages are built here rather than by pyroute2's ``tc()``: u32 filters (pyroute2 re-packs
u32 keys byte by byte, moving a key to its first masked byte and, past a zero byte inside a
mask, shifting the rest of it; tc and the issue's filters use word-aligned keys) and HTB classes
(so that a class's buffers in ticks are sent as computed, and restored exactly on rollback)."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from isolane.linux.htb import ROOT_HANDLE, HtbClass
from isolane.linux.u32 import U32Key

NETNS_DIR = "/var/run/netns"
TC_H_ROOT = 0xFFFF_FFFF
# rtnetlink message types and flags (linux/rtnetlink.h, linux/netlink.h), named here so that
# modules can build requests without importing pyroute2 first
RTM_NEWQDISC, RTM_DELQDISC, RTM_NEWTCLASS, RTM_DELTCLASS, RTM_NEWTFILTER, RTM_DELTFILTER = 36, 37, 40, 41, 44, 45
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
CREATE = NLM_F_CREATE | NLM_F_EXCL
TC_U32_TERMINAL = 1
_SEL_HEADER = struct.Struct("=BBBxHHhhI")  # struct tc_u32_sel without its keys (offmask and hmask are big-endian, and 0 here)
_KEY = struct.Struct(">II")  # mask, value (big-endian), then off and offmask (host order)
_KEY_OFFSETS = struct.Struct("=ii")
_U32_OPTIONS = (
    ("TCA_U32_UNSPEC", "none"),
    ("TCA_U32_CLASSID", "uint32"),
    ("TCA_U32_HASH", "uint32"),
    ("TCA_U32_LINK", "hex"),
    ("TCA_U32_DIVISOR", "uint32"),
    ("TCA_U32_SEL", "cdata"),
)
# TBF's options with the attributes pyroute2's map lacks: the 64-bit rate and the burst in bytes
_TBF_OPTIONS = (
    ("TCA_TBF_UNSPEC", "none"),
    ("TCA_TBF_PARMS", "cdata"),
    ("TCA_TBF_RTAB", "cdata"),
    ("TCA_TBF_PTAB", "cdata"),
    ("TCA_TBF_RATE64", "uint64"),
    ("TCA_TBF_PRATE64", "uint64"),
    ("TCA_TBF_BURST", "uint32"),
)
TCA_TBF_PARMS, TCA_TBF_RATE64 = 1, 4
_TBF_QOPT = struct.Struct("=BBHhHI BBHhHI III")  # struct tc_tbf_qopt: rate and peak rate (struct tc_ratespec), limit, buffer, mtu
_NLA_HEADER = struct.Struct("=HH")
TC_LINKLAYER_ETHERNET = 1
U32_MAX = (1 << 32) - 1


class LinuxError(OSError):
    """What the kernel refused or lacks, or a namespace or device that is not there; the message
    says what isolane was doing."""


@dataclass(frozen=True)
class KernelClass:
    """An HTB class as the kernel reports it (rates in bytes per second, buffers in ticks)."""

    classid: int
    parent: int
    rate: int
    ceil: int
    buffer: int
    cbuffer: int
    prio: int
    overhead: int = 0


@dataclass(frozen=True)
class KernelTbf:
    """A TBF qdisc as the kernel reports it: rate in bytes per second, buffer in psched ticks,
    limit in bytes, overhead in bytes added to each packet before charging it."""

    rate: int
    buffer: int
    limit: int
    overhead: int


@dataclass(frozen=True)
class KernelFilter:
    """A u32 filter node as the kernel reports it, among the filters of ``parent`` (the root
    qdisc or a class); ``handle`` is the kernel's (``800::800``)."""

    parent: int
    prio: int
    protocol: int
    keys: tuple[U32Key, ...]
    classid: int
    handle: int = 0

    def same_as(self) -> tuple[int, int, int, tuple[U32Key, ...], int]:
        """What two filters must share to be the same (not the handle the kernel chose)."""
        return (self.parent, self.prio, self.protocol, self.keys, self.classid)


def pyroute2_module() -> Any:
    """pyroute2, or a :class:`LinuxError` saying how to install it."""
    try:
        import pyroute2
    except ImportError:
        raise LinuxError("isolane.linux needs pyroute2: pip install 'isolane[linux]'") from None
    return pyroute2


@contextmanager
def open_netns(netns: str | None) -> Iterator[Any]:
    """An ``IPRoute`` socket in the named namespace (``ip netns`` names), or in this process's
    own one for ``None``. A missing namespace is an error, never created."""
    pyroute2 = pyroute2_module()
    if netns is not None and not os.path.exists(os.path.join(NETNS_DIR, netns)):
        raise LinuxError(f"no network namespace {netns!r} (see ip netns list)")
    ipr = pyroute2.IPRoute(netns=netns, flags=0) if netns else pyroute2.IPRoute()
    try:
        yield ipr
    finally:
        ipr.close()


def link_index(ipr: Any, dev: str) -> int:
    found = ipr.link_lookup(ifname=dev)
    if not found:
        raise LinuxError(f"no device {dev!r} in that namespace")
    return int(found[0])


def request(ipr: Any, message: Any, msg_type: int, flags: int, doing: str) -> None:
    """Sends one tc request and waits for its acknowledgement; a refusal becomes a
    :class:`LinuxError` that says what was being done."""
    from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST
    from pyroute2.netlink.exceptions import NetlinkError

    message["header"]["type"] = msg_type
    message["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | flags
    try:
        list(ipr.nlm_request_batch([message]))
    except NetlinkError as err:
        raise LinuxError(err.code, f"{doing}: {os.strerror(err.code)}") from err


def tc_info(prio: int, protocol: int) -> int:
    """tcmsg's ``info`` of a filter: its priority and protocol (network order)."""
    return (prio << 16) | socket.htons(protocol)


def _message_with_options(nla_map: tuple[tuple[str, str], ...]) -> Any:
    """A tc message whose ``TCA_OPTIONS`` are encoded by ``nla_map`` rather than pyroute2's map for the kind."""
    from pyroute2.netlink import nla
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    options = type("_Options", (nla,), {"nla_map": nla_map})

    class _Message(tcmsg):  # type: ignore[misc]
        @staticmethod
        def get_options(self: Any, *argv: Any, **kwarg: Any) -> type:
            return options

    message = _Message()
    message.compile_nla_table()  # its own table: a subclass inherits tcmsg's compiled one, with tcmsg's options
    return message


def u32_message(index: int, parent: int, prio: int, protocol: int, keys: tuple[U32Key, ...], classid: int, filter_handle: int = 0) -> Any:
    """A u32 filter node: its keys exactly as given, terminal, to ``classid``."""
    selector = _SEL_HEADER.pack(TC_U32_TERMINAL, 0, len(keys), 0, 0, 0, 0, 0)
    selector += b"".join(_KEY.pack(mask, value) + _KEY_OFFSETS.pack(offset, 0) for value, mask, offset in keys)
    message = _message_with_options(_U32_OPTIONS)
    message["index"], message["handle"], message["parent"], message["info"] = index, filter_handle, parent, tc_info(prio, protocol)
    message["attrs"] = [["TCA_KIND", "u32"], ["TCA_OPTIONS", {"attrs": [["TCA_U32_CLASSID", classid], ["TCA_U32_SEL", selector]]}]]
    return message


def filter_delete_message(index: int, parent: int, prio: int, protocol: int, filter_handle: int) -> Any:
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    message = tcmsg()
    message["index"], message["handle"], message["parent"], message["info"] = index, filter_handle, parent, tc_info(prio, protocol)
    message["attrs"] = [["TCA_KIND", "u32"]]
    return message


def htb_class_message(index: int, cls: HtbClass | KernelClass) -> Any:
    """An HTB class with its rates (64-bit attributes above 2^32 - 1 bytes/s) and its buffers in ticks."""
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    limit = (1 << 32) - 1
    parms = {
        "rate": min(cls.rate, limit),
        "ceil": min(cls.ceil, limit),
        "buffer": cls.buffer,
        "cbuffer": cls.cbuffer,
        "prio": cls.prio,
        "quantum": 0,
        "rate_overhead": cls.overhead,
        "ceil_overhead": cls.overhead,
        "rate_mpu": 0,
        "ceil_mpu": 0,
    }
    options: list[list[Any]] = [["TCA_HTB_PARMS", parms], ["TCA_HTB_RTAB", True], ["TCA_HTB_CTAB", True]]
    if cls.rate > limit:
        options.append(["TCA_HTB_RATE64", cls.rate])
    if cls.ceil > limit:
        options.append(["TCA_HTB_CEIL64", cls.ceil])
    message = tcmsg()
    message["index"], message["handle"], message["parent"] = index, cls.classid, cls.parent
    message["attrs"] = [["TCA_KIND", "htb"], ["TCA_OPTIONS", {"attrs": options}]]
    return message


def qdisc_message(index: int, default: int) -> Any:
    """The HTB root ``1:`` with its ``default`` class minor (r2q 10, version 3, as tc makes it)."""
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    message = tcmsg()
    message["index"], message["parent"], message["handle"] = index, TC_H_ROOT, ROOT_HANDLE
    init = {"version": 3, "rate2quantum": 10, "defcls": default, "debug": 0, "direct_pkts": 0}
    message["attrs"] = [["TCA_KIND", "htb"], ["TCA_OPTIONS", {"attrs": [["TCA_HTB_INIT", init]]}]]
    return message


def class_delete_message(index: int, classid: int, parent: int) -> Any:
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    message = tcmsg()
    message["index"], message["handle"], message["parent"] = index, classid, parent
    return message


def root_delete_message(index: int, handle: int, kind: str) -> Any:
    """A request to delete the root qdisc if it is still ``kind`` with ``handle`` (the kernel refuses otherwise)."""
    from pyroute2.netlink.rtnl.tcmsg import tcmsg

    message = tcmsg()
    message["index"], message["handle"], message["parent"] = index, handle, TC_H_ROOT
    message["attrs"] = [["TCA_KIND", kind]]
    return message


def root_message(ipr: Any, index: int) -> Any:
    """The device's root qdisc as pyroute2 reads it (its counters too), or None."""
    return next((qdisc for qdisc in ipr.get_qdiscs(index) if qdisc["parent"] == TC_H_ROOT), None)


def root_qdisc(ipr: Any, index: int) -> tuple[str, int, int | None]:
    """The root qdisc's kind, handle and, for HTB, its default class minor."""
    qdisc = root_message(ipr, index)
    if qdisc is None:
        return "", 0, None
    kind = qdisc.get_attr("TCA_KIND")
    default = qdisc.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_INIT")["defcls"] if kind == "htb" else None
    return kind, int(qdisc["handle"]), default


def tbf_message(index: int, handle: int, tbf: KernelTbf, burst: int | None) -> Any:
    """A TBF root, made or changed in place: with ``burst`` (bytes) as tc makes it (the kernel
    computes the buffer from the burst and the overhead), with None from ``tbf.buffer`` in ticks
    exactly (to put back a qdisc as it was read). The rate goes in the 64-bit attribute above
    2^32 - 1 bytes/s (pyroute2's TBF has none, and no burst attribute)."""
    parms = _TBF_QOPT.pack(0, TC_LINKLAYER_ETHERNET, tbf.overhead, 0, 0, min(tbf.rate, U32_MAX), 0, 0, 0, 0, 0, 0, tbf.limit, tbf.buffer, 0)
    options: list[list[Any]] = [["TCA_TBF_PARMS", parms]]
    if burst is not None:
        options.append(["TCA_TBF_BURST", burst])
    if tbf.rate > U32_MAX:
        options.append(["TCA_TBF_RATE64", tbf.rate])
    message = _message_with_options(_TBF_OPTIONS)
    message["index"], message["handle"], message["parent"] = index, handle, TC_H_ROOT
    message["attrs"] = [["TCA_KIND", "tbf"], ["TCA_OPTIONS", {"attrs": options}]]
    return message


def tbf_of(qdisc: Any) -> KernelTbf:
    """A TBF qdisc's parameters, from its options' bytes (pyroute2 does not decode the 64-bit rate)."""
    options = qdisc.get_attr("TCA_OPTIONS")
    raw = bytes(options.data[options.offset + _NLA_HEADER.size : options.offset + options.length])
    attributes, position = {}, 0
    while position + _NLA_HEADER.size <= len(raw):
        length, kind = _NLA_HEADER.unpack_from(raw, position)
        attributes[kind & 0x3FFF] = raw[position + _NLA_HEADER.size : position + length]
        position += (length + 3) & ~3
    fields = _TBF_QOPT.unpack(attributes[TCA_TBF_PARMS][: _TBF_QOPT.size])
    overhead, rate, limit, buffer = fields[2], fields[5], fields[12], fields[13]
    if TCA_TBF_RATE64 in attributes:
        rate = struct.unpack("=Q", attributes[TCA_TBF_RATE64][:8])[0]
    return KernelTbf(rate, buffer, limit, overhead)


def htb_classes(ipr: Any, index: int) -> list[tuple[KernelClass, Any]]:
    """The device's HTB classes, each with its raw message (for its counters)."""
    out = []
    for message in ipr.get_classes(index):
        if message.get_attr("TCA_KIND") != "htb":
            continue
        options = message.get_attr("TCA_OPTIONS")
        parms = options.get_attr("TCA_HTB_PARMS")
        rate = options.get_attr("TCA_HTB_RATE64") or parms["rate"]
        ceil = options.get_attr("TCA_HTB_CEIL64") or parms["ceil"]
        parent = int(message["parent"])
        parent = ROOT_HANDLE if parent == TC_H_ROOT else parent  # a top class's parent is reported as the root
        kernel = KernelClass(int(message["handle"]), parent, rate, ceil, parms["buffer"], parms["cbuffer"], parms["prio"], parms["rate_overhead"])
        out.append((kernel, message))
    return out


def u32_filters(ipr: Any, index: int, parent: int) -> list[KernelFilter]:
    """The u32 filter nodes under ``parent`` (not the hash tables u32 makes for itself), their
    keys decoded from the selector's bytes (pyroute2's decoder reads them 4 bytes off)."""
    out = []
    for message in ipr.get_filters(index, parent=parent):
        options = message.get_attr("TCA_OPTIONS") if message.get_attr("TCA_KIND") == "u32" else None
        selector = options.get_attr("TCA_U32_SEL") if options is not None else None
        if options is None or selector is None:
            continue
        raw = bytes(selector.data[selector.offset + 4 : selector.offset + selector.length])
        count = raw[2]
        keys = []
        for k in range(count):
            start = _SEL_HEADER.size + k * 16
            mask, value = _KEY.unpack_from(raw, start)
            offset, _ = _KEY_OFFSETS.unpack_from(raw, start + 8)
            keys.append((value, mask, offset))
        info = int(message["info"])
        classid = options.get_attr("TCA_U32_CLASSID") or 0
        out.append(KernelFilter(parent, info >> 16, socket.ntohs(info & 0xFFFF), tuple(keys), classid, int(message["handle"])))
    return out
