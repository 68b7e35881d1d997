"""Reading captures as users hand them over: several files merged by time, standard input,
gzip or zstd compression, and files that Wireshark reads with a warning.

:func:`open_captures` streams :class:`PacketBatch` objects in timestamp order and keeps count
of what it met (:class:`CaptureIssues`); :class:`TunnelPortCheck` watches the parsed records
for tunnels on ports nobody configured. ``docs/parsing.md`` describes both.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from isolane import _core
from isolane.codes import Tunnel

PathArg = str | os.PathLike[str]

#: UDP destination ports that usually carry a tunnel: what each is, and the option that makes
#: isolane decode it (None: isolane does not decode that tunnel).
TUNNEL_PORTS: dict[int, tuple[str, str | None]] = {
    8472: ("VXLAN on the Linux kernel's and flannel's default port", "--vxlan-port"),
    4789: ("VXLAN (IANA port)", "--vxlan-port"),
    4790: ("VXLAN-GPE, which isolane does not decode", None),
    6081: ("Geneve (IANA port)", "--geneve-port"),
}

_UDP = 17


@dataclasses.dataclass(frozen=True)
class Truncation:
    """Where a capture was cut short: the number of the cut packet (from 1), the byte offset of
    its record in the (decompressed) capture, and the bytes of it the file still had."""

    packet: int
    offset: int
    bytes_left: int
    what: str


@dataclasses.dataclass(frozen=True)
class CaptureIssues:
    """What the reader met in one capture: each is read as Wireshark reads it, and counted."""

    path: str
    format: str
    compression: str | None
    packets: int
    truncated: Truncation | None
    compressed_stream_cut: bool
    out_of_order: int
    bad_subsecond: int
    wire_below_captured: int
    obsolete_packet_blocks: int
    unknown_blocks_skipped: int

    @classmethod
    def from_core(cls, issues: dict[str, Any]) -> CaptureIssues:
        cut = issues["truncated"]
        fields = {**issues, "path": os.fspath(issues["path"]), "truncated": None if cut is None else Truncation(*cut)}
        return cls(**fields)

    def warnings(self) -> list[str]:
        """One sentence for each thing met, naming the file."""
        out = []
        if self.compressed_stream_cut:
            out.append(f"{self.path}: the {self.compression} stream ends in the middle: the file was cut short")
        if self.truncated is not None:
            cut = self.truncated
            out.append(
                f"{self.path}: the capture was cut short in the middle of packet {cut.packet:,} (byte offset {cut.offset:,}, "
                f"{cut.bytes_left:,} bytes of its {cut.what} left); the {cut.packet - 1:,} packets before it were read"
            )
        if self.out_of_order:
            out.append(
                f"{self.path}: {_count(self.out_of_order, 'packet')} a timestamp earlier than the packet before (as `mergecap -a` makes); "
                "replay takes time as never going back, so they count as arriving at the latest time seen (`reordercap` sorts a capture)"
            )
        if self.bad_subsecond:
            out.append(
                f"{self.path}: {_count(self.bad_subsecond, 'packet')} a microseconds (nanoseconds) field of a second or more; "
                "the excess was carried into the seconds, as Wireshark computes with it"
            )
        if self.wire_below_captured:
            out.append(
                f"{self.path}: {_count(self.wire_below_captured, 'packet')} a wire length below the captured length "
                "(Wireshark: 'Frame length is less than captured length'); the captured length was used"
            )
        if self.obsolete_packet_blocks:
            out.append(f"{self.path}: {self.obsolete_packet_blocks:,} packets were read from obsolete pcapng Packet Blocks (type 2)")
        if self.unknown_blocks_skipped:
            out.append(f"{self.path}: {self.unknown_blocks_skipped:,} pcapng blocks of types isolane does not know were skipped")
        return out


def _count(count: int, noun: str) -> str:
    """`1 packet has`, `3 packets have`."""
    return f"1 {noun} has" if count == 1 else f"{count:,} {noun}s have"


class Captures:
    """One or more captures read as one stream of :class:`PacketBatch` objects in timestamp
    order (several captures are merged as ``mergecap`` merges them). Iterate over it once."""

    def __init__(self, reader: _core.CaptureReader) -> None:
        self._reader = reader

    def __iter__(self) -> Iterator[_core.PacketBatch]:
        return iter(self._reader)

    @property
    def paths(self) -> list[str]:
        """The captures as messages name them (``<stdin>`` for ``-``)."""
        return [os.fspath(path) for path in self._reader.paths]

    @property
    def formats(self) -> list[str]:
        """Each capture's format, ``"pcap"`` or ``"pcapng"``."""
        return self._reader.formats

    @property
    def format(self) -> str:
        """The one capture's format, or ``"merged"`` for several (see :attr:`formats`)."""
        formats = self.formats
        return formats[0] if len(formats) == 1 else "merged"

    @property
    def compressions(self) -> list[str | None]:
        """Each capture's compression: ``"gzip"``, ``"zstd"`` or None."""
        return self._reader.compressions

    @property
    def position(self) -> int:
        """Bytes read so far (of a compressed file, its compressed bytes), for a progress bar."""
        return self._reader.position

    @property
    def size(self) -> int | None:
        """The files' total size in bytes; None when a capture has none (standard input, a pipe)."""
        return self._reader.size

    @property
    def packets_read(self) -> int:
        return self._reader.packets_read

    @property
    def issues(self) -> list[CaptureIssues]:
        """What the reader met so far, one entry a capture."""
        return [CaptureIssues.from_core(issues) for issues in self._reader.issues()]

    def warnings(self) -> list[str]:
        """One human sentence for each thing met, naming the file."""
        return [warning for issues in self.issues for warning in issues.warnings()]


def open_captures(paths: PathArg | Sequence[PathArg], batch_size: int = 65536) -> Captures:
    """Open one capture or several (``"-"``: standard input), each pcap or pcapng, plain, gzip or
    zstd (told by content, not name), to read as one stream in timestamp order, at most
    ``batch_size`` packets a batch. A file that is not a capture, or is corrupt, raises
    :class:`PcapError` naming the file, byte offset and packet number (from 1); a missing one
    ``FileNotFoundError``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return Captures(_core.CaptureReader([os.fspath(path) for path in paths], batch_size))


class TunnelPortCheck:
    """Counts untunnelled UDP packets to ports that usually carry VXLAN, VXLAN-GPE or Geneve,
    batch by batch, to say afterwards which look like tunnels isolane was not told about."""

    def __init__(self) -> None:
        self._ports = np.array(sorted(TUNNEL_PORTS), dtype=np.uint16)
        self._counts = np.zeros(len(self._ports), dtype=np.int64)

    def observe(self, rows: npt.NDArray[np.void]) -> None:
        """Count the tunnel-looking packets of one batch of parsed records (``isolane.parse``)."""
        plain_udp = (rows["tunnel"] == Tunnel.NONE) & (rows["proto"] == _UDP) & (rows["ip_version"] != 0)
        ports = rows["dst_port"][plain_udp]
        slots = np.searchsorted(self._ports, ports)
        known = slots < len(self._ports)
        known[known] = self._ports[slots[known]] == ports[known]
        self._counts += np.bincount(slots[known], minlength=len(self._ports))

    @property
    def counts(self) -> dict[int, int]:
        """Untunnelled UDP packets seen so far to each tunnel port."""
        return {int(port): int(count) for port, count in zip(self._ports, self._counts)}

    def warnings(self, vxlan_ports: Iterable[int], geneve_ports: Iterable[int]) -> list[str]:
        """One sentence for each tunnel port with untunnelled UDP packets that is not among the ports configured."""
        configured = set(vxlan_ports) | set(geneve_ports)
        out = []
        for port, count in self.counts.items():
            if count == 0 or port in configured:
                continue
            what, option = TUNNEL_PORTS[port]
            advice = f"; if they are, add `{option} {port}`" if option else ""
            out.append(f"{count:,} untunnelled UDP packets go to port {port}, which looks like {what}{advice}")
        return out
