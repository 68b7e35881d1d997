"""The parsed-record layout and the Python face of :func:`parse`."""

from __future__ import annotations

import enum
import ipaddress
import os
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from isolane import _core


class LinkType(enum.IntEnum):
    """pcap link types isolane reads (``PacketBatch.link_type``)."""

    NULL = 0
    ETHERNET = 1
    RAW = 101
    LOOP = 108
    LINUX_SLL = 113
    IPV4 = 228
    IPV6 = 229
    LINUX_SLL2 = 276


def dtype_of(layout: tuple[list[tuple[str, str, int]], int]) -> np.dtype:
    """A numpy dtype for a record laid out by the Rust core: (name, type, offset) and size."""
    fields, itemsize = layout
    names, formats, offsets = zip(*fields)
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets), "itemsize": itemsize})


PARSED_DTYPE: np.dtype = dtype_of(_core.record_layout())
"""One row of :func:`parse`'s result; the layout comes from the Rust record itself."""


def parse(
    batch: _core.PacketBatch,
    *,
    vxlan_ports: Iterable[int] = (_core.VXLAN_PORT,),
    geneve_ports: Iterable[int] = (_core.GENEVE_PORT,),
    threads: int | None = None,
) -> npt.NDArray[np.void]:
    """Parse every packet of ``batch`` into one record (see ``docs/parsing.md``).

    ``vxlan_ports`` and ``geneve_ports`` are the UDP destination ports that announce a tunnel
    (8472 is Linux's historical VXLAN port). ``threads`` defaults to every available core; the
    GIL is released for the whole call. Returns a structured array of ``PARSED_DTYPE``.
    """
    vxlan, geneve = tunnel_ports(vxlan_ports, geneve_ports)
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    raw = _core.parse_records(batch, vxlan, geneve, threads)
    return raw.view(PARSED_DTYPE)


def tunnel_ports(vxlan_ports: Iterable[int], geneve_ports: Iterable[int]) -> tuple[list[int], list[int]]:
    """The VXLAN and Geneve ports as the core takes them, checked."""
    return _ports(vxlan_ports, "vxlan_ports"), _ports(geneve_ports, "geneve_ports")


def _ports(ports: Iterable[int], name: str) -> list[int]:
    ports = list(ports)
    bad = [p for p in ports if not isinstance(p, (int, np.integer)) or not 0 <= p <= 65535]
    if bad:
        raise ValueError(f"{name}: {bad[0]!r} is not a UDP port (0-65535)")
    return [int(p) for p in ports]


def format_addresses(addresses: npt.NDArray[np.uint8]) -> list[str]:
    """Text form of an (n, 16) address column such as ``rows["src"]``: IPv4-mapped addresses
    as dotted quads, others as IPv6, all-zero (not reached) as ``""``."""
    out = []
    for raw in np.asarray(addresses, dtype=np.uint8).reshape(-1, 16):
        if not raw.any():
            out.append("")
            continue
        address = ipaddress.IPv6Address(raw.tobytes())
        out.append(str(address.ipv4_mapped or address))
    return out
