"""ClassBench correctness: every labelled header of every rule set in ../shared/classbench.

* the loader (tests/support/classbench.py) reads the files as the README describes them;
* the brute-force reference (tests/support/reference_classifier.py) reproduces every trace label,
  which proves it before the property tests lean on it;
* ``isolane._core.RuleTable`` built from the loader's arrays (and from_classbench, when
  present) returns the label for every labelled header: 0 mismatches. In the 100k traces only
  the first 5,120 lines are labelled; a sample of the others is checked against the reference;
* one-rule updates on real rule sets: removing a rule moves exactly its packets to their next
  match and shifts the other labels; inserting it back restores the labels.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.classbench import RULE_FIELDS, RULE_SETS, Rules, ipv4_mapped, load_trace, parse_rules, rule_set, rule_set_paths, rule_to_dict, table_insert
from support.reference_classifier import ReferenceTable, classify, first_match

UNLABELLED_SAMPLE = 3000  # unlabelled 100k-trace lines checked against the reference


def rule_table_class():
    core = pytest.importorskip("isolane._core")
    if not hasattr(core, "RuleTable"):
        pytest.skip("isolane._core.RuleTable is not built into the installed package yet")
    return core.RuleTable


def describe_mismatches(trace, got, want, idx, limit=5) -> str:
    bad = idx[got != want]
    lines = [f"{len(bad)} mismatches of {len(idx)}"]
    for k in np.flatnonzero(got != want)[:limit]:
        i = idx[k]
        lines.append(f"  line {i + 1}: {trace.src[i]} {trace.dst[i]} {trace.src_port[i]} "
                     f"{trace.dst_port[i]} {trace.proto[i]}: expected {want[k]}, got {got[k]}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the loader


def test_loader_first_rule_and_counts():
    rules, trace = rule_set("acl1_1k")
    path, trace_path = rule_set_paths("acl1_1k")
    n_lines = sum(1 for ln in open(path) if ln.strip())
    assert len(rules) == n_lines == 942
    # @176.19.181.33/32  90.145.23.162/32  0 : 65535  1550 : 1550  0x06/0xFF  0x0000/0x0200
    r = rules.rule(0)
    assert bytes(r[0]) == bytes(10) + b"\xff\xff" + bytes([176, 19, 181, 33])
    assert bytes(r[2]) == bytes(10) + b"\xff\xff" + bytes([90, 145, 23, 162])
    assert r[1] == r[3] == 128
    assert r[4:] == (0, 65535, 1550, 1550, 6, 0xFF, 0, 0)
    for f in RULE_FIELDS:
        a = getattr(rules, f)
        assert a.dtype == (np.uint16 if "port" in f else np.uint8), f
        assert a.flags.c_contiguous
    assert rules.src.shape == (942, 16)
    assert (rules.src_len >= 96).all() and (rules.dst_len >= 96).all()
    assert not rules.dscp_mask.any()
    # 1483495581 883698242 13930 1707 6 445
    assert len(trace) == 100_000 and trace.labelled.all()
    assert (trace.src[0], trace.dst[0], trace.src_port[0], trace.dst_port[0], trace.proto[0],
            trace.label[0]) == (1483495581, 883698242, 13930, 1707, 6, 445)
    assert trace.src.dtype == np.uint32 and trace.src_port.dtype == np.uint16
    assert trace.proto.dtype == np.uint8 and trace.label.dtype == np.int32


@pytest.mark.parametrize("name", ["acl1_100k", "fw1_100k", "ipc1_100k"])
def test_loader_100k_labelled_prefix(name):
    rules, trace = rule_set(name)
    assert 90_000 < len(rules) <= 100_000
    assert trace.labelled[:5120].all() and not trace.labelled[5120:].any()
    assert (trace.label[5120:] <= 0).all()


def test_loader_wildcards_and_masks():
    rules = parse_rules([
        "@0.0.0.0/0\t10.1.2.0/24\t0 : 65535\t80 : 80\t0x00/0x00\t0x0000/0x0000\t\n",
        "@192.168.0.0/16\t0.0.0.0/0\t1024 : 65535\t0 : 65535\t0x11/0xFF\t0x0000/0x0200\n",
    ])
    assert list(rules.src_len) == [96, 112] and list(rules.dst_len) == [120, 96]
    assert list(rules.proto_mask) == [0, 0xFF] and list(rules.proto) == [0, 0x11]
    assert list(rules.src_port_lo) == [0, 1024]
    np.testing.assert_array_equal(rules.dst[0], ipv4_mapped(np.array([0x0A010200]))[0])


@pytest.mark.parametrize("bad", [
    "176.19.181.33/32\t90.145.23.162/32\t0 : 65535\t1550 : 1550\t0x06/0xFF\n",  # no '@'
    "@176.19.181.33/33\t90.145.23.162/32\t0 : 65535\t1550 : 1550\t0x06/0xFF\n",
    "@176.19.181.33/32\t90.145.23.162/32\t0 : 65535\t1550 : 1549\t0x06/0xFF\n",
    "@176.19.181.33/32\t90.145.23.162/32\t0 : 65536\t1550 : 1550\t0x06/0xFF\n",
    "@176.19.181.333/32\t90.145.23.162/32\t0 : 65535\t1550 : 1550\t0x06/0xFF\n",
    "@176.19.181.33/32\t90.145.23.162/32\t0 : 65535\n",
])
def test_loader_rejects_malformed(bad):
    with pytest.raises(ValueError, match="line 1"):
        parse_rules([bad])


def test_trace_minus_labels(tmp_path):
    p = tmp_path / "t"
    p.write_text("1 2 3 4 6 7\n1 2 3 4 6 -7\n4294967295 0 65535 0 255 0\n")
    t = load_trace(p)
    assert list(t.labelled) == [True, False, True]
    assert list(t.label) == [7, -7, 0]
    assert t.src[2] == 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------
# the reference classifier, proven on the labels


_REFERENCE: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def reference_results(name):
    """(line indices, reference first match) for every labelled trace line plus, in the 100k
    traces, a sample of UNLABELLED_SAMPLE unlabelled lines (computed once per rule set)."""
    if name not in _REFERENCE:
        rules, trace = rule_set(name)
        idx = np.flatnonzero(trace.labelled)
        unlabelled = np.flatnonzero(~trace.labelled)
        if len(unlabelled):
            rng = np.random.default_rng(len(rules))
            idx = np.sort(np.concatenate([idx, rng.choice(
                unlabelled, min(UNLABELLED_SAMPLE, len(unlabelled)), replace=False)]))
        t = trace.take(idx)
        _REFERENCE[name] = idx, classify(rules, t.src, t.dst, t.src_port, t.dst_port, t.proto)
    return _REFERENCE[name]


@pytest.mark.parametrize("name", RULE_SETS)
def test_reference_matches_labels(name):
    _, trace = rule_set(name)
    idx, want = reference_results(name)
    lab = trace.labelled[idx]
    assert lab.sum() == trace.labelled.sum()
    assert (want[lab] == trace.label[idx[lab]]).all(), describe_mismatches(
        trace, want[lab], trace.label[idx[lab]], idx[lab])
    # unlabelled lines (-N): N is the rule the header was generated from, so it matches and
    # the first match is at or before it
    assert (want[~lab] <= -trace.label[idx[~lab]]).all()
    assert (want[~lab] >= 0).all()


@pytest.mark.parametrize("name", ["acl1_1k", "fw1_1k", "ipc1_1k"])
def test_reference_scalar_agrees(name):
    """The pure-Python first_match and the numpy classify agree (and with the labels)."""
    rules, trace = rule_set(name)
    rule_list = [rules.rule(i) for i in range(len(rules))]
    rng = np.random.default_rng(1)
    for i in rng.choice(len(trace), 60, replace=False):
        pkt = (int(trace.src[i]), int(trace.dst[i]), int(trace.src_port[i]),
               int(trace.dst_port[i]), int(trace.proto[i]), 0)
        assert first_match(rule_list, pkt) == trace.label[i], f"trace line {i + 1}"


# ---------------------------------------------------------------------------------------------
# isolane's RuleTable


@pytest.fixture(scope="module")
def tables():
    """name -> RuleTable built from the loader's arrays (built once per module)."""
    RuleTable = rule_table_class()
    cache: dict = {}

    def get(name):
        if name not in cache:
            rules, _ = rule_set(name)
            cache[name] = RuleTable(*rules.args())
        return cache[name]

    return get


@pytest.mark.parametrize("name", RULE_SETS)
def test_rule_table_matches_labels(name, tables):
    rules, trace = rule_set(name)
    table = tables(name)
    assert len(table) == len(rules)
    got = np.asarray(table.lookup(trace.src, trace.dst, trace.src_port, trace.dst_port,
                                  trace.proto))
    assert got.dtype == np.int32 and got.shape == (len(trace),)
    idx = np.flatnonzero(trace.labelled)
    assert len(idx) >= 5120
    assert (got[idx] == trace.label[idx]).all(), describe_mismatches(
        trace, got[idx], trace.label[idx], idx)

    # 100k traces: a sample of the unlabelled lines against the reference
    ref_idx, want = reference_results(name)
    unl = ~trace.labelled[ref_idx]
    if unl.any():
        sample = ref_idx[unl]
        assert (got[sample] == want[unl]).all(), describe_mismatches(
            trace, got[sample], want[unl], sample)


@pytest.mark.parametrize("name", ["acl1_10k", "fw1_10k", "ipc1_10k"])
def test_rule_table_mapped_addresses_and_dscp(name, tables):
    """The same lookups with (n, 16) IPv4-mapped addresses and an explicit DSCP column."""
    _, trace = rule_set(name)
    t = trace.take(slice(0, 20_000))
    table = tables(name)
    a = np.asarray(table.lookup(t.src, t.dst, t.src_port, t.dst_port, t.proto))
    b = np.asarray(table.lookup(t.src16(), t.dst16(), t.src_port, t.dst_port, t.proto,
                                np.arange(len(t), dtype=np.uint8) % 64))
    np.testing.assert_array_equal(a, t.label)
    np.testing.assert_array_equal(b, t.label)


@pytest.mark.parametrize("name", RULE_SETS)
def test_from_classbench_equals_loader(name, tables):
    RuleTable = rule_table_class()
    if not hasattr(RuleTable, "from_classbench"):
        pytest.skip("RuleTable.from_classbench does not exist")
    path, _ = rule_set_paths(name)
    rules, trace = rule_set(name)
    a, b = tables(name), RuleTable.from_classbench(str(path))
    assert len(a) == len(b) == len(rules)
    if hasattr(a, "memory_bytes"):  # same structure; allocation slack may differ a little
        assert 0.5 < a.memory_bytes / b.memory_bytes < 2
    # same first match everywhere on the trace, and on packets aimed at every 7th rule
    args = (trace.src, trace.dst, trace.src_port, trace.dst_port, trace.proto)
    np.testing.assert_array_equal(np.asarray(b.lookup(*args)), np.asarray(a.lookup(*args)))
    aimed = packets_inside(rules, np.arange(0, len(rules), 7), seed=7)
    np.testing.assert_array_equal(np.asarray(b.lookup(*aimed)), np.asarray(a.lookup(*aimed)))


def packets_inside(rules: Rules, which, seed=0):
    """For each rule index in ``which``, a packet (IPv4 uint32 addresses) inside that rule."""
    rng = np.random.default_rng(seed)
    which = np.asarray(which)

    def addr(a16, length):
        base = a16[:, 12:16].copy().view(">u4").ravel().astype(np.uint64)
        host_bits = 128 - length.astype(np.int64)  # IPv4-mapped: at most 32 host bits
        span = np.left_shift(np.uint64(1), host_bits.astype(np.uint64))
        base &= ~(span - np.uint64(1)) & np.uint64(0xFFFFFFFF)
        return (base + (rng.integers(0, 1 << 62, len(base)).astype(np.uint64) % span)).astype(
            np.uint32)

    def port(lo, hi):
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        return (lo + rng.integers(0, 1 << 30, len(lo)) % (hi - lo + 1)).astype(np.uint16)

    r = rules.take(which)
    proto = np.where(r.proto_mask == 0, rng.choice([1, 6, 17, 47], len(r)), r.proto)
    return (addr(r.src, r.src_len), addr(r.dst, r.dst_len),
            port(r.src_port_lo, r.src_port_hi), port(r.dst_port_lo, r.dst_port_hi),
            proto.astype(np.uint8))


@pytest.mark.parametrize("name", ["acl1_10k", "fw1_10k", "ipc1_10k"])
def test_rule_table_aimed_packets_vs_reference(name, tables):
    """Packets drawn inside every rule (not just the trace's): RuleTable == reference."""
    rules, _ = rule_set(name)
    pk = packets_inside(rules, np.arange(len(rules)), seed=3)
    got = np.asarray(tables(name).lookup(*pk))
    want = classify(rules, *pk)
    assert (want <= np.arange(len(rules))).all()  # each packet is inside its rule
    bad = np.flatnonzero(got != want)
    assert len(bad) == 0, (f"{len(bad)} mismatches, packets aimed at rules {bad[:5]}: "
                           f"got {got[bad[:5]]}, want {want[bad[:5]]}")


@pytest.mark.parametrize("name", ["acl1_1k", "fw1_1k", "ipc1_1k", "fw1_10k"])
def test_remove_then_insert_on_classbench(name):
    """Remove a busy rule: its packets go to their next match, the others' labels shift;
    insert it back: the original labels return."""
    RuleTable = rule_table_class()
    rules, trace = rule_set(name)
    table = RuleTable(*rules.args())
    args = (trace.src, trace.dst, trace.src_port, trace.dst_port, trace.proto)
    counts = np.bincount(trace.label, minlength=len(rules))
    order = np.argsort(counts)[::-1]
    for r in [int(order[0]), int(order[len(order) // 3]), 0, len(rules) - 1]:
        table.remove(r)
        assert len(table) == len(rules) - 1
        got = np.asarray(table.lookup(*args))
        want = trace.label.copy()
        want[trace.label > r] -= 1
        moved = np.flatnonzero(trace.label == r)
        if len(moved):
            rest = rules.take(np.arange(len(rules)) != r)
            t = trace.take(moved)
            want[moved] = classify(rest, t.src, t.dst, t.src_port, t.dst_port, t.proto)
        idx = np.arange(len(trace))
        assert (got == want).all(), f"after remove({r}): " + describe_mismatches(
            trace, got, want, idx)
        table_insert(table, r, rules.rule(r))
        assert len(table) == len(rules)
        got = np.asarray(table.lookup(*args))
        assert (got == trace.label).all(), f"after re-inserting {r}: " + describe_mismatches(
            trace, got, trace.label, idx)


def test_reference_table_remove_insert_roundtrip():
    """ReferenceTable's own updates (used by the property tests) on a real set."""
    rules, trace = rule_set("fw1_1k")
    ref = ReferenceTable.from_rules(rules)
    t = trace.take(slice(0, 5000))
    args = (t.src, t.dst, t.src_port, t.dst_port, t.proto)
    ref.remove(5)
    ref.insert(5, *rules.rule(5))
    assert ref.as_rules().equal(rules)
    np.testing.assert_array_equal(ref.lookup(*args), t.label)
    assert rule_to_dict(rules.rule(0))  # every ClassBench rule can be written as a dict
    assert all(int(m) in (0, 0xFF) for m in rules.proto_mask)
