"""How much of the machine other processes used while a measurement ran (from /proc/stat),
so that a scaling benchmark can tell a fair measurement from one taken on a busy machine."""

from __future__ import annotations

import os
import time

# Below this `parallel_capacity`, the machine itself did not run two threads at once: a
# two-thread benchmark then measures the host, not isolane, and skips its gate.
MIN_PARALLEL_CAPACITY = 1.8


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


def parallel_capacity(threads: int = 2, rounds: int = 5) -> float:
    """How many times as much work `threads` threads did as one, on a fixed job that releases
    the GIL (SHA-256 of a few MB each) and shares nothing: what the machine gives a scaling
    benchmark right now. A VM whose host runs its vCPUs on one core, or takes one away, gives
    well under `threads` with no other process in sight, which `ForeignLoad` cannot see."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    data = bytes(4 << 20)

    def job() -> None:
        for _ in range(8):
            hashlib.sha256(data).digest()

    def best_seconds(workers: int) -> float:
        with ThreadPoolExecutor(workers) as pool:
            best = float("inf")
            for _ in range(rounds):
                start = time.perf_counter()
                for future in [pool.submit(job) for _ in range(workers)]:
                    future.result()
                best = min(best, time.perf_counter() - start)
        return best

    return threads * best_seconds(1) / best_seconds(threads)
