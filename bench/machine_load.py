"""How much of the machine other processes used while a measurement ran (from /proc/stat),
so that a scaling benchmark can tell a fair measurement from one taken on a busy machine."""

from __future__ import annotations

import os
import time


class ForeignLoad:
    """CPU used by *other* processes (in cores) while the block runs, from /proc/stat minus
    this process's own CPU time: tells a real scaling problem from a busy machine."""

    _TICK = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _busy() -> float:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ForeignLoad._TICK

    def __enter__(self):
        self.t0, self.b0, self.c0 = time.perf_counter(), self._busy(), sum(os.times()[:2])
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        own = sum(os.times()[:2]) - self.c0
        self.cores = max(0.0, (self._busy() - self.b0 - own) / wall) if wall > 0 else 0.0
        return False
