"""ClassBench rule sets and traces as the numpy arrays of ``docs/classify-contract.md``.

The files live in ``../shared/classbench`` (format in its README):

* rules: ``@SRC/LEN<TAB>DST/LEN<TAB>SLO : SHI<TAB>DLO : DHI<TAB>0xPROTO/0xMASK<TAB>0xFLAGS/0xMASK``,
  one a line in priority order. IPv4 prefixes become IPv4-mapped IPv6 (``::ffff:a.b.c.d``,
  length + 96); there is no DSCP (mask 0) and the TCP-flags column is ignored.
* traces: ``SRC_U32 DST_U32 SPORT DPORT PROTO LABEL``; LABEL is the first matching rule, or
  ``-N`` (not a true label: in the ``_100k`` traces only the first 5,120 lines are labelled).

    from support.classbench import load_rules, load_trace, rule_set
    rules = load_rules(CLASSBENCH / "acl1_1k")      # Rules (arrays in RuleTable's order)
    trace = load_trace(CLASSBENCH / "acl1_1k_trace")
    RuleTable(*rules.args()); table.lookup(trace.src, trace.dst, trace.src_port, ...)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CLASSBENCH = SHARED / "classbench"

SEEDS = ("acl1", "fw1", "ipc1")
SIZES = ("1k", "10k", "100k")
RULE_SETS = tuple(f"{seed}_{size}" for size in SIZES for seed in SEEDS)

# RuleTable(...)'s positional arguments, in order (docs/classify-contract.md)
RULE_FIELDS = ("src", "src_len", "dst", "dst_len", "src_port_lo", "src_port_hi",
               "dst_port_lo", "dst_port_hi", "proto", "proto_mask", "dscp", "dscp_mask")

IPV4_MAPPED_PREFIX = bytes(10) + b"\xff\xff"


def classbench_dir() -> Path:
    """``../shared/classbench``, or pytest.skip when it is not there."""
    if not CLASSBENCH.is_dir():
        import pytest

        pytest.skip(f"ClassBench files not found at {CLASSBENCH} (../shared beside the project)")
    return CLASSBENCH


def rule_set_paths(name: str) -> tuple[Path, Path]:
    """(rules, trace) paths of a rule set such as ``acl1_10k``; skips if missing."""
    d = classbench_dir()
    rules, trace = d / name, d / f"{name}_trace"
    if not (rules.is_file() and trace.is_file()):
        import pytest

        pytest.skip(f"{rules} or its trace is missing")
    return rules, trace


def ipv4_mapped(addr: np.ndarray) -> np.ndarray:
    """(n, 16) uint8 IPv4-mapped IPv6 addresses from host-order uint32 IPv4 addresses."""
    a = np.asarray(addr, dtype=np.uint32).ravel()
    out = np.zeros((len(a), 16), dtype=np.uint8)
    out[:, 10:12] = 0xFF
    out[:, 12:16] = a.astype(">u4").view(np.uint8).reshape(-1, 4)
    return out


@dataclasses.dataclass
class Rules:
    """Parallel arrays, one entry per rule, priority order (contract dtypes)."""

    src: np.ndarray  # (n, 16) uint8
    src_len: np.ndarray  # uint8, 0..128
    dst: np.ndarray
    dst_len: np.ndarray
    src_port_lo: np.ndarray  # uint16, inclusive
    src_port_hi: np.ndarray
    dst_port_lo: np.ndarray
    dst_port_hi: np.ndarray
    proto: np.ndarray  # uint8
    proto_mask: np.ndarray
    dscp: np.ndarray  # uint8
    dscp_mask: np.ndarray

    def __len__(self) -> int:
        return len(self.src_len)

    def args(self) -> tuple[np.ndarray, ...]:
        """The arrays in ``RuleTable(...)``'s positional order."""
        return tuple(getattr(self, f) for f in RULE_FIELDS)

    def rule(self, i: int) -> tuple:
        """Rule ``i`` as the arguments of ``RuleTable.insert(index, ...)`` after the index:
        src (16-byte uint8 array), src_len, dst, dst_len, ports, proto, mask, dscp, mask."""
        return tuple(getattr(self, f)[i].copy() if f in ("src", "dst") else
                     int(getattr(self, f)[i]) for f in RULE_FIELDS)

    def take(self, idx) -> Rules:
        """A new Rules (copies) of the rules at ``idx`` (a slice, index array or mask)."""
        return Rules(**{f: np.array(getattr(self, f)[idx], order="C", copy=True)
                        for f in RULE_FIELDS})

    @staticmethod
    def empty() -> Rules:
        return Rules.from_lists([])

    @staticmethod
    def from_lists(rules: list[tuple]) -> Rules:
        """From tuples in RULE_FIELDS order (src/dst as 16 bytes or 16 ints)."""
        cols = list(zip(*rules)) if rules else [[] for _ in RULE_FIELDS]
        out = {}
        for f, col in zip(RULE_FIELDS, cols):
            if f in ("src", "dst"):
                out[f] = np.array([np.frombuffer(bytes(bytearray(a)), np.uint8) for a in col],
                                  dtype=np.uint8).reshape(-1, 16)
            else:
                dt = np.uint16 if "port" in f else np.uint8
                out[f] = np.array(col, dtype=dt)
        return Rules(**out)

    def equal(self, other: Rules) -> bool:
        return all(np.array_equal(getattr(self, f), getattr(other, f)) for f in RULE_FIELDS)


@dataclasses.dataclass
class Trace:
    """A ClassBench trace: IPv4 5-tuples (host-order uint32 addresses) and labels."""

    src: np.ndarray  # uint32
    dst: np.ndarray  # uint32
    src_port: np.ndarray  # uint16
    dst_port: np.ndarray  # uint16
    proto: np.ndarray  # uint8
    label: np.ndarray  # int32: first matching rule, or the -N of unlabelled lines (see labelled)
    labelled: np.ndarray  # bool: the label is a true first match (it was not written "-N")

    def __len__(self) -> int:
        return len(self.src)

    def src16(self) -> np.ndarray:
        return ipv4_mapped(self.src)

    def dst16(self) -> np.ndarray:
        return ipv4_mapped(self.dst)

    def take(self, idx) -> Trace:
        return Trace(**{f.name: np.array(getattr(self, f.name)[idx], order="C", copy=True)
                        for f in dataclasses.fields(self)})


def _ipv4(text: str) -> int:
    parts = text.split(".")
    if len(parts) != 4:
        raise ValueError(f"not an IPv4 address: {text!r}")
    v = 0
    for p in parts:
        b = int(p)
        if not 0 <= b <= 255:
            raise ValueError(f"not an IPv4 address: {text!r}")
        v = (v << 8) | b
    return v


def _prefix(text: str) -> tuple[int, int]:
    addr, _, length = text.partition("/")
    n = int(length)
    if not 0 <= n <= 32:
        raise ValueError(f"bad prefix length in {text!r}")
    return _ipv4(addr), n


def _range(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    if not sep:
        raise ValueError(f"not a 'lo : hi' range: {text!r}")
    a, b = int(lo), int(hi)
    if not (0 <= a <= b <= 0xFFFF):
        raise ValueError(f"bad port range {text!r}")
    return a, b


def _value_mask(text: str) -> tuple[int, int]:
    v, sep, m = text.partition("/")
    if not sep:
        raise ValueError(f"not a 0xVALUE/0xMASK pair: {text!r}")
    return int(v, 16), int(m, 16)


def parse_rules(lines) -> Rules:
    """Parse ClassBench rule lines (an iterable of str) into Rules."""
    sa, sl, da, dl, slo, shi, dlo, dhi, pr, pm = ([] for _ in range(10))
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("@"):
            raise ValueError(f"line {lineno}: a ClassBench rule starts with '@': {line[:60]!r}")
        cols = line[1:].split("\t")
        if len(cols) < 5:
            raise ValueError(f"line {lineno}: expected 5-6 tab-separated fields: {line[:80]!r}")
        try:
            s, n = _prefix(cols[0].strip())
            sa.append(s), sl.append(n)
            d, n = _prefix(cols[1].strip())
            da.append(d), dl.append(n)
            a, b = _range(cols[2])
            slo.append(a), shi.append(b)
            a, b = _range(cols[3])
            dlo.append(a), dhi.append(b)
            v, m = _value_mask(cols[4].strip())
            if not (0 <= v <= 0xFF and 0 <= m <= 0xFF):
                raise ValueError(f"protocol/mask out of range: {cols[4]!r}")
            pr.append(v), pm.append(m)
            # cols[5] (TCP flags/mask) is ignored, as by DPDK and by the trace labels
        except ValueError as e:
            raise ValueError(f"line {lineno}: {e}") from None
    n = len(sl)
    return Rules(
        src=ipv4_mapped(np.array(sa, dtype=np.uint32)),
        src_len=(np.array(sl, dtype=np.uint8) + 96).astype(np.uint8),
        dst=ipv4_mapped(np.array(da, dtype=np.uint32)),
        dst_len=(np.array(dl, dtype=np.uint8) + 96).astype(np.uint8),
        src_port_lo=np.array(slo, dtype=np.uint16),
        src_port_hi=np.array(shi, dtype=np.uint16),
        dst_port_lo=np.array(dlo, dtype=np.uint16),
        dst_port_hi=np.array(dhi, dtype=np.uint16),
        proto=np.array(pr, dtype=np.uint8),
        proto_mask=np.array(pm, dtype=np.uint8),
        dscp=np.zeros(n, dtype=np.uint8),
        dscp_mask=np.zeros(n, dtype=np.uint8),
    )


def load_rules(path) -> Rules:
    with open(path, encoding="ascii") as f:
        return parse_rules(f)


def load_trace(path) -> Trace:
    """Parse a trace file; ``labelled`` is False on lines whose label is written ``-N``."""
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split()
    if len(lines) % 6:
        raise ValueError(f"{path}: expected 6 whitespace-separated fields per line")
    cols = np.array(lines, dtype=object).reshape(-1, 6)
    label_text = cols[:, 5]
    labelled = np.array([not t.startswith(b"-") for t in label_text], dtype=bool)
    num = np.array(cols[:, :5].ravel(), dtype=np.int64).reshape(-1, 5)
    if (num[:, :2] < 0).any() or (num[:, :2] > 0xFFFFFFFF).any():
        raise ValueError(f"{path}: address out of range")
    if (num[:, 2:4] < 0).any() or (num[:, 2:4] > 0xFFFF).any():
        raise ValueError(f"{path}: port out of range")
    if (num[:, 4] < 0).any() or (num[:, 4] > 0xFF).any():
        raise ValueError(f"{path}: protocol out of range")
    return Trace(
        src=num[:, 0].astype(np.uint32),
        dst=num[:, 1].astype(np.uint32),
        src_port=num[:, 2].astype(np.uint16),
        dst_port=num[:, 3].astype(np.uint16),
        proto=num[:, 4].astype(np.uint8),
        label=np.array(label_text, dtype=np.int64).astype(np.int32),
        labelled=labelled,
    )


_CACHE: dict[str, tuple[Rules, Trace]] = {}


def rule_set(name: str) -> tuple[Rules, Trace]:
    """(Rules, Trace) of ``../shared/classbench/<name>`` (cached per process); skips if the
    files are missing."""
    if name not in _CACHE:
        rules, trace = rule_set_paths(name)
        _CACHE[name] = (load_rules(rules), load_trace(trace))
    return _CACHE[name]


# ---------------------------------------------------------------------------------------------
# RuleTable adapters: the contract says insert(index, rule...) with the array fields; the
# table may instead take one rule dict (RuleTable.from_rules' form). table_insert uses
# whichever the installed RuleTable accepts.

PROTO_FULL, DSCP_FULL = 0xFF, 0x3F


def rule_to_dict(rule: tuple) -> dict:
    """A rule tuple (RULE_FIELDS order) as a ``RuleTable.from_rules`` dict: prefixes in
    IPv6 notation over the 128-bit space (``::ffff:a.b.c.d/120`` for an IPv4 /24), ports as
    (lo, hi), proto/dscp as a value (mask 0xff / 0x3f) or absent (mask 0). Raises ValueError
    for a partial protocol or DSCP mask, which the dict form cannot express."""
    import ipaddress

    (src, src_len, dst, dst_len, sp_lo, sp_hi, dp_lo, dp_hi,
     proto, proto_mask, dscp, dscp_mask) = rule
    d: dict = {}
    for key, addr, length in (("src", src, src_len), ("dst", dst, dst_len)):
        length = int(length)
        if length:
            a = int.from_bytes(bytes(bytearray(np.asarray(addr, np.uint8))), "big")
            a &= ((1 << 128) - 1) ^ ((1 << (128 - length)) - 1)
            d[key] = f"{ipaddress.IPv6Address(a)}/{length}"
    if (int(sp_lo), int(sp_hi)) != (0, 0xFFFF):
        d["src_ports"] = (int(sp_lo), int(sp_hi))
    if (int(dp_lo), int(dp_hi)) != (0, 0xFFFF):
        d["dst_ports"] = (int(dp_lo), int(dp_hi))
    for key, value, mask, full in (("proto", proto, proto_mask, PROTO_FULL),
                                   ("dscp", dscp, dscp_mask, DSCP_FULL)):
        mask = int(mask)
        if mask == full:
            d[key] = int(value) & full
        elif mask:
            raise ValueError(f"{key} mask {mask:#x} cannot be written as a rule dict")
    return d


def dict_expressible(rule: tuple) -> bool:
    return int(rule[9]) in (0, PROTO_FULL) and int(rule[11]) in (0, DSCP_FULL)


_INSERT_FORM: dict[type, str] = {}


def insert_form(table) -> str:
    """"positional" when ``table.insert(index, *fields)`` works, else "dict"."""
    cls = type(table)
    if cls not in _INSERT_FORM:
        probe = cls(*Rules.from_lists([(bytes(16), 0, bytes(16), 0, 0, 0xFFFF, 0, 0xFFFF,
                                        0, 0, 0, 0)]).args())
        try:
            probe.insert(0, bytes(16), 0, bytes(16), 0, 0, 0xFFFF, 0, 0xFFFF, 0, 0, 0, 0)
            _INSERT_FORM[cls] = "positional"
        except TypeError:
            _INSERT_FORM[cls] = "dict"
    return _INSERT_FORM[cls]


def table_insert(table, index: int, rule: tuple) -> None:
    """Insert rule (RULE_FIELDS order) before ``index`` in whichever form the table takes."""
    if insert_form(table) == "positional":
        table.insert(index, *rule)
    else:
        table.insert(index, rule_to_dict(rule))
