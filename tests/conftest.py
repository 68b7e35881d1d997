"""Shared fixtures: where ../shared is, and the sample capture the README runs on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests' own helper modules

from locations import REAL_PCAPS  # noqa: E402


@pytest.fixture(scope="session")
def real_pcaps() -> Path:
    if not REAL_PCAPS.is_dir():
        pytest.skip(f"real captures not found at {REAL_PCAPS} (../shared beside the project)")
    return REAL_PCAPS
