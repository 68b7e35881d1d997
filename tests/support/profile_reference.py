"""Adaptive burst profiles as docs/qos.md ("Adaptive profiles") and docs/bursts.md ("The rate
view") state them, for one tenant, written from the text rather than from the engine: its packets
in, the profile each packet is enforced under and the switches out."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

NORMAL, BURST = 0, 1
BURST_STARTED, BURST_ENDED = 0, 1


@dataclass
class BurstProfileReference:
    window_ns: int
    limit_bytes: int
    hold_ns: int
    max_switches: int = 0
    """Switches into the profile allowed in any second of packet time; 0: no limit."""

    profile: int = NORMAL
    switches: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(time, from, to, cause)."""
    _window: deque[tuple[int, int]] = field(default_factory=deque)
    _sum: int = 0
    _open: bool = False
    _ended_ns: int = 0
    _in_burst: bool = False
    _granted: bool = False
    _hold_until: int = 0
    _switch_tat: int = 0

    def packet(self, now: int, size: int) -> int:
        """The profile the tenant's packet at ``now`` (``size`` bytes as the policy counts) is
        enforced under; switches that it or the time before it cause are recorded."""
        self._leave(now)
        self._end_hold(now)
        enforced_under = self.profile
        self._window.append((now + self.window_ns, size))
        self._sum += size
        if not self._open and self._sum > self.limit_bytes:
            self._open = True  # a rate event starts with this packet
        if self._open and not self._in_burst:
            self._in_burst = True
            if not self._granted or now >= self._hold_until:
                self._granted = self._may_switch(now)
            if self._granted and self.profile == NORMAL:
                self._switch(now, BURST, BURST_STARTED)
        return enforced_under

    def drain(self) -> None:
        """The end of the stream: the window empties, the hold runs out."""
        self._leave(2**64 - 1)
        self._end_hold(2**64 - 1)

    def _leave(self, now: int) -> None:
        while self._window and self._window[0][0] <= now:
            leaves, size = self._window.popleft()
            self._sum -= size
            if self._open and self._sum <= self.limit_bytes:
                self._open, self._ended_ns = False, leaves
        if self._in_burst and not self._open:
            self._in_burst = False
            self._hold_until = self._ended_ns + self.hold_ns

    def _end_hold(self, now: int) -> None:
        if self.profile == BURST and not self._in_burst and self._hold_until <= now:
            self._granted = False
            self._switch(self._hold_until, NORMAL, BURST_ENDED)

    def _may_switch(self, now: int) -> bool:
        if self.max_switches == 0:
            return True
        tat = max(self._switch_tat, now) + 10**9 // self.max_switches
        if tat - now > 10**9:
            return False
        self._switch_tat = tat
        return True

    def _switch(self, time: int, to: int, cause: int) -> None:
        self.switches.append((time, self.profile, to, cause))
        self.profile = to
