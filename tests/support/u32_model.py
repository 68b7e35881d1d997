"""What the kernel's u32 classifier does with an HTB plan's filters, and where isolane's own
classifier puts the same frames, for the tests of ``isolane.linux`` (with and without a kernel)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from isolane import Engine, PacketBatch
from isolane.linux.htb import DEFAULT_MINOR, ROOT_HANDLE, HtbPlan, format_handle, leaf_classid
from isolane.policy import Policy
from isolane.policy.constants import ACTION_ALLOW


def matches(keys: Sequence[tuple[int, int, int]], network_header: bytes) -> bool:
    """Every key's word at its offset, masked, equals its value; a word past the packet's end
    matches nothing, as in the kernel."""
    for value, mask, offset in keys:
        if offset + 4 > len(network_header) or struct.unpack_from(">I", network_header, offset)[0] & mask != value:
            return False
    return True


def kernel_class(plan: HtbPlan, frame: bytes) -> str:
    """The class HTB gives an Ethernet frame: the first of the root's filters of its protocol that
    matches, by priority and then in the order added; a filter's inner class runs its own
    filters so; where none matches, the default class."""
    protocol = struct.unpack_from(">H", frame, 12)[0]
    inner = {c.parent for c in plan.classes}
    chain = ROOT_HANDLE
    while chain == ROOT_HANDLE or chain in inner:
        found = next(
            (
                f
                for f in sorted(plan.filters, key=lambda f: f.prio)
                if (f.parent or ROOT_HANDLE) == chain and f.protocol == protocol and matches(f.keys, frame[14:])
            ),
            None,
        )
        if found is None:
            return format_handle(ROOT_HANDLE | DEFAULT_MINOR)
        chain = found.classid
    return format_handle(chain)


def batch(frames: Sequence[bytes]) -> PacketBatch:
    lengths = np.array([len(frame) for frame in frames], dtype=np.uint32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    return PacketBatch.from_arrays(b"".join(frames), offsets, lengths, np.arange(len(frames), dtype=np.int64))


def isolane_class(policy: Policy, frames: Sequence[bytes]) -> list[str]:
    """The HTB class of each frame by isolane's classifier: its tenant's class, the tenant's
    default class for a drop (the kernel cannot drop), ``1:ffff`` for no tenant."""
    verdicts = Engine(policy).classify(batch(frames))
    found = []
    for verdict in verdicts:
        t = int(verdict["tenant"])
        if t < 0:
            found.append(format_handle(ROOT_HANDLE | DEFAULT_MINOR))
            continue
        tenant = policy.tenants[t]
        cls = int(verdict["cls"]) if verdict["action"] == ACTION_ALLOW else tenant.class_id(tenant.default_class)
        found.append(format_handle(leaf_classid(t, cls)))
    return found
