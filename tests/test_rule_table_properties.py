"""Property tests: isolane's RuleTable against the brute-force reference classifier.

Random rule lists mix IPv4 (IPv4-mapped) and IPv6 prefixes of every length, wildcards,
overlapping port ranges, exact and partial protocol / DSCP masks, and addresses drawn from a
few shared bases so that rules overlap and share hash buckets. Lookups are biased to hit
rules: most packets are drawn inside a random rule (random host bits, a port in its ranges,
proto/DSCP equal under the mask), some just outside one (the bit after the prefix flipped, a
port one past the range, a masked bit flipped), the rest at random. Updates (``insert`` /
``remove``) are interleaved with lookups by a hypothesis state machine, checking after every
step. A seeded numpy generator adds larger tables (hundreds to thousands of rules).

Runtime: ~20-40 s by default. ``ISOLANE_PROPERTY_EXAMPLES`` scales the example counts
(e.g. 2000 for a long run).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from support.classbench import Rules, dict_expressible, insert_form, table_insert
from support.reference_classifier import ReferenceTable, classify

core = pytest.importorskip("isolane._core")
if not hasattr(core, "RuleTable"):
    pytest.skip("isolane._core.RuleTable is not built yet", allow_module_level=True)
RuleTable = core.RuleTable

EXAMPLES = int(os.environ.get("ISOLANE_PROPERTY_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

MAPPED = 0xFFFF << 32


def v4(a: int, b: int, c: int, d: int) -> int:
    return (a << 24) | (b << 16) | (c << 8) | d


V4_BASES = [v4(10, 0, 0, 0), v4(10, 1, 0, 0), v4(10, 1, 2, 0), v4(10, 1, 2, 128),
            v4(192, 168, 1, 0), v4(172, 16, 0, 0), v4(0, 0, 0, 0), v4(255, 255, 255, 255)]
V6_BASES = [0x20010DB8 << 96, (0x20010DB8 << 96) | (1 << 64), 0xFE80 << 112, 0,
            (0x20010DB8 << 96) | (0xFFFF << 32), MAPPED | v4(10, 1, 0, 0), (1 << 128) - 1]
PORT_POINTS = [0, 1, 22, 53, 79, 80, 81, 443, 1023, 1024, 1025, 8080, 32768, 65534, 65535]
PROTOS = [0, 1, 6, 17, 47, 58, 255]


def to16(a: int) -> bytes:
    return a.to_bytes(16, "big")


# ---------------------------------------------------------------------------------------------
# strategies


@st.composite
def prefixes(draw):
    """(16-byte address, length over 128 bits). Host bits past the length may be set."""
    kind = draw(st.sampled_from(["any", "v4", "v4", "v6", "v6-near-v4"]))
    if kind == "any":
        return to16(draw(st.sampled_from([0, MAPPED | v4(10, 0, 0, 0)]))), 0
    if kind == "v4":
        base = draw(st.sampled_from(V4_BASES)) ^ draw(st.sampled_from([0, 1, 0x80, 0x100, 0x10000]))
        length = 96 + draw(st.sampled_from([0, 1, 8, 16, 23, 24, 25, 31, 32]) | st.integers(0, 32))
        return to16(MAPPED | base), length
    if kind == "v6-near-v4":  # short prefixes over the IPv4-mapped space: ::ffff:0:0/96 etc.
        length = draw(st.sampled_from([80, 95, 96, 97, 104]))
        return to16(MAPPED | draw(st.sampled_from(V4_BASES))), length
    base = draw(st.sampled_from(V6_BASES)) ^ draw(st.sampled_from([0, 1, 1 << 64, 1 << 100]))
    length = draw(st.sampled_from([0, 1, 16, 32, 48, 63, 64, 65, 96, 127, 128])
                  | st.integers(0, 128))
    return to16(base & ((1 << 128) - 1)), length


@st.composite
def port_ranges(draw):
    kind = draw(st.sampled_from(["any", "exact", "range", "range"]))
    if kind == "any":
        return 0, 65535
    point = st.sampled_from(PORT_POINTS) | st.integers(0, 65535)
    if kind == "exact":
        p = draw(point)
        return p, p
    a, b = draw(point), draw(point)
    return min(a, b), max(a, b)


@st.composite
def masked(draw, values, full, partial: bool):
    kinds = ["any", "exact", "exact"] + (["partial"] if partial else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "any":
        return draw(values), 0
    if kind == "exact":
        return draw(values), full
    return draw(values), draw(st.integers(0, full))


@st.composite
def rules_st(draw, partial_masks: bool = True):
    """One rule tuple in RULE_FIELDS order."""
    src, src_len = draw(prefixes())
    dst, dst_len = draw(prefixes())
    sp = draw(port_ranges())
    dp = draw(port_ranges())
    proto, proto_mask = draw(masked(st.sampled_from(PROTOS) | st.integers(0, 255), 0xFF,
                                    partial_masks))
    dscp, dscp_mask = draw(masked(st.integers(0, 63), 0x3F, partial_masks))
    return (np.frombuffer(src, np.uint8).copy(), src_len, np.frombuffer(dst, np.uint8).copy(),
            dst_len, *sp, *dp, proto, proto_mask, dscp, dscp_mask)


ANY_RULE = (np.zeros(16, np.uint8), 0, np.zeros(16, np.uint8), 0, 0, 65535, 0, 65535,
            0, 0, 0, 0)


def insert_rules_st():
    """Rules that the installed RuleTable.insert can take (the dict form has no partial
    protocol / DSCP masks)."""
    probe = RuleTable(*Rules.from_lists([ANY_RULE]).args())
    return rules_st() if insert_form(probe) == "positional" else rules_st(partial_masks=False)


# ---------------------------------------------------------------------------------------------
# packets biased to hit (or just miss) rules


def _mask_bytes(lengths: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 byte masks of prefix lengths."""
    bits = np.clip(lengths.astype(np.int64)[:, None] - 8 * np.arange(16)[None, :], 0, 8)
    return ((0xFF00 >> bits) & 0xFF).astype(np.uint8)


def _address_inside(rng, addr16: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A random address in each prefix; host bits random, IPv4-mapped-looking half the time
    when the prefix leaves the top 96 bits free."""
    n = len(lengths)
    noise = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    v4like = rng.random(n) < 0.5
    noise[v4like, :10] = 0
    noise[v4like, 10:12] = 0xFF
    m = _mask_bytes(lengths)
    return (addr16 & m) | (noise & ~m)


def _flip_bit(addr16: np.ndarray, bit: np.ndarray) -> np.ndarray:
    """Flip bit number ``bit`` (0 = most significant) of each address (bit >= 0 only)."""
    out = addr16.copy()
    ok = bit >= 0
    rows = np.flatnonzero(ok)
    b = bit[ok]
    out[rows, b // 8] ^= (0x80 >> (b % 8)).astype(np.uint8)
    return out


def packets_for(rules: Rules, rng: np.random.Generator, n: int):
    """(src16, dst16, src_port, dst_port, proto, dscp): 70% inside a random rule, 15% just
    outside one (one field perturbed), 15% random. Works for an empty rule list too."""
    k = len(rules)
    src = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    dst = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    v4like = rng.random((n, 2)) < 0.5
    for a, col in ((src, 0), (dst, 1)):
        a[v4like[:, col], :10] = 0
        a[v4like[:, col], 10:12] = 0xFF
    sport = rng.choice(np.array(PORT_POINTS + list(rng.integers(0, 65536, 16))), n)
    dport = rng.choice(np.array(PORT_POINTS + list(rng.integers(0, 65536, 16))), n)
    proto = rng.choice(np.array(PROTOS + list(rng.integers(0, 256, 8))), n)
    dscp = rng.integers(0, 64, n)
    if k:
        kind = rng.random(n)
        aimed = np.flatnonzero(kind < 0.85)
        which = rng.integers(0, k, len(aimed))
        r = rules.take(which)
        src[aimed] = _address_inside(rng, r.src, r.src_len)
        dst[aimed] = _address_inside(rng, r.dst, r.dst_len)

        def in_range(lo, hi):
            lo, hi = lo.astype(np.int64), hi.astype(np.int64)
            edge = rng.random(len(lo))
            v = lo + rng.integers(0, 1 << 40, len(lo)) % (hi - lo + 1)
            return np.where(edge < 0.2, lo, np.where(edge < 0.4, hi, v))

        sport[aimed] = in_range(r.src_port_lo, r.src_port_hi)
        dport[aimed] = in_range(r.dst_port_lo, r.dst_port_hi)
        pm, dm = r.proto_mask.astype(np.int64), r.dscp_mask.astype(np.int64)
        proto[aimed] = (r.proto & pm) | (rng.integers(0, 256, len(aimed)) & ~pm & 0xFF)
        dscp[aimed] = (r.dscp & dm) | (rng.integers(0, 64, len(aimed)) & ~dm & 0x3F)

        # just outside: perturb one field of a 'kind in [0.70, 0.85)' packet
        near = kind[aimed] >= 0.70
        rows, rr = aimed[near], np.flatnonzero(near)
        field = rng.integers(0, 6, len(rows))
        for f, a, length in ((0, src, r.src_len), (1, dst, r.dst_len)):
            sel = field == f
            a[rows[sel]] = _flip_bit(a[rows[sel]], length[rr[sel]].astype(np.int64) - 1)
        sel = field == 2
        sport[rows[sel]] = np.where(rng.random(sel.sum()) < 0.5,
                                    r.src_port_lo[rr[sel]].astype(np.int64) - 1,
                                    r.src_port_hi[rr[sel]].astype(np.int64) + 1)
        sel = field == 3
        dport[rows[sel]] = np.where(rng.random(sel.sum()) < 0.5,
                                    r.dst_port_lo[rr[sel]].astype(np.int64) - 1,
                                    r.dst_port_hi[rr[sel]].astype(np.int64) + 1)
        sel = field == 4
        proto[rows[sel]] ^= (pm[rr[sel]] & -pm[rr[sel]])  # lowest masked bit (0 if none)
        sel = field == 5
        dscp[rows[sel]] ^= (dm[rr[sel]] & -dm[rr[sel]])
    return (src, dst, np.clip(sport, 0, 65535).astype(np.uint16),
            np.clip(dport, 0, 65535).astype(np.uint16), (proto & 0xFF).astype(np.uint8),
            dscp.astype(np.uint8))


def check_table(table, rules: Rules, packets, context: str = "") -> None:
    got = np.asarray(table.lookup(*packets))
    want = classify(rules, *packets)
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        i = bad[0]
        src, dst, sp, dp, pr, ds = (np.asarray(p)[i] for p in packets)
        import ipaddress

        msg = [f"{context}{len(bad)} of {len(want)} lookups differ from the reference; first:",
               f"  packet src={ipaddress.IPv6Address(bytes(src))} "
               f"dst={ipaddress.IPv6Address(bytes(dst))} sport={sp} dport={dp} proto={pr} "
               f"dscp={ds}: table {got[i]}, reference {want[i]}"]
        for j in sorted({int(got[i]), int(want[i])} - {-1}):
            if j < len(rules):
                msg.append(f"  rule {j}: {describe_rule(rules.rule(j))}")
        raise AssertionError("\n".join(msg))
    # the IPv4 (uint32) input form gives the same answers for IPv4-mapped packets
    src, dst = packets[0], packets[1]
    v4 = (~src[:, :10].any(1)) & (src[:, 10:12] == 0xFF).all(1) & \
         (~dst[:, :10].any(1)) & (dst[:, 10:12] == 0xFF).all(1)
    if v4.any():
        s32 = np.ascontiguousarray(src[v4, 12:]).view(">u4").ravel().astype(np.uint32)
        d32 = np.ascontiguousarray(dst[v4, 12:]).view(">u4").ravel().astype(np.uint32)
        got4 = np.asarray(table.lookup(s32, d32, *(np.asarray(p)[v4] for p in packets[2:])))
        np.testing.assert_array_equal(got4, want[v4], err_msg=context + "uint32 address form")


def describe_rule(r) -> str:
    import ipaddress

    return (f"src={ipaddress.IPv6Address(bytes(r[0]))}/{r[1]} "
            f"dst={ipaddress.IPv6Address(bytes(r[2]))}/{r[3]} sport={r[4]}-{r[5]} "
            f"dport={r[6]}-{r[7]} proto={r[8]:#x}/{r[9]:#x} dscp={r[10]:#x}/{r[11]:#x}")


# ---------------------------------------------------------------------------------------------
# static tables


@SETTINGS
@given(st.lists(rules_st(), min_size=0, max_size=60), st.integers(0, 2**32 - 1))
def test_lookup_equals_reference(rule_list, seed):
    rules = Rules.from_lists(rule_list)
    try:
        table = RuleTable(*rules.args())
    except ValueError:
        assume(len(rules) > 0)  # an empty table may be refused; nothing else may be
        raise
    assert len(table) == len(rules)
    check_table(table, rules, packets_for(rules, np.random.default_rng(seed), 300))


@settings(SETTINGS, max_examples=max(10, EXAMPLES // 5))
@given(st.lists(rules_st(), min_size=40, max_size=200), st.integers(0, 2**32 - 1))
def test_lookup_equals_reference_many_overlapping(rule_list, seed):
    """More rules than a hash bucket holds (they share a few base addresses)."""
    rules = Rules.from_lists(rule_list)
    table = RuleTable(*rules.args())
    check_table(table, rules, packets_for(rules, np.random.default_rng(seed), 1000))


@settings(SETTINGS, max_examples=max(10, EXAMPLES // 3))
@given(rules_st(), st.integers(1, 80), st.integers(0, 2**32 - 1))
def test_duplicated_and_shadowed_rules(r, copies, seed):
    """The same rule many times, plus a wildcard at the end: the first copy always wins."""
    rules = Rules.from_lists([r] * copies + [ANY_RULE])
    table = RuleTable(*rules.args())
    pk = packets_for(rules, np.random.default_rng(seed), 200)
    got = np.asarray(table.lookup(*pk))
    assert set(np.unique(got)) <= {0, copies}
    check_table(table, rules, pk)


# ---------------------------------------------------------------------------------------------
# updates interleaved with lookups


class RuleTableUpdates(RuleBasedStateMachine):
    """insert / remove / lookup in any order; after every step the table equals the
    reference on packets aimed at the current rules."""

    @initialize(rule_list=st.lists(rules_st(), min_size=1, max_size=40),
                seed=st.integers(0, 2**32 - 1))
    def build(self, rule_list, seed):
        rules = Rules.from_lists(rule_list)
        self.table = RuleTable(*rules.args())
        self.ref = ReferenceTable.from_rules(rules)
        self.rng = np.random.default_rng(seed)
        self.steps = 0

    @rule(data=st.data())
    def insert(self, data):
        index = data.draw(st.integers(0, len(self.ref)), label="index")
        r = data.draw(INSERT_RULES, label="rule")
        table_insert(self.table, index, r)
        self.ref.insert(index, *r)

    @rule(data=st.data())
    def insert_copy_of_existing(self, data):
        """Re-insert an existing rule elsewhere (duplicates and shadowing)."""
        assume(len(self.ref) > 0)
        src = data.draw(st.integers(0, len(self.ref) - 1), label="copy of")
        r = self.ref.rules[src]
        assume(insert_form(self.table) == "positional" or dict_expressible(r))
        index = data.draw(st.integers(0, len(self.ref)), label="index")
        table_insert(self.table, index, r)
        self.ref.insert(index, *r)

    @precondition(lambda self: len(self.ref) > 0)
    @rule(data=st.data())
    def remove(self, data):
        index = data.draw(st.integers(0, len(self.ref) - 1), label="index")
        self.table.remove(index)
        self.ref.remove(index)

    @rule()
    def out_of_range_updates_are_refused(self):
        n = len(self.ref)
        with pytest.raises((ValueError, IndexError)):
            self.table.remove(n)
        assert len(self.table) == n

    @invariant()
    def same_as_reference(self):
        if not hasattr(self, "table"):
            return
        assert len(self.table) == len(self.ref)
        rules = self.ref.as_rules()
        check_table(self.table, rules, packets_for(rules, self.rng, 150),
                    context=f"after {len(self.ref)}-rule state: ")


INSERT_RULES = insert_rules_st()

RuleTableUpdates.TestCase.settings = settings(
    SETTINGS, max_examples=max(10, EXAMPLES // 3), stateful_step_count=40)
test_updates_interleaved_with_lookups = RuleTableUpdates.TestCase


# ---------------------------------------------------------------------------------------------
# larger seeded tables (numpy generator)


def random_rules(rng: np.random.Generator, n: int) -> Rules:
    """n rules over few bases (lots of overlap), a mix of IPv4 and IPv6, all field kinds."""
    out = []
    v4b = np.array(V4_BASES + list(rng.integers(0, 2**32, 24)), dtype=object)
    v6b = V6_BASES + [int(x) << 64 for x in rng.integers(0, 2**63, 8)]
    for _ in range(n):
        fields = []
        for _side in range(2):
            u = rng.random()
            if u < 0.08:
                fields += [np.zeros(16, np.uint8), 0]
            elif u < 0.7:  # IPv4, mostly long prefixes (short ones would shadow the rest)
                a = MAPPED | (int(rng.choice(v4b)) ^ int(rng.integers(0, 2**16)))
                length = int(rng.choice([0, 8, 16, 20, 24, 24, 27, 28, 30, 32, 32, 32, 32]))
                if rng.random() < 0.1:
                    length = int(rng.integers(0, 33))
                fields += [np.frombuffer(to16(a), np.uint8).copy(), 96 + length]
            else:
                a = int(v6b[rng.integers(0, len(v6b))]) ^ int(rng.integers(0, 2**32))
                length = int(rng.choice([16, 32, 48, 56, 64, 64, 80, 96, 112, 120, 127, 128,
                                         128, 128]))
                if rng.random() < 0.1:
                    length = int(rng.integers(0, 129))
                fields += [np.frombuffer(to16(a), np.uint8).copy(), length]
        src, sl, dst, dl = fields
        ports = []
        for _side in range(2):
            u = rng.random()
            if u < 0.4:
                ports += [0, 65535]
            elif u < 0.7:
                p = int(rng.choice(PORT_POINTS))
                ports += [p, p]
            else:
                a, b = sorted(rng.integers(0, 65536, 2))
                ports += [int(a), int(b)]
        u = rng.random()
        proto = (0, 0) if u < 0.3 else (int(rng.choice(PROTOS)), 0xFF) if u < 0.9 else \
            (int(rng.integers(0, 256)), int(rng.integers(0, 256)))
        u = rng.random()
        dscp = (0, 0) if u < 0.7 else (int(rng.integers(0, 64)), 0x3F) if u < 0.9 else \
            (int(rng.integers(0, 64)), int(rng.integers(0, 64)))
        out.append((src, sl, dst, dl, *ports, *proto, *dscp))
    return Rules.from_lists(out)


@pytest.mark.parametrize("seed", range(4))
def test_large_random_tables(seed):
    rng = np.random.default_rng(1000 + seed)
    rules = random_rules(rng, [300, 1000, 2500, 4000][seed])
    table = RuleTable(*rules.args())
    check_table(table, rules, packets_for(rules, rng, 20_000), context=f"seed {seed}: ")


@pytest.mark.parametrize("seed", range(2))
def test_large_table_update_sequence(seed):
    """200 random inserts/removes on a 1,500-rule table, checked every 20 updates."""
    rng = np.random.default_rng(2000 + seed)
    rules = random_rules(rng, 1500)
    table = RuleTable(*rules.args())
    ref = ReferenceTable.from_rules(rules)
    fresh = random_rules(rng, 200)
    positional = insert_form(table) == "positional"
    for step in range(200):
        if rng.random() < 0.5 and len(ref):
            i = int(rng.integers(0, len(ref)))
            table.remove(i)
            ref.remove(i)
        else:
            r = fresh.rule(step)
            if not positional and not dict_expressible(r):
                r = r[:9] + ((0xFF if r[9] else 0),) + r[10:11] + ((0x3F if r[11] else 0),)
            i = int(rng.integers(0, len(ref) + 1))
            table_insert(table, i, r)
            ref.insert(i, *r)
        if step % 20 == 19:
            cur = ref.as_rules()
            check_table(table, cur, packets_for(cur, rng, 4000), context=f"step {step}: ")
