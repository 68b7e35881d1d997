"""Loaded by pytest before `tests/` and `bench/` and anything they import."""

import os

# OpenBLAS worker threads spin after numpy's first BLAS call; on a two-core machine they take
# the core a measurement shares (10-tenant engine: 17 Mpps with them, 27 without; the
# machine's two-thread capacity 1.3x instead of 2.0x when `tests` ran first). isolane uses no
# BLAS. Must be set before numpy is imported, so here rather than in `bench/conftest.py`.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
