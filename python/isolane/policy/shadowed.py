"""Rules that never match: the policy rules of a tenant's tables that earlier rules cover."""

from __future__ import annotations

import bisect

import numpy as np
import numpy.typing as npt

from isolane.policy.compile import U8, TenantTables
from isolane.policy.constants import FRAME_RULE_DSCP

_MASKS = [((1 << n) - 1) << (128 - n) for n in range(129)]
_MAPPED_VALUE = 0xFFFF << 32
_BIG_GROUP = 48


def _addr_ints(addresses: U8) -> list[int]:
    words = np.ascontiguousarray(addresses).view(">u8").reshape(-1, 2)
    return [(hi << 64) | lo for hi, lo in zip(words[:, 0].tolist(), words[:, 1].tolist())]


def _shadowed_rules(t: TenantTables) -> list[tuple[int, list[int]]]:
    """Policy rules none of whose table rules can match because, for each of them, a table rule
    of an earlier policy rule covers it (every field of the earlier one contains the later one's).
    Returns ``[(rule, [earliest covering rules])]``.

    Instead of comparing all pairs, candidates are found through hash indexes: a covering rule's
    source prefix is one of the (few) existing prefixes containing the later rule's source, the
    same for the destination, and its protocol and DSCP masks are among the (few) masks in use.
    Rules with equal prefixes, protocol and DSCP form a group whose port ranges are compared
    (vectorised for large groups).
    """
    n = len(t)
    if n < 2:
        return []
    src, dst = _addr_ints(t.src), _addr_ints(t.dst)
    src_len, dst_len = t.src_len.tolist(), t.dst_len.tolist()
    # A rule whose one side is IPv4-only only sees IPv4 packets, so an "any" other side
    # effectively means any IPv4 address (::ffff:0:0/96). Compare effective prefixes.
    for a, a_len, b, b_len in ((src, src_len, dst, dst_len), (dst, dst_len, src, src_len)):
        for i in range(n):
            if a_len[i] >= 96 and (a[i] >> 32) == 0xFFFF and b_len[i] < 96 and (_MAPPED_VALUE & _MASKS[b_len[i]]) == b[i]:
                b[i], b_len[i] = _MAPPED_VALUE, 96
    spl, sph = t.src_port_lo.tolist(), t.src_port_hi.tolist()
    dpl, dph = t.dst_port_lo.tolist(), t.dst_port_hi.tolist()
    pmask = t.proto_mask.tolist()
    pval = [p & m for p, m in zip(t.proto.tolist(), pmask)]
    dmask = t.dscp_mask.tolist()
    dval = [d & m for d, m in zip(t.dscp.tolist(), dmask)]
    prule = t.policy_rule.tolist()

    groups: dict[tuple[int, ...], list[int]] = {}
    pairs: set[tuple[int, int, int, int]] = set()
    src_sets: dict[int, set[int]] = {}
    dst_sets: dict[int, set[int]] = {}
    for i in range(n):
        groups.setdefault((src_len[i], src[i], dst_len[i], dst[i], pmask[i], pval[i], dmask[i], dval[i]), []).append(i)
        pairs.add((src_len[i], src[i], dst_len[i], dst[i]))
        src_sets.setdefault(src_len[i], set()).add(src[i])
        dst_sets.setdefault(dst_len[i], set()).add(dst[i])
    src_lens, dst_lens = sorted(src_sets), sorted(dst_sets)
    pmasks, dmasks = sorted(set(pmask)), sorted(set(dmask))
    ancestors_cache: dict[tuple[int, int, int], list[tuple[int, int]]] = {}

    def ancestors(side: int, length: int, value: int) -> list[tuple[int, int]]:
        key = (side, length, value)
        found = ancestors_cache.get(key)
        if found is None:
            lens, sets = (src_lens, src_sets) if side == 0 else (dst_lens, dst_sets)
            found = []
            for ln in lens:
                if ln > length:
                    break
                masked = value & _MASKS[ln]
                if masked in sets[ln]:
                    found.append((ln, masked))
            ancestors_cache[key] = found
        return found

    vectors: dict[tuple[int, ...], tuple[npt.NDArray[np.int64], ...]] = {}

    def first_cover(r: int, limit: int) -> int:
        """The earliest row before ``limit`` covering row ``r``, or ``limit``."""
        best = limit
        for s_len, s_val in ancestors(0, src_len[r], src[r]):
            for d_len, d_val in ancestors(1, dst_len[r], dst[r]):
                if (s_len, s_val, d_len, d_val) not in pairs:
                    continue
                for pm in pmasks:
                    if pm & ~pmask[r]:
                        continue
                    for dm in dmasks:
                        if dm & ~dmask[r] or (dm ^ dmask[r]) & FRAME_RULE_DSCP:  # frame rules cover frame rules only
                            continue
                        key = (s_len, s_val, d_len, d_val, pm, pval[r] & pm, dm, dval[r] & dm)
                        members = groups.get(key)
                        if members is None or members[0] >= best:
                            continue
                        if len(members) <= _BIG_GROUP:
                            for e in members:
                                if e >= best:
                                    break
                                if spl[e] <= spl[r] and sph[e] >= sph[r] and dpl[e] <= dpl[r] and dph[e] >= dph[r]:
                                    best = e
                                    break
                            continue
                        vec = vectors.get(key)
                        if vec is None:
                            vec = tuple(np.array([col[e] for e in members], dtype=np.int64) for col in (spl, sph, dpl, dph))
                            vectors[key] = vec
                        k = bisect.bisect_left(members, best)
                        hits = (vec[0][:k] <= spl[r]) & (vec[1][:k] >= sph[r]) & (vec[2][:k] <= dpl[r]) & (vec[3][:k] >= dph[r])
                        if k and hits.any():
                            best = members[int(hits.argmax())]
        return best

    shadowed: list[tuple[int, list[int]]] = []
    start = 0
    while start < n:
        end = start
        while end < n and prule[end] == prule[start]:
            end += 1
        covering: set[int] = set()
        if start > 0:
            for r in range(start, end):
                e = first_cover(r, start)
                if e >= start:
                    break
                covering.add(prule[e])
            else:
                shadowed.append((prule[start], sorted(covering)))
        start = end
    return shadowed
