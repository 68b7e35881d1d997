"""A brute-force first-match classifier, for tests only: plain and obviously correct, not fast.

Rules and packets use the arrays of ``docs/classify-contract.md`` (see ``classbench.Rules``).
A packet matches a rule when every field matches:

* address: the first ``len`` bits of the packet's 128-bit address equal the rule's (len 0 = any);
* ports: ``lo <= port <= hi``;
* protocol / DSCP: ``packet & mask == rule & mask``.

The first matching rule in list order wins; -1 when none matches.

Two implementations that hold each other honest (``test_reference_*`` compares them):

* ``first_match(rules, packet)``: one packet, pure Python integers, rule by rule;
* ``classify(rules, src, dst, src_port, dst_port, proto, dscp)``: numpy, one rule at a time
  over the packets that no earlier rule matched.

``ReferenceTable`` wraps ``classify`` with ``RuleTable``'s interface (``lookup``, ``insert``,
``remove``, ``len``), with rules kept in plain Python lists.
"""

from __future__ import annotations

import numpy as np

from support.classbench import RULE_FIELDS, Rules, ipv4_mapped

ALL_ONES_128 = (1 << 128) - 1


def addr_int(a) -> int:
    """A 128-bit address as a Python int: from 16 bytes / a (16,) uint8 array, or from an
    int that is an IPv4 address (< 2**32, mapped to ::ffff:a.b.c.d) or already 128-bit."""
    if isinstance(a, (int, np.integer)):
        a = int(a)
        return (0xFFFF << 32) | a if a < (1 << 32) else a
    b = bytes(bytearray(np.asarray(a, dtype=np.uint8).ravel()))
    assert len(b) == 16, "an address is 16 bytes"
    return int.from_bytes(b, "big")


def prefix_mask(length: int) -> int:
    """The 128-bit mask of the first ``length`` bits."""
    assert 0 <= length <= 128
    return (ALL_ONES_128 << (128 - length)) & ALL_ONES_128


def rule_matches(rule: tuple, packet: tuple) -> bool:
    """``rule`` in RULE_FIELDS order; ``packet`` = (src, dst, src_port, dst_port, proto, dscp)
    with src/dst as anything ``addr_int`` takes."""
    (r_src, r_src_len, r_dst, r_dst_len, sp_lo, sp_hi, dp_lo, dp_hi,
     r_proto, r_proto_mask, r_dscp, r_dscp_mask) = rule
    src, dst, sport, dport, proto, dscp = packet
    m = prefix_mask(int(r_src_len))
    if addr_int(src) & m != addr_int(r_src) & m:
        return False
    m = prefix_mask(int(r_dst_len))
    if addr_int(dst) & m != addr_int(r_dst) & m:
        return False
    if not int(sp_lo) <= int(sport) <= int(sp_hi):
        return False
    if not int(dp_lo) <= int(dport) <= int(dp_hi):
        return False
    if int(proto) & int(r_proto_mask) != int(r_proto) & int(r_proto_mask):
        return False
    if int(dscp) & int(r_dscp_mask) != int(r_dscp) & int(r_dscp_mask):
        return False
    return True


def first_match(rules, packet: tuple) -> int:
    """Index of the first rule (a Rules, or a list of rule tuples) matching ``packet``, or -1."""
    seq = [rules.rule(i) for i in range(len(rules))] if isinstance(rules, Rules) else rules
    for i, rule in enumerate(seq):
        if rule_matches(rule, packet):
            return i
    return -1


# ---------------------------------------------------------------------------------------------
# numpy version


def _addresses16(a) -> np.ndarray:
    """(n, 16) uint8 from (n, 16) uint8 or from IPv4 uint32 (host order) addresses."""
    a = np.asarray(a)
    if a.ndim == 2:
        assert a.shape[1] == 16 and a.dtype == np.uint8, "addresses are (n, 16) uint8"
        return a
    return ipv4_mapped(a.astype(np.uint32))


def _words(a16: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) uint64 halves of (n, 16) big-endian addresses."""
    w = np.ascontiguousarray(a16, dtype=np.uint8).view(">u8").reshape(-1, 2).astype(np.uint64)
    return w[:, 0].copy(), w[:, 1].copy()


def _mask_words(length: int) -> tuple[int, int]:
    m = prefix_mask(int(length))
    return m >> 64, m & ((1 << 64) - 1)


def classify(rules: Rules, src, dst, src_port, dst_port, proto, dscp=None) -> np.ndarray:
    """First matching rule index per packet (int32, -1 none), rule by rule.

    Each rule is tested against every packet that no earlier rule matched (``alive``); the
    packet columns are compacted to the still-unmatched packets now and then, for speed."""
    s_hi, s_lo = _words(_addresses16(src))
    d_hi, d_lo = _words(_addresses16(dst))
    n = len(s_hi)
    sport = np.asarray(src_port).astype(np.int32)
    dport = np.asarray(dst_port).astype(np.int32)
    proto = np.asarray(proto).astype(np.int32)
    dscp = np.zeros(n, np.int32) if dscp is None else np.asarray(dscp).astype(np.int32)
    assert len(sport) == len(dport) == len(proto) == len(dscp) == len(d_hi) == n
    out = np.full(n, -1, dtype=np.int32)

    # columns of the packets still in play; idx maps them back to packet numbers
    idx = np.arange(n)
    cols = [s_hi, s_lo, d_hi, d_lo, sport, dport, proto, dscp]
    alive = np.ones(n, dtype=bool)
    n_alive = n
    r_src_hi, r_src_lo = _words(rules.src)
    r_dst_hi, r_dst_lo = _words(rules.dst)
    for i in range(len(rules)):
        if n_alive == 0:
            break
        if n_alive < len(idx) // 2:  # compact
            idx, cols = idx[alive], [c[alive] for c in cols]
            alive = np.ones(len(idx), dtype=bool)
        p_s_hi, p_s_lo, p_d_hi, p_d_lo, p_sport, p_dport, p_proto, p_dscp = cols
        ok = alive.copy()
        for p_hi, p_lo, r_hi, r_lo, length in (
            (p_s_hi, p_s_lo, r_src_hi[i], r_src_lo[i], rules.src_len[i]),
            (p_d_hi, p_d_lo, r_dst_hi[i], r_dst_lo[i], rules.dst_len[i]),
        ):
            m_hi, m_lo = _mask_words(length)
            if m_hi:
                ok &= ((p_hi ^ r_hi) & np.uint64(m_hi)) == 0
            if m_lo:
                ok &= ((p_lo ^ r_lo) & np.uint64(m_lo)) == 0
        lo, hi = int(rules.src_port_lo[i]), int(rules.src_port_hi[i])
        if (lo, hi) != (0, 0xFFFF):
            ok &= (p_sport >= lo) & (p_sport <= hi)
        lo, hi = int(rules.dst_port_lo[i]), int(rules.dst_port_hi[i])
        if (lo, hi) != (0, 0xFFFF):
            ok &= (p_dport >= lo) & (p_dport <= hi)
        pm = int(rules.proto_mask[i])
        if pm:
            ok &= (p_proto & pm) == (int(rules.proto[i]) & pm)
        dm = int(rules.dscp_mask[i])
        if dm:
            ok &= (p_dscp & dm) == (int(rules.dscp[i]) & dm)
        hit = np.flatnonzero(ok)
        if len(hit):
            out[idx[hit]] = i
            alive[hit] = False
            n_alive -= len(hit)
    return out


class ReferenceTable:
    """RuleTable's interface over plain lists of rule tuples, classified by ``classify``."""

    def __init__(self, *arrays):
        rules = Rules(**dict(zip(RULE_FIELDS, arrays)))
        self.rules: list[tuple] = [rules.rule(i) for i in range(len(rules))]

    @classmethod
    def from_rules(cls, rules: Rules) -> ReferenceTable:
        return cls(*rules.args())

    def __len__(self) -> int:
        return len(self.rules)

    def as_rules(self) -> Rules:
        return Rules.from_lists(self.rules)

    def insert(self, index: int, *rule) -> None:
        assert len(rule) == len(RULE_FIELDS)
        assert 0 <= index <= len(self.rules)
        self.rules.insert(index, tuple(rule))

    def remove(self, index: int) -> None:
        assert 0 <= index < len(self.rules)
        del self.rules[index]

    def lookup(self, src, dst, src_port, dst_port, proto, dscp=None) -> np.ndarray:
        return classify(self.as_rules(), src, dst, src_port, dst_port, proto, dscp)
