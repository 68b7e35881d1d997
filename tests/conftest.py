"""Shared fixtures: where ../shared is, and the sample capture the README runs on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REAL_PCAPS = SHARED / "pcaps" / "real"
SAMPLE = ROOT / "pcaps" / "kernel_vxlan.pcap"

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests' own helper modules


@pytest.fixture(scope="session")
def real_pcaps() -> Path:
    if not REAL_PCAPS.is_dir():
        pytest.skip(f"real captures not found at {REAL_PCAPS} (../shared beside the project)")
    return REAL_PCAPS
