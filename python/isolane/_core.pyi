"""Type stubs for isolane's Rust core (hand-kept; checked by mypy.stubtest in CI)."""

import os
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Protocol, final

import numpy as np
import numpy.typing as npt

from isolane.policy.compile import TenantTables
from isolane.policy.model import Rule, RuleSlots
from isolane.policy.qos import QosSettings, TenantQos

__all__ = [
    "BatchError",
    "CaptureError",
    "CapturePermissionError",
    "CaptureReader",
    "Engine",
    "EngineError",
    "DuplicateKeyError",
    "GENEVE_PORT",
    "IsolaneError",
    "LiveCapture",
    "NoTenantError",
    "PacketBatch",
    "PcapError",
    "PcapIterator",
    "RuleIndexError",
    "RuleTable",
    "SERIES_FIELDS",
    "TimelineView",
    "VXLAN_PORT",
    "YamlError",
    "burst_flow_layout",
    "burst_layout",
    "profile_event_layout",
    "load_yaml",
    "stream_yaml",
    "YamlStream",
    "codes",
    "parse_records",
    "processed_layout",
    "read_pcap",
    "record_layout",
    "rule_row_layout",
    "shadowed_rules",
    "stats_layout",
    "verdict_layout",
]

VXLAN_PORT: int
GENEVE_PORT: int
SERIES_FIELDS: list[str]
"""The fields of a timeline series, by the second axis of ``TimelineView.*_series``."""

class IsolaneError(Exception):
    """Base class of isolane's errors."""

class PcapError(IsolaneError):
    """A capture file that is not valid pcap/pcapng."""

    path: str | None
    offset: int
    packet: int
    """The packet being read, counted from 1 as Wireshark counts; 0 for the file header."""

class EngineError(IsolaneError, ValueError):
    """A spec, rule or argument isolane's engine refuses (also a ValueError); the message says which part and why."""

class NoTenantError(EngineError, KeyError):
    """A tenant the engine does not have (also a KeyError)."""

class RuleIndexError(EngineError, IndexError):
    """A rule edit at an index the tenant's rules do not have (also an IndexError)."""

class BatchError(IsolaneError, ValueError):
    """Arrays that do not describe a packet batch (also a ValueError)."""

class CaptureError(IsolaneError, OSError):
    """A live capture that cannot be opened or read (also an OSError; `errno` is the kernel's answer, or None)."""

class CapturePermissionError(CaptureError, PermissionError):
    """A live capture the process lacks the privileges for (also a PermissionError); the message says which."""

class YamlError(IsolaneError):
    """A YAML text that is not one document by isolane's rules; `line` and `column` say where."""

    line: int
    column: int

class DuplicateKeyError(YamlError):
    """A YAML mapping that repeats a key at `line` and `column`; `first_line` has the first."""

    first_line: int

@final
class PacketBatch:
    """Packets as numpy arrays: bytes in one buffer plus per-packet offsets, captured lengths,
    wire lengths, timestamps (ns) and link type. Packet ``i`` is
    ``data[offsets[i] : offsets[i] + lengths[i]]``; ``data`` may hold other bytes between
    packets (a batch read from a file is the file itself, record headers included, and is
    read-only when ``read_pcap`` mapped it)."""

    @staticmethod
    def from_arrays(
        data: npt.ArrayLike | bytes | bytearray,
        offsets: npt.ArrayLike,
        lengths: npt.ArrayLike,
        timestamps_ns: npt.ArrayLike,
        wire_lengths: npt.ArrayLike | None = None,
        link_type: int | npt.ArrayLike | None = None,
    ) -> PacketBatch:
        """Build a batch without copying arrays that already have the right dtype
        (uint8 data, uint64 offsets, uint32 lengths, int64 timestamps) and are contiguous.
        ``wire_lengths`` defaults to ``lengths``; ``link_type`` to Ethernet (1), or one per packet."""

    @property
    def data(self) -> npt.NDArray[np.uint8]: ...
    @property
    def offsets(self) -> npt.NDArray[np.uint64]: ...
    @property
    def lengths(self) -> npt.NDArray[np.uint32]: ...
    @property
    def wire_lengths(self) -> npt.NDArray[np.uint32]: ...
    @property
    def timestamps_ns(self) -> npt.NDArray[np.int64]: ...
    @property
    def link_type(self) -> int | None:
        """The link type shared by every packet, or None when they differ."""

    @property
    def link_types(self) -> npt.NDArray[np.uint16]:
        """Every packet's link type."""

    def packet(self, index: int) -> bytes:
        """The captured bytes of packet ``index`` (negative counts from the end)."""

    def __len__(self) -> int: ...

@final
class LiveCapture:
    """A capture from a Linux device through an AF_PACKET socket and a TPACKET_V3 ring
    (Linux only; see ``isolane.linux.LiveCapture`` and docs/linux.md). ``timeout_ms`` is how
    long the kernel keeps a block that is not full; ``direction`` is "both", "in" or "out"."""

    def __new__(
        cls,
        dev: str,
        netns: str | None = None,
        *,
        snaplen: int = 262144,
        block_size: int = 1048576,
        blocks: int = 64,
        timeout_ms: int = 10,
        direction: str = "both",
    ) -> LiveCapture: ...
    def next_batch(self, timeout_ms: int | None = None) -> PacketBatch | None:
        """The packets of the ring's ready blocks as one batch, waiting up to ``timeout_ms``
        (None: until packets come) for them; None when the time passed without a packet."""
    def stats(self) -> dict[str, int]:
        """``packets`` (the kernel saw, drops included), ``drops``, ``freezes``, ``delivered``,
        ``skipped`` (left out by ``direction``) and ``blocks``, since the capture opened."""
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def dev(self) -> str: ...
    @property
    def netns(self) -> str | None: ...
    @property
    def link_type(self) -> int:
        """1 (Ethernet) or 101 (raw IP)."""
    def __enter__(self) -> LiveCapture: ...
    def __exit__(self, kind: object, value: object, traceback: object) -> bool: ...

@final
class PcapIterator:
    """Streams a capture as PacketBatch objects of at most ``batch_size`` packets."""

    def __new__(cls, path: str | os.PathLike[str], batch_size: int = 65536) -> PcapIterator: ...
    def __iter__(self) -> PcapIterator: ...
    def __next__(self) -> PacketBatch: ...
    @property
    def position(self) -> int:
        """Bytes of the file consumed so far."""

    @property
    def size(self) -> int:
        """The file's size in bytes when it was opened."""

    @property
    def packets_read(self) -> int: ...
    @property
    def format(self) -> str:
        """``"pcap"`` or ``"pcapng"``, from the file's magic number."""

    @property
    def path(self) -> str: ...

@final
class CaptureReader:
    """Streams one or more captures (``"-"``: standard input; gzip and zstd undone, told by
    content) as PacketBatch objects in timestamp order (ties ordered as mergecap orders them), at most
    ``batch_size`` packets a batch. ``isolane.open_captures`` wraps it."""

    def __new__(cls, paths: Sequence[str | os.PathLike[str]], batch_size: int = 65536) -> CaptureReader: ...
    def __iter__(self) -> CaptureReader: ...
    def __next__(self) -> PacketBatch: ...
    @property
    def position(self) -> int:
        """Bytes read from the sources so far (compressed bytes for a compressed file)."""

    @property
    def size(self) -> int | None:
        """The sources' total size in bytes, or None when one has no size (standard input, a pipe)."""

    @property
    def packets_read(self) -> int: ...
    @property
    def formats(self) -> list[str]:
        """Each capture's format: "pcap" or "pcapng"."""

    @property
    def compressions(self) -> list[str | None]:
        """Each capture's compression: "gzip", "zstd" or None."""

    @property
    def paths(self) -> list[str]:
        """Each capture as messages name it (`<stdin>` for `-`)."""

    def issues(self) -> list[dict[str, Any]]:
        """What the reader met in each capture so far, one dict a capture (see `isolane.CaptureIssues`)."""

def read_pcap(path: str | os.PathLike[str]) -> PacketBatch:
    """Read a whole pcap/pcapng file (format detected from its content) into one batch.
    Files of 1 MiB or more are mapped read-only and indexed in place, not copied; as with
    ``numpy.memmap`` the file must not be truncated while the batch is alive (use
    ``iter_pcap`` for a capture that is still being written)."""

def load_yaml(text: str) -> Any:
    """The one YAML document in `text` by the YAML 1.2 core schema (None for none), as dicts, lists,
    strings, ints, floats, bools and None; raises YamlError or DuplicateKeyError."""

class _RuleVocabulary(Protocol):
    """`isolane.policy.constants.RULE_VOCABULARY`: the names and limits rules are read with."""

    @property
    def protocols(self) -> Mapping[str, int]: ...
    @property
    def dscps(self) -> Mapping[str, int]: ...
    @property
    def port_protocols(self) -> AbstractSet[int]: ...
    @property
    def max_expansion(self) -> int: ...

def stream_yaml(text: str, key: str, rules: _RuleVocabulary | None = None) -> YamlStream:
    """Starts reading the YAML document in `text` (as `load_yaml` reads it) on a thread of its own
    and returns at once: the items of the root mapping's sequence under `key` can be taken while
    the rest is read. With `rules`, the reader also reads each item's plainly valid rules
    (`YamlStream.plain_rules`)."""

@final
class YamlStream:
    """A YAML document being read on another thread, and the items of its streamed sequence: a
    sequence of Python objects made as they are read (a new object each read), each waiting as
    needed for the reader to get there. Past the last item: `IndexError`, or the document's error
    (YamlError or DuplicateKeyError) if the reader stopped at one."""

    def head(self) -> dict[Any, Any] | None:
        """The root mapping's entries before the streamed sequence, once it begins; None for a
        document without one to stream (`document()` then holds it all)."""
    def document(self) -> Any:
        """The whole document, once read, with this stream in place of the streamed sequence."""
    def repr_digest(self, index: int) -> bytes | None:
        """What `isolane.policy.reuse.source_key` gives item `index` (waiting for it), if the reader
        could tell: None for an item that is not a mapping, or whose `repr` Python spells by rules
        of its own (`source_key` then takes it)."""
    def plain_rules(
        self, index: int, class_names: list[str] | None, default_class: str | None, slots: RuleSlots
    ) -> tuple[list[Rule | None], int, bytes | None] | None:
        """The rules of item `index` (waiting for it) that the reader found plainly valid, made
        `isolane.policy.model.Rule`s (through `slots`, the member descriptors of its fields) in a
        tenant of the classes `class_names` (None: not known) whose default class is
        `default_class`; None in their list where Python must read the rule (it names a class the
        tenant lacks, or it was not plain), and how many such rules there are; and, where every
        rule was made and there are two or more, the tenant's table rows packed as
        `isolane.policy.compile` packs them. None for an item without a list of rules, or a stream
        started without `rules`."""
    def available(self, most: int) -> int:
        """How many items there are, counting up to `most` (waiting only for that many)."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> Any: ...

def parse_records(batch: PacketBatch, vxlan_ports: list[int], geneve_ports: list[int], threads: int) -> npt.NDArray[np.uint8]:
    """Parse a batch into packed records (raw bytes; view them with ``isolane.PARSED_DTYPE``)."""

def codes() -> dict[str, list[tuple[str, int]]]:
    """Every family of codes: {family: [(name, code), ...]}, names in snake case, in code order."""

def record_layout() -> tuple[list[tuple[str, str, int]], int]:
    """The parsed record's fields as (name, numpy type, byte offset), and its size."""

def burst_layout() -> tuple[list[tuple[str, str, int]], int]:
    """A burst event's fields as (name, numpy type, byte offset), and its size."""

def profile_event_layout() -> tuple[list[tuple[str, str, int]], int]:
    """A profile switch's fields as (name, numpy type, byte offset), and its size."""

def burst_flow_layout() -> tuple[list[tuple[str, str, int]], int]:
    """A burst flow's fields as (name, numpy type, byte offset), and its size."""

def processed_layout() -> tuple[list[tuple[str, str, int]], int]:
    """The processed record's fields as (name, numpy type, byte offset), and its size."""

def rule_row_layout() -> tuple[list[tuple[str, str, int]], int]:
    """The table row record's fields as (name, numpy type, byte offset), and its size."""

def shadowed_rules(packed_rows: bytes, tenant: str, big_group: int) -> list[tuple[int, list[int]]]:
    """The policy rules of tenant `tenant`'s packed table rows that can never match, each with the
    earliest policy rules covering its rows: `[(rule, [covering rules, ascending])]`. Groups of rows
    alike but for their ports larger than `big_group` are indexed by port instead of scanned."""

def verdict_layout() -> tuple[list[tuple[str, str, int]], int]:
    """The verdict record's fields as (name, numpy type, byte offset), and its size."""

def stats_layout() -> tuple[list[tuple[str, str, int]], int]:
    """The statistics row's fields as (name, numpy type, byte offset), and its size."""

@final
class RuleTable:
    """First-match rule table (docs/classify-contract.md): index 0 is checked first."""

    def __new__(
        cls,
        src: npt.ArrayLike,
        src_len: npt.ArrayLike,
        dst: npt.ArrayLike,
        dst_len: npt.ArrayLike,
        src_port_lo: npt.ArrayLike,
        src_port_hi: npt.ArrayLike,
        dst_port_lo: npt.ArrayLike,
        dst_port_hi: npt.ArrayLike,
        proto: npt.ArrayLike,
        proto_mask: npt.ArrayLike,
        dscp: npt.ArrayLike,
        dscp_mask: npt.ArrayLike,
    ) -> RuleTable: ...
    @staticmethod
    def from_classbench(path: str | os.PathLike[str]) -> RuleTable:
        """Read a ClassBench rule file (IPv4 prefixes, port ranges, protocol/mask)."""

    @staticmethod
    def from_rules(rules: Sequence[Mapping[str, Any]]) -> RuleTable:
        """Rules as dicts: ``src``/``dst`` (prefix text or 16-byte address), ``src_ports``/
        ``dst_ports`` (a port or (lo, hi)), ``proto``, ``dscp``; absent keys match anything."""

    def lookup(
        self,
        src: npt.ArrayLike,
        dst: npt.ArrayLike,
        src_port: npt.ArrayLike,
        dst_port: npt.ArrayLike,
        proto: npt.ArrayLike,
        dscp: npt.ArrayLike | None = None,
    ) -> npt.NDArray[np.int32]:
        """First matching rule per packet, -1 for none. Addresses: (n, 16) uint8, or uint32
        IPv4 in host order."""

    def insert(self, index: int, rule: Mapping[str, Any]) -> None:
        """Insert a rule (a dict as for ``from_rules``) before rule ``index``."""

    def remove(self, index: int) -> None:
        """Remove rule ``index``; later rules move up by one."""

    @property
    def memory_bytes(self) -> int: ...
    @property
    def table_count(self) -> int: ...
    def __len__(self) -> int: ...

@final
class Engine:
    """Compiled policy tables; see ``isolane.Engine`` for the user-facing class."""

    def __new__(cls, threads: int = 1) -> Engine: ...
    def apply(
        self,
        ops: Sequence[tuple[str, int, TenantTables | None, TenantQos | None]],
        weight_scale: tuple[int, int],
        settings: QosSettings | None,
        unknown_action: int,
    ) -> tuple[int, int, int]:
        """Applies a policy update as the tenants that changed: ops ("replace" | "insert",
        position, tables, QoS) or ("remove", position, None, None) in order, the port's weight
        scale (times, per: a tenant's share x times // per is its port weight, at least 1), the
        QoS settings if they changed, the action on packets of no tenant. Returns how many
        tenants were kept, patched and rebuilt; nothing changes if anything is refused."""

    def edit_tenant(self, name: str, op: str, at: int, rows: TenantTables | None = None) -> None:
        """Insert, replace or remove policy rule ``at`` of tenant ``name`` (rows: the tables of
        a tenant whose one rule is the new rule)."""

    def classify_records(self, records: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Verdict records (raw bytes) for parsed records (raw bytes)."""

    def process_records(self, records: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Classifies and enforces parsed records (raw bytes of a PARSED_DTYPE array) into
        processed records (raw bytes of a PROCESSED_DTYPE array)."""

    def process_batch(self, batch: PacketBatch, vxlan_ports: list[int], geneve_ports: list[int]) -> npt.NDArray[np.uint8]:
        """Parses, classifies and enforces a batch a chunk at a time (its parsed records are
        never all in memory) into processed records (raw bytes of a PROCESSED_DTYPE array)."""

    def drain(self) -> None:
        """Ends the packet stream: packets in flight reach the port, everything queued is sent,
        every open burst ends."""

    def keep_timeline(self, window_ns: int) -> None:
        """Keeps time series per tenant and class from the next packet on, with the most bytes
        in one window of ``window_ns`` in each bin."""

    def timeline(self) -> TimelineView | None:
        """The time series kept since ``keep_timeline``; None if it was never called."""

    def bursts(self) -> npt.NDArray[np.uint8]:
        """Every burst that ended (raw bytes of a BURST_DTYPE array)."""

    def take_ended_bursts(self) -> npt.NDArray[np.uint8]:
        """The bursts that ended since the last call (raw bytes of a BURST_DTYPE array)."""

    def burst_flows(self, ids: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
        """The top flows of bursts `ids` (raw bytes of a BURST_FLOW_DTYPE array)."""

    def burst_tenants(self) -> list[str]:
        """Tenant names, by the `tenant` of bursts."""

    def profile_events(self) -> npt.NDArray[np.uint8]:
        """Every switch of an adaptive profile so far (raw bytes of a PROFILE_EVENT_DTYPE array)."""

    def profile_tenants(self) -> list[str]:
        """Tenant names, by the `tenant` of profile events."""

    def profile_counts(self) -> list[tuple[str, int | None, list[int], int]]:
        """Per tenant and class that had profiles, by name and class id (None: the tenant's own):
        packets enforced under each profile (by `ProfileId`) and switches."""

    def burst_stats(self) -> list[dict[str, Any]]:
        """One dict per scope watched for bursts: its setting, totals and polled views."""

    def qos_stats(self) -> npt.NDArray[np.uint8]:
        """QoS statistics, one row per (tenant, class id) seen (raw bytes of a STATS_DTYPE array):
        counters by colour and outcome, packets in flight to the port, queueing delay quantiles."""

    def delay_histograms(
        self, edges_ns: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64], list[int], list[str]]:
        """The statistics rows (raw bytes of a STATS_DTYPE array) with, per row, the queueing delays
        at or below each of `edges_ns` (rows x edges) and their exact sum in ns, and the tenant
        names the rows index: one reading, taken while no batch runs."""

    def stats_tenants(self) -> list[str]:
        """Tenant names, by the `tenant` of statistics rows."""

    def counters(self) -> dict[str | None, dict[str, list[int]]]: ...
    @property
    def tenant_names(self) -> list[str]: ...
    @property
    def threads(self) -> int:
        """How many threads ``process_records`` runs on."""

@final
class TimelineView:
    """Time series per tenant and class (docs/report.md, "Timeline")."""

    @property
    def window_ns(self) -> int: ...
    @property
    def bin_ns(self) -> int: ...
    @property
    def start_ns(self) -> int | None: ...
    @property
    def bins(self) -> int: ...
    @property
    def tenants(self) -> list[str | None]: ...
    @property
    def classes(self) -> list[tuple[str | None, int | None]]: ...
    @property
    def tenant_series(self) -> npt.NDArray[np.uint64]: ...
    @property
    def class_series(self) -> npt.NDArray[np.uint64]: ...
    @property
    def tenant_spans(self) -> npt.NDArray[np.int64]: ...
    @property
    def class_spans(self) -> npt.NDArray[np.int64]: ...
    @property
    def class_holds(self) -> npt.NDArray[np.uint64]: ...
